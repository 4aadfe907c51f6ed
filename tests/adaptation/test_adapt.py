"""`cselab adapt`: the plan, the label-free selection score (against scipy), a whole tiny run, resume and
one-line refusals."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from cselab.adaptation import plan_adapt
from cselab.adaptation.estimate import ForwardCost, extrapolate_seconds
from cselab.adaptation.examples import split_held_out
from cselab.adaptation.plan import default_steps
from cselab.adaptation.recipe import load_recipe
from cselab.adaptation.selection import held_out_pairs
from cselab.errors import CselabError
from cselab.evaluation.sts_evaluator import StsEvaluator
from cselab.models.sentence_model import load_model
from tests.adaptation.test_adapt_distill import write_recipe
from tests.helpers import LAB_RECIPES, WORDS, build_tiny_model_dir, recipe_with, run_cli

DISTILL = LAB_RECIPES / "distill.yaml"  # the domain study's cosines recipe (guarded selection, mixed units)


def write_text(path, n=240, seed=0):
    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    lines = {" ".join(rng.choice(words) for _ in range(rng.randint(4, 10))) for _ in range(n * 2)}
    path.write_text("\n".join(sorted(lines)[:n]) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_teacher_dir(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-teacher"), "bert", seed=7)


def test_split_holds_out_five_percent_of_distinct_sentences_and_is_seeded():
    sentences = [f"sentence {i}" for i in range(1000)] + ["sentence 3"]
    train, held = split_held_out(sentences)
    assert len(held) == 50 and len(train) == 950
    assert not set(train) & set(held)
    assert split_held_out(sentences) == (train, held)
    assert len(split_held_out([f"s{i}" for i in range(100_000)])[1]) == 500  # at most 500


def test_default_budget_is_three_passes_within_bounds():
    simcse = load_recipe("simcse")  # three passes of 64, 100 to 450 steps
    assert default_steps(9_500, simcse) == 446  # ceil(3 * 9500 / 64): three passes, under the cap
    assert default_steps(10_000, simcse) == 450  # three passes would be 469: the cap
    assert default_steps(100, simcse) == 100
    assert default_steps(10_000_000, simcse) == 450
    # the passes are over the recipe's own batch: three passes of 4,000 examples in steps of 32
    assert default_steps(4_000, recipe_with("simcse", batch_size=32)) == 375  # ceil(3 * 4000 / 32)


def test_held_out_pairs_are_nearest_and_random_partners_with_teacher_cosines():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(12, 5))
    sentences = [f"s{i}" for i in range(12)]
    firsts, seconds, targets = held_out_pairs(sentences, vectors)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for k in range(0, 24, 2):
        i = int(firsts[k][1:])
        assert firsts[k + 1] == firsts[k]
        cos = [float(unit[i] @ unit[j]) if j != i else -9 for j in range(12)]
        assert int(seconds[k][1:]) == int(np.argmax(cos))  # the nearest other sentence by the teacher
        assert seconds[k + 1] != firsts[k + 1]  # the random partner is another sentence
    for a, b, t in zip(firsts, seconds, targets, strict=True):
        assert t == pytest.approx(float(unit[int(a[1:])] @ unit[int(b[1:])]))


def test_the_selection_score_is_spearman_of_student_and_teacher_cosines(tiny_bert_dir, tiny_teacher_dir, tmp_path):
    from cselab.adaptation.selection import teacher_agreement_task

    held = [line for line in write_text(tmp_path / "t.txt", n=30).read_text().splitlines()]
    teacher, student = load_model(tiny_teacher_dir, pooler="mean"), load_model(tiny_bert_dir, pooler="mean")
    task = teacher_agreement_task(held, teacher)
    score = StsEvaluator([task], primary="teacher-agreement/dev").primary_score(StsEvaluator([task])(student))
    sub = task.subsets[0]
    a, b = student.encode(sub.sentences1), student.encode(sub.sentences2)
    student_cos = torch.nn.functional.cosine_similarity(a, b).numpy()
    ta, tb = teacher.encode(sub.sentences1), teacher.encode(sub.sentences2)
    teacher_cos = torch.nn.functional.cosine_similarity(ta, tb).numpy()
    assert score == pytest.approx(100 * spearmanr(student_cos, teacher_cos).statistic, abs=1e-4)


def test_the_time_estimate_extrapolates_one_forward_by_hand(tmp_path, long_bert_dir):
    text = write_text(tmp_path / "text.txt")  # 240 sentences: 220 to train on, 20 held out (the minimum)
    simcse = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), steps=150,
                        recipe=recipe_with("simcse", batch_size=32))
    assert (simcse.train_sentences, len(simcse.held_out), simcse.config.train.eval_every) == (220, 20, 150)
    student = ForwardCost(seconds_per_token=0.001, tokens_per_sentence=20)  # 0.02 s a sentence
    # 150 steps x 2.2 x 2 rows x 32 sentences x 0.02 s = 422.4 s; one evaluation (the last step) x 2 rows x 20 x 0.02
    assert extrapolate_seconds(simcse, student) == pytest.approx(422.4 + 0.8)
    # timed in bf16, a training step costs 2.9 inference passes: 150 x 2.9 x 2 x 32 x 0.02 = 556.8 s; an
    # unmeasured precision (fp16) takes fp32's 2.2
    bf16 = ForwardCost(seconds_per_token=0.001, tokens_per_sentence=20, precision="bf16")
    assert extrapolate_seconds(simcse, bf16) == pytest.approx(556.8 + 0.8)
    fp16 = ForwardCost(seconds_per_token=0.001, tokens_per_sentence=20, precision="fp16")
    assert extrapolate_seconds(simcse, fp16) == pytest.approx(422.4 + 0.8)
    distil = plan_adapt(text, tmp_path / "b", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=100,
                        recipe=recipe_with(DISTILL, select="distillation-loss", units="lines",
                                           overrides=("train.eval_every=25",)))
    teacher = ForwardCost(seconds_per_token=0.004, tokens_per_sentence=25)  # 0.1 s a sentence
    # 100 x 2.2 x 1 row (one view) x 64 x 0.02 s = 281.6 s; 5 evaluations (step 0 and every 25) x 1 row x 20 x
    # 0.02 = 2 s; the teacher's pass over all 240 sentences: 240 x 0.1 s = 24 s
    assert extrapolate_seconds(distil, student, teacher) == pytest.approx(281.6 + 2 + 24)
    # target pairs: each anchor brings one neighbour and one random partner, 3 rows: 100 x 2.2 x 3 x 16 x 0.02 s
    pairs = plan_adapt(text, tmp_path / "c", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=100,
                       recipe=recipe_with(DISTILL, units="lines", overrides=("train.eval_every=25",),
                                          method_options={**load_recipe(DISTILL).method_options, "target": "pairs",
                                                          "neighbours": 10}))
    # and the default selection, the guard: 5 evaluations x 2 views (lines, passages) x 20 x 0.02 = 4 s; the
    # teacher's pass also over both views of the held-out text: (220 + 20 x 3) x 0.1 = 28 s
    assert pairs.selection == "guarded-distillation-loss"
    assert extrapolate_seconds(pairs, student, teacher) == pytest.approx(211.2 + 4 + 28)
    # SimCSE's term beside the distillation: each example encoded twice, 100 x 2.2 x 2 x 64 x 0.02 s = 563.2 s
    contrastive = plan_adapt(text, tmp_path / "b2", model=str(long_bert_dir), teacher=str(long_bert_dir),
                             steps=100, recipe=recipe_with(
                                 DISTILL, select="distillation-loss", units="lines",
                                 overrides=("train.eval_every=25",),
                                 method_options={**load_recipe(DISTILL).method_options, "contrastive": True}))
    assert extrapolate_seconds(contrastive, student, teacher) == pytest.approx(563.2 + 2 + 24)
    # a teacher pass already kept (teacher None): no pass to count
    assert extrapolate_seconds(distil, student) == pytest.approx(281.6 + 2)
    # a fixed budget: one evaluation (the last step), 1 row x 20 x 0.02 = 0.4 s
    fixed = plan_adapt(text, tmp_path / "c", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=100,
                       recipe=recipe_with(DISTILL, select="fixed-budget", units="lines"))
    assert (fixed.selection, fixed.config.train.eval_every, fixed.config.train.eval_at_start) == \
        ("fixed-budget", 100, False)
    assert extrapolate_seconds(fixed, student, teacher) == pytest.approx(281.6 + 0.4 + 24)
    # passages: an example holds as many tokens as its lines, 220 lines in len(train_units) passages
    passages = plan_adapt(text, tmp_path / "d", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=100,
                          recipe=recipe_with(DISTILL, select="fixed-budget", units="passages"))
    lines = 220 / len(passages.train_units)
    assert lines > 1.5
    assert extrapolate_seconds(passages, student, teacher) == pytest.approx(281.6 * lines + 0.4 + 24)
    # mixed: the lines, then the same passages (the same seed); the examples hold every line twice, so an example
    # holds 440 / len(train_units) lines; the teacher's pass reads the training lines twice and the held-out lines
    # twice (as lines and in passages): (440 + 20 x 2) x 0.1 = 48 s
    mixed = plan_adapt(text, tmp_path / "e", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=100,
                       recipe=recipe_with(DISTILL, select="fixed-budget", units="mixed"))
    train_lines = mixed.train_units[:220]
    assert mixed.train_units == [*train_lines, *passages.train_units]
    assert train_lines == [s for s in text.read_text().splitlines() if s not in set(mixed.held_out)]
    assert mixed.held_out_units == [*mixed.held_out, *passages.held_out_units]
    assert extrapolate_seconds(mixed, student, teacher) == pytest.approx(
        281.6 * 440 / len(mixed.train_units) + 0.4 + 48)


def test_the_time_estimate_loads_each_model_once(tmp_path, long_bert_dir, monkeypatch):
    """The student once, the teacher once: for its pass's key and, with no pass kept, its timed forward."""
    from cselab.adaptation.estimate import estimate_seconds
    from cselab.models import sentence_model

    text = write_text(tmp_path / "text.txt")
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=20,
                      recipe=recipe_with(DISTILL, units="lines"))
    loads: list[str] = []
    load = sentence_model.load_model
    monkeypatch.setattr(sentence_model, "load_model", lambda name, **k: loads.append(str(name)) or load(name, **k))
    assert estimate_seconds(plan) > 0
    assert loads == [str(long_bert_dir), str(long_bert_dir)]


def test_plan_refuses_bad_input_in_one_line(tmp_path, tiny_bert_dir):
    small = tmp_path / "small.txt"
    small.write_text("one sentence\nanother one\n")
    with pytest.raises(CselabError, match="at least 200"):
        plan_adapt(small, tmp_path / "out", model=str(tiny_bert_dir), no_teacher=True)
    text = write_text(tmp_path / "text.txt")
    with pytest.raises(CselabError, match="cselab data fetch models-mpnet"):
        plan_adapt(text, tmp_path / "out", model=str(tiny_bert_dir), teacher="all-mpnet-base-v2")  # empty home
    with pytest.raises(CselabError, match="teacher not found: nope"):
        plan_adapt(text, tmp_path / "out", model=str(tiny_bert_dir), teacher="nope")
    default = plan_adapt(text, tmp_path / "out", model=str(tiny_bert_dir))  # no teacher named: SimCSE
    assert (default.teacher, default.selection, default.config.method) == (None, "fixed-budget", "simcse")
    with pytest.raises(CselabError, match="not both"):
        plan_adapt(text, tmp_path / "out", teacher="x", no_teacher=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, recipe, message", [
    (["--steps", "0"], None, "--steps"),
    ([], ("simcse", {"batch_size": 1}), ": batch_size: Input should be greater than or equal to 2"),
    ([], ("simcse", {"max_length": 2}), ": max_length: Input should be greater than or equal to 8"),
    (["--teacher", "T", "--no-teacher"], None, "not both"),
    # a recipe that selects by a teacher, with no teacher: refused, and a SimCSE recipe cannot select by one
    (["--no-teacher"], (DISTILL, {"select": "teacher-agreement"}), "the distill recipe distils a teacher: drop "
     "--no-teacher"),
    ([], ("simcse", {"select": "teacher-agreement"}), "a simcse recipe trains without a teacher"),
    ([], ("simcse", {"select": "best"}), ": select: Input should be 'fixed-budget', 'distillation-loss', "
     "'teacher-agreement' or 'guarded-distillation-loss'"),
    (["--recipe", "nonsense"], None, "--recipe nonsense: no such file"),
])
def test_cli_refuses_bad_options_before_any_work(tmp_path, capsys, tiny_bert_dir, args, recipe, message):
    text = write_text(tmp_path / "text.txt")
    if recipe is not None:
        args = [*args, "--recipe", str(write_recipe(tmp_path / "recipe.yaml", recipe[0], **recipe[1]))]
    code, _, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--output", str(tmp_path / "o"), *args],
                           capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "o").exists()


def test_a_tiny_adaptation_runs_selects_without_labels_and_resumes(tiny_bert_dir, tiny_teacher_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = write_recipe(tmp_path / "recipe.yaml", DISTILL, batch_size=8, max_length=16, select="teacher-agreement",
                          overrides=("train.eval_every=2",))
    args = ["adapt", str(text), "--model", str(tiny_bert_dir), "--teacher", str(tiny_teacher_dir), "--output", str(out),
            "--recipe", str(recipe), "--steps", "4"]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert summary["selection"] == "teacher-agreement" and summary["held_out"] == 20
    held = set((out / "held-out.txt").read_text().splitlines())
    assert not held & set((out / "train.txt").read_text().splitlines())  # never trained on
    dev = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    scores = {r["step"]: r["dev"] for r in dev if "dev" in r}
    assert sorted(scores) == [0, 2, 4]  # the untouched model is a candidate
    assert summary["best_step"] == max(scores, key=lambda s: (scores[s], -s))
    # the model handed back is OUTPUT/model (the selected step, unmixed: the recipe's mix is 1), with its card
    card = (out / "model" / "README.md").read_text()
    assert "## Adaptation" in card and (out / "adapt-report.png").stat().st_size > 0
    assert load_model(out / "model").encode(["a sentence"]).shape == (1, 32)
    assert summary["model_dir"] == str(out / "model") and (out / "best").is_dir()
    # a second run into the finished directory is refused, the resume reports it again without training
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "finished adaptation" in err


def test_a_teacher_run_keeps_the_last_step_with_a_fixed_budget(tiny_bert_dir, tiny_teacher_dir, tmp_path, capsys):
    """--teacher with a recipe that selects fixed-budget: the teacher agreement is scored once, at the last step,
    and the last step is the model (the untouched model is no candidate)."""
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = write_recipe(tmp_path / "recipe.yaml", DISTILL, batch_size=8, max_length=16, select="fixed-budget")
    code, _, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--teacher", str(tiny_teacher_dir),
                            "--recipe", str(recipe), "--output", str(out), "--steps", "3"], capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["selection"], summary["best_step"]) == ("fixed-budget", 3)
    dev = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in dev if "dev" in r] == [3]
    assert json.loads((out / "best" / "cselab.json").read_text())["training"]["method"] == "distill"
    assert json.loads((out / "model" / "cselab.json").read_text())["adaptation"]["best_step"] == 3


def test_the_default_adaptation_is_simcse_on_a_fixed_budget_without_sts_data(tiny_bert_dir, tmp_path, monkeypatch,
                                                                            capsys):
    from cselab.adaptation.selection import HeldOutScores

    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "empty-home"))  # no STS data, no teacher fetched
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    # SimCSE's recipe (the default without a teacher) on a tiny batch and length, in fp32 (exact scores)
    recipe = write_recipe(tmp_path / "recipe.yaml", "simcse", batch_size=8, max_length=16,
                          overrides=("train.precision=fp32",))
    code, stdout, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--output", str(out), "--steps",
                                 "3", "--recipe", str(recipe)], capsys)
    assert code == 0, err  # fp32 above: exact scores
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["teacher"], summary["recipe"], summary["selection"], summary["best_step"]) == (
        None, "simcse", "fixed-budget", 3)
    assert 0 < summary["train_s"] <= summary["wall_s"] and summary["evaluate_s"] >= 0
    # the estimate shown before training is the one recorded beside the measured times
    assert summary["estimate_s"] is not None and f"estimated {summary['estimate_s'] / 60:.0f} min" in stdout
    assert {"git", "machine", "date"} <= set(summary["provenance"]) and summary["provenance"]["machine"]["cpu"]
    assert f"({summary['train_s']:.0f} s training" in (out / "adapt-report.md").read_text()
    config = json.loads((out / "best" / "cselab.json").read_text())
    assert config["training"]["method"] == "simcse"
    dev = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    scores = {r["step"]: r["dev"] for r in dev if "dev" in r}
    assert list(scores) == [3]  # one evaluation: the last step, which a fixed budget keeps
    held = (out / "held-out.txt").read_text().splitlines()
    expected = -HeldOutScores(held)(load_model(out / "best"))["infonce"]
    assert scores[3] == pytest.approx(expected, abs=1e-4)
    # handed back unmixed (SimCSE's mix is 1): OUTPUT/model holds the selected step's weights
    handed, selected = (load_model(out / name, device="cpu").state_dict() for name in ("model", "best"))
    assert handed.keys() == selected.keys() and all(torch.equal(handed[k], selected[k]) for k in handed)


def test_passages_hold_every_line_once_within_the_length():
    from cselab.adaptation.examples import make_passages

    sentences = [f"s{i}" for i in range(500)]
    lengths = [1 + (7 * i) % 40 for i in range(500)]  # tokens of each line, 1 to 40
    passages = make_passages(sentences, lengths, 100, seed=3)
    assert passages == make_passages(sentences, lengths, 100, seed=3)  # seeded
    members = [p.split(" ") for p in passages]
    assert sorted(s for m in members for s in m) == sorted(sentences)  # every line exactly once
    size = {s: n for s, n in zip(sentences, lengths, strict=True)}
    for m in members:  # several lines only where they fit; one line may be longer alone
        assert len(m) == 1 or sum(size[s] for s in m) <= 100
    counts = [len(m) for m in members]
    assert min(counts) == 1 and max(counts) >= 5  # targets drawn from 1 to 100 tokens: singles and long passages
    assert make_passages(sentences, lengths, 100, seed=4) != passages


def test_nearest_in_words_ranks_by_tfidf_cosine_computed_by_hand():
    import math

    from cselab.adaptation.examples import nearest_in_words

    sentences = ["red apple pie", "red apple", "apple", "blue car engine", "car engine", "zebra"]
    words = [s.split() for s in sentences]
    n = len(sentences)
    idf = {w: math.log((1 + n) / (1 + sum(w in ws for ws in words))) + 1 for ws in words for w in ws}

    def vector(ws: list[str]) -> dict[str, float]:  # sublinear tf (every word once here: 1) times idf, unit length
        raw = {w: (1 + math.log(ws.count(w))) * idf[w] for w in ws}
        norm = math.sqrt(sum(v * v for v in raw.values()))
        return {w: v / norm for w, v in raw.items()}

    vectors = [vector(ws) for ws in words]
    expected = []
    for i in range(n):
        cosines = {j: sum(v * vectors[j].get(w, 0.0) for w, v in vectors[i].items()) for j in range(n) if j != i}
        expected.append(sorted((j for j, c in cosines.items() if c > 0), key=lambda j: (-cosines[j], j)))
    assert expected[0] == [1, 2] and expected[5] == []  # the example means what it should
    assert nearest_in_words(sentences) == expected
    assert nearest_in_words(sentences, k=1) == [e[:1] for e in expected]


def test_similar_passages_group_lines_that_share_words():
    from cselab.adaptation.examples import make_passages

    topics = ["football goal match", "election vote party", "piano concert music"]
    sentences = [f"{topics[i % 3]} w{i}" for i in range(90)]  # each line: its topic's words and a word of its own
    lengths = [4] * 90
    passages = make_passages(sentences, lengths, 40, seed=2, grouping="similar")
    assert passages == make_passages(sentences, lengths, 40, seed=2, grouping="similar")
    members = [p.split(" ") for p in passages]
    lines = [" ".join(m[k:k + 4]) for m in members for k in range(0, len(m), 4)]
    assert sorted(lines) == sorted(sentences)  # every line exactly once
    assert all(len(m) <= 40 or len(m) == 4 for m in members)  # a line is 4 words of one token each
    assert all(len({p.split(" ")[k] for k in range(0, len(p.split(" ")), 4)}) == 1 for p in passages)  # one topic
    shuffled = make_passages(sentences, lengths, 40, seed=2)
    assert any(len({p.split(" ")[k] for k in range(0, len(p.split(" ")), 4)}) > 1 for p in shuffled)
    with pytest.raises(CselabError, match="passages must be one of"):
        make_passages(sentences, lengths, 40, grouping="nearest")


def test_similar_passages_reach_the_training_the_held_out_text_and_the_guard(tmp_path, long_bert_dir):
    from cselab.adaptation.examples import make_passages
    from cselab.adaptation.selection import GUARD_MAX_LENGTH

    text = tmp_path / "text.txt"
    topics = ["football goal match", "election vote party", "piano concert music", "river boat water"]
    text.write_text("".join(f"{topics[i % 4]} number{i}\n" for i in range(240)))
    plan = plan_adapt(text, tmp_path / "s", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=10,
                      recipe=recipe_with(DISTILL, units="mixed", passages="similar"))
    shuffled = plan_adapt(text, tmp_path / "s", model=str(long_bert_dir), teacher=str(long_bert_dir), steps=10,
                          recipe=recipe_with(DISTILL, units="mixed"))
    assert (plan.passages, shuffled.passages) == ("similar", "shuffled")
    assert "passages of similar lines" in plan.describe() and "similar" not in shuffled.describe()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(long_bert_dir))

    def made(lines: list[str], max_length: int) -> list[str]:  # the passages of lines as make_passages groups them
        lengths = [len(tokenizer(s)["input_ids"]) - 2 for s in lines]
        return make_passages(lines, lengths, max_length - 2, grouping="similar")

    train = plan.train_units[:plan.train_sentences]
    assert plan.train_units == [*train, *made(train, 256)]
    assert plan.held_out_units == [*plan.held_out, *made(plan.held_out, 256)]
    assert plan.guard_views["passages"] == made(plan.held_out, GUARD_MAX_LENGTH)
    assert plan.train_units != shuffled.train_units
    facts = plan.facts()
    assert facts["passages"] == "similar" and "passages" not in shuffled.facts()
    near = write_recipe(tmp_path / "near.yaml", DISTILL, passages="near")
    with pytest.raises(CselabError, match="passages: Input should be 'shuffled' or 'similar'"):
        plan_adapt(text, tmp_path / "s", model=str(long_bert_dir), teacher=str(long_bert_dir), recipe=near)
