"""`cselab adapt` with a teacher: the default teacher once fetched, the teacher's pass kept in the run, the held-out
distillation loss as the selection criterion, and a run directory that is never another's (resume only the same
adaptation; refusals leave no trace).

Expected values come from numpy over the models' own ``encode``, never from the code under test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from cselab.errors import CselabError
from cselab.models.sentence_model import load_model
from tests.helpers import LAB_RECIPES, WORDS, recipe_with, run_cli

DISTILL = LAB_RECIPES / "distill.yaml"  # the domain study's cosines recipe, what this file tests


def write_text(path: Path, n: int = 240, seed: int = 0) -> Path:
    import random

    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    lines = {" ".join(rng.choice(words) for _ in range(rng.randint(4, 10))) for _ in range(n * 2)}
    path.write_text("\n".join(sorted(lines)[:n]) + "\n")
    return path


def write_general(path: Path, n: int, also: list[str] = ()) -> Path:
    """``n`` distinct sentences of capitalised words (unlike the user's text, whose words are lower case), then
    ``also``."""
    import random

    rng = random.Random(3)
    words = [w.capitalize() for w in WORDS if w.isalpha()]
    lines = sorted({" ".join(rng.choice(words) for _ in range(rng.randint(5, 9))) for _ in range(n * 2)})[:n]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*lines, *also]) + "\n")
    return path


def write_recipe(path: Path, base: str | Path = "vectors-and-head", **fields) -> Path:
    """A user's recipe file (YAML) for ``cselab adapt --recipe FILE``: ``base`` (a shipped recipe's name or a YAML
    file) with ``fields`` changed, written as a user would write it (:func:`tests.helpers.recipe_with`); a field that
    no recipe may hold (a bad value) is written as given, for the command to refuse."""
    import yaml

    from cselab.adaptation.recipe import load_recipe
    from tests.helpers import recipe_with

    try:
        raw = recipe_with(base, **fields).model_dump(mode="json", by_alias=True)
    except ValueError:  # pydantic's ValidationError: a recipe the command is to refuse
        raw = {**load_recipe(base).model_dump(mode="json", by_alias=True), **fields}
    raw["overrides"] = list(raw.get("overrides", ()))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the lock aside) and the sha256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".cselab.lock" not in p.name}


def tiny_recipe(path: Path, *overrides: str, **fields) -> Path:
    """The cosines recipe (``distill``, what this file tests) on a tiny batch (8) and length (16) in fp32, with
    ``fields`` and the run-configuration ``overrides`` (KEY=VALUE) beside: a user's recipe file."""
    return write_recipe(path, DISTILL, batch_size=8, max_length=16,
                        overrides=("train.precision=fp32", *overrides), **fields)


def _args(text, student, out, *extra, recipe: Path | None = None):
    """``cselab adapt`` with ``recipe`` (default: :func:`tiny_recipe` as it is, written beside ``out``) for 4
    steps."""
    if recipe is None:
        recipe = tiny_recipe(Path(out).parent / "tiny-distill.yaml")
    return ["adapt", str(text), "--model", str(student), "--output", str(out), "--recipe", str(recipe),
            "--steps", "4", *extra]


def test_the_fetched_teacher_is_used_by_default_and_no_teacher_is_simcse(home_with_teacher, long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir))
    assert (plan.teacher, plan.recipe.name, plan.config.method, plan.mix) == (
        "all-mpnet-base-v2", "vectors-and-head", "distill", 0.75)
    simcse = plan_adapt(text, tmp_path / "b", model=str(long_bert_dir), no_teacher=True)
    assert (simcse.teacher, simcse.recipe.name, simcse.config.method, simcse.mix) == (None, "simcse", "simcse", 1.0)


def test_the_default_with_a_teacher_trains_on_general_sentences_and_hands_back_three_quarters(
        home_with_teacher, tiny_bert_dir, tmp_path, capsys):
    """`cselab adapt`'s default recipe with a teacher (vectors-and-head, on a tiny batch and length), end to end: the
    fetched corpus's sentences trained on beside the user's passages, as many as the budget draws, both vector terms
    trained, the last step kept, and the model handed back (OUTPUT/model) 0.25 untouched + 0.75 adapted of every
    weight, of the student's width (the head dropped)."""
    from collections import Counter

    from tests.adaptation.test_adapt_mix import _assert_mixed

    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = write_recipe(tmp_path / "recipe.yaml", "vectors-and-head", batch_size=8, max_length=16,
                          overrides=("train.precision=fp32",))
    code, stdout, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--output", str(out), "--steps",
                                 "3", "--recipe", str(recipe)], capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["recipe"], summary["selection"], summary["best_step"], summary["mix"]) == (
        "vectors-and-head", "fixed-budget", 3, 0.75)
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in log if "distillation_cosine" in r or "head_distillation_cosine" in r]
    assert logged and all("distillation_cosine" in r and "head_distillation_cosine" in r for r in logged)
    examples = (out / "train.txt").read_text().splitlines()
    corpus = set((home_with_teacher / "corpus" / "default.txt").read_text().splitlines())
    mine = set(text.read_text().splitlines())
    general = summary["general_sentences"]
    own, drawn = examples[:len(examples) - general], examples[len(examples) - general:]
    assert 0 < general == len(own) and set(drawn) <= corpus and not set(drawn) & mine
    # the budget trains on 3 steps of 8 examples: half of them passages of the user's text, half general sentences
    assert len(own) == 3 * 8 // 2
    training_words = Counter(" ".join(mine - set((out / "held-out.txt").read_text().splitlines())).split())
    assert Counter(" ".join(own).split()) <= training_words  # passages of training lines, each line at most once
    _assert_mixed(tiny_bert_dir, out / "best", out / "model", 0.75)
    assert f"model: {out / 'model'} " in stdout and summary["model_dir"] == str(out / "model")


def test_the_cosines_recipe_plans_neighbours_mixed_units_and_the_guard(home_with_teacher, long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), recipe=DISTILL)
    options = plan.config.method_options
    assert (options["target"], options["projection"], options["vector_loss"], options["neighbours"]) == (
        "similarities", "none", "mse", 3)
    assert options["teacher_vectors"] == str(tmp_path / "a" / "teacher")
    # every line as itself and in passages of up to 256 tokens; a line's neighbours among the 220 training lines,
    # a passage's among the passages; each batch run in 4 sub-batches of similar length
    assert (plan.units, plan.config.model.max_length, plan.config.train.batch_size) == ("mixed", 256, 16)
    assert (options["neighbour_blocks"], options["length_groups"]) == ([220], 4)
    assert plan.held_out_units[:20] == plan.held_out and len(plan.held_out) == 20
    # the recipe's budget: one pass over the examples (220 lines and their passages) in steps of 16, at least 100
    assert (plan.selection, plan.steps, plan.config.train.lr) == ("guarded-distillation-loss", 100, 1e-4)
    assert plan.config.train.eval_at_start and plan.config.train.eval_every == 12
    assert (plan.mix, plan.general_units) == (1.0, [])


def test_the_general_vector_recipe_plans_passages_general_sentences_and_a_quarter_mix(home_with_teacher,
                                                                                      long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), recipe=LAB_RECIPES / "vectors-general.yaml")
    assert (plan.teacher, plan.config.method) == ("all-mpnet-base-v2", "distill")
    options = plan.config.method_options
    assert (options["target"], options["projection"], options["vector_loss"], options["neighbours"]) == (
        "vectors", "pca-rotation", "cosine", 0)
    assert options["teacher_vectors"] == str(tmp_path / "a" / "teacher")
    # passages of the 220 training lines (up to 256 tokens), then as many sentences of the fetched corpus
    corpus = (home_with_teacher / "corpus" / "default.txt").read_text().splitlines()
    assert plan.general == str(home_with_teacher / "corpus" / "default.txt")
    assert len(plan.general_units) == len(plan.text_units) and set(plan.general_units) <= set(corpus)
    assert sorted(" ".join(plan.text_units).split()) == sorted(" ".join(
        set(text.read_text().splitlines()) - set(plan.held_out)).split())
    assert (plan.units, plan.config.model.max_length, plan.config.train.batch_size) == ("passages", 256, 64)
    # 200 steps whatever the text, the last one kept, a quarter of its weights handed back in OUTPUT/model
    assert (plan.selection, plan.steps, plan.config.train.lr) == ("fixed-budget", 200, 1e-4)
    assert (plan.mix, plan.model_dir) == (0.25, tmp_path / "a" / "model")
    # the same recipe by its fields, as the domain study ran it before it had a name: the passages recipe with the
    # fetched corpus's general sentences and a quarter mix
    spelled = plan_adapt(text, tmp_path / "b", model=str(long_bert_dir), steps=200, recipe=recipe_with(
        LAB_RECIPES / "vectors-passages.yaml", general=True,
        general_file=str(home_with_teacher / "corpus" / "default.txt"), mix=0.25))
    paths = {"train": {"output_dir"}, "data": {"corpus"}, "method_options": {"teacher_vectors"}}
    assert spelled.config.model_dump(exclude=paths) == plan.config.model_dump(exclude=paths)
    assert spelled.general_units == plan.general_units and spelled.train_units == plan.train_units


def test_the_default_is_the_general_vector_recipe_with_the_head_beside_the_rotation_and_three_quarters_mixed(
        home_with_teacher, long_bert_dir, tmp_path):
    """vectors-and-head plans vectors-general's training with projection pca-rotation+linear-head and nothing else
    changed, and hands back three quarters of the adapted weights."""
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir))
    general = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), recipe=LAB_RECIPES / "vectors-general.yaml")
    assert plan.config.method_options["projection"] == "pca-rotation+linear-head"
    changed = general.config.model_dump()
    changed["method_options"]["projection"] = "pca-rotation+linear-head"
    assert plan.config.model_dump() == changed
    assert (plan.train_units, plan.general_units, plan.held_out) == (
        general.train_units, general.general_units, general.held_out)
    assert (plan.steps, plan.selection, plan.mix, general.mix) == (200, "fixed-budget", 0.75, 0.25)
    assert plan.model_dir == general.model_dir == tmp_path / "a" / "model"


def test_the_default_without_the_corpus_says_how_to_fetch_it_and_writes_nothing(home_with_teacher, long_bert_dir,
                                                                                 tmp_path, capsys, monkeypatch):
    import cselab.data.registry.fetch

    def offline(*args, **kwargs):  # no registry reachable: the corpus cannot be fetched here either
        raise CselabError("offline")

    monkeypatch.setattr(cselab.data.registry.fetch, "fetch", offline)
    (home_with_teacher / "corpus" / "default.txt").unlink()
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "out"
    code, _, err = run_cli(["adapt", str(text), "--model", str(long_bert_dir), "--output", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1 and "cselab data fetch corpus" in err, err
    assert not out.exists()
    # a file of the user's own general sentences serves instead (the recipe's general_file)
    from cselab.adaptation import plan_adapt

    general = write_general(tmp_path / "general.txt", 50)
    plan = plan_adapt(text, out, model=str(long_bert_dir), recipe=recipe_with(general_file=str(general)))
    assert (plan.recipe.name, plan.general) == ("vectors-and-head", str(general))
    assert len(plan.general_units) == len(plan.text_units) and set(plan.general_units) <= set(
        general.read_text().splitlines())


def test_no_teacher_at_hand_means_simcse(tiny_bert_dir, tmp_path):
    from pydantic import ValidationError

    from cselab.adaptation import plan_adapt

    plan = plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir))  # empty home
    assert (plan.teacher, plan.recipe.name) == (None, "simcse")
    # a recipe that selects by the teacher, with none at hand: refused, saying how to get one
    with pytest.raises(CselabError, match=r"distils a teacher: give --teacher \(or fetch all-mpnet-base-v2"):
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir),
                   recipe=recipe_with(DISTILL, select="distillation-loss"))
    # and SimCSE's recipe cannot select by a teacher at all
    with pytest.raises(ValidationError, match="a simcse recipe trains without a teacher"):
        recipe_with("simcse", select="distillation-loss")


def test_the_distillation_loss_selects_with_step_zero_a_candidate(home_with_teacher, tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = tiny_recipe(tmp_path / "recipe.yaml", "train.eval_every=2", units="passages", select="distillation-loss")
    code, _, err = run_cli(_args(text, tiny_bert_dir, out, recipe=recipe), capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["teacher"], summary["recipe"], summary["selection"]) == ("all-mpnet-base-v2", "distill",
                                                                            "distillation-loss")
    dev = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    scores = {r["step"]: r["dev"] for r in dev if "dev" in r}
    assert sorted(scores) == [0, 2, 4]  # the untouched model is a candidate
    assert summary["best_step"] == max(scores, key=lambda s: (scores[s], -s))
    # the teacher's pass is kept in the run: every training example (passages of the training lines here) and the
    # held-out text as the examples are made (passages of the held-out lines), each text once
    passages = (out / "train.txt").read_text().splitlines()
    text_lines = set(text.read_text().splitlines())
    assert len(passages) < 220 and all(any(line in p for line in text_lines) for p in passages)
    kept = (out / "teacher" / "texts.txt").read_text().splitlines()
    held_passages = [t for t in kept if t not in set(passages)]
    held = (out / "held-out.txt").read_text().splitlines()
    assert len(held_passages) < len(held) == 20
    assert sorted(" ".join(held_passages).split()) == sorted(" ".join(held).split())  # every held-out line once
    state = json.loads((out / "teacher" / "state.json").read_text())
    assert state["filled"] == state["rows"] == len(passages) + len(held_passages) and state["dim"] == 48
    # the selected model's score is minus the mean squared difference of its cosines and the teacher's over every
    # pair of held-out passages (the mean over all pairs does not depend on their order), both models encoding here
    student = _unit(load_model(out / "best").encode(held_passages).numpy())
    teacher = _unit(load_model(home_with_teacher / "models" / "all-mpnet-base-v2").encode(held_passages).numpy())
    off = ~np.eye(len(held_passages), dtype=bool)
    expected = -float(((student @ student.T - teacher @ teacher.T)[off] ** 2).mean())
    assert scores[summary["best_step"]] == pytest.approx(expected, abs=1e-5)
    # the report draws the criterion it selected by
    report = (out / "adapt-report.md").read_text()
    assert "held-out distillation loss by step: 0:" in report and (out / "adapt-report.png").is_file()


def test_mixed_units_train_on_lines_and_passages_from_one_teacher_store(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                         capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = tiny_recipe(tmp_path / "recipe.yaml", "train.eval_every=2", units="mixed", select="distillation-loss")
    code, _, err = run_cli(_args(text, tiny_bert_dir, out, recipe=recipe), capsys)
    assert code == 0, err
    examples = (out / "train.txt").read_text().splitlines()
    held = (out / "held-out.txt").read_text().splitlines()
    lines, passages = examples[:220], examples[220:]
    assert set(lines) == set(text.read_text().splitlines()) - set(held)
    assert 0 < len(passages) < 220
    assert sorted(" ".join(passages).split()) == sorted(" ".join(lines).split())  # every training line once more
    from cselab.adaptation import plan_adapt
    from cselab.methods import METHODS

    # the run's own plan (planning writes nothing)
    plan = plan_adapt(text, out, model=str(tiny_bert_dir), recipe=recipe, steps=4)
    units = plan.held_out_units
    assert plan.config.method_options["neighbour_blocks"] == [220]
    # the training groups the method builds from the run's text and teacher store: a line's neighbours are lines,
    # a passage's passages
    groups = METHODS.get("distill")(plan.config).training_examples()
    assert len(groups) == len(examples)
    assert all((max(g) < 220) if g[0] < 220 else (min(g) >= 220) for g in groups)
    bad = plan.config.model_copy(update={"method_options": {**plan.config.method_options, "neighbour_blocks": [0]}})
    with pytest.raises(CselabError, match="config: method_options.neighbours: blocks must be increasing"):
        METHODS.get("distill")(bad).training_examples()
    assert units[:20] == held and sorted(" ".join(units[20:]).split()) == sorted(" ".join(held).split())
    # one store of every text (the parts' passes were assembled into it, and their directories removed)
    kept = (out / "teacher" / "texts.txt").read_text().splitlines()
    assert sorted(kept) == sorted(set(examples) | set(units))
    assert not (out / "teacher-lines").exists() and not (out / "teacher-passages").exists()
    # the score: the held-out distillation loss over the held-out lines and passages together
    dev = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    scores = {r["step"]: r["dev"] for r in dev if "dev" in r}
    summary = json.loads((out / "adapt.json").read_text())
    student = _unit(load_model(out / "best").encode(units).numpy())
    teacher = _unit(load_model(home_with_teacher / "models" / "all-mpnet-base-v2").encode(units).numpy())
    off = ~np.eye(len(units), dtype=bool)
    expected = -float(((student @ student.T - teacher @ teacher.T)[off] ** 2).mean())
    assert scores[summary["best_step"]] == pytest.approx(expected, abs=1e-5)


def test_a_fixed_budget_without_labels_draws_no_empty_plot(home_with_teacher, tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "adapted"
    recipe = tiny_recipe(tmp_path / "recipe.yaml", select="fixed-budget")
    code, _, err = run_cli(_args(write_text(tmp_path / "text.txt"), tiny_bert_dir, out, recipe=recipe), capsys)
    assert code == 0, err
    assert json.loads((out / "adapt.json").read_text())["best_step"] == 4
    assert not (out / "adapt-report.png").exists() and "adapt-report.png" not in (out / "adapt-report.md").read_text()


def test_resume_after_a_kill_is_bit_identical_and_the_teacher_runs_once(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                      capsys, monkeypatch):
    from cselab.teacher import vectors as teacher_pass
    from cselab.training.trainer import Trainer

    text = write_text(tmp_path / "text.txt")
    # the default selection, the guard: the resumed run compares with the untouched model's losses kept on disk
    recipe = tiny_recipe(tmp_path / "recipe.yaml", "train.save_every=2", "train.eval_every=2")
    loads, real_load = [], teacher_pass.load_teacher
    monkeypatch.setattr(teacher_pass, "load_teacher", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    code, _, err = run_cli(_args(text, tiny_bert_dir, tmp_path / "whole", recipe=recipe), capsys)
    assert code == 0, err
    assert len(loads) == 1  # the teacher loaded once for the whole run: the time estimate and its two passes
    real_step, passes = Trainer.train_step, []

    def killed_at_step_3(self, batch):
        if self.state.step == 3:
            raise KeyboardInterrupt
        return real_step(self, batch)

    real_choose = teacher_pass.choose_runner
    monkeypatch.setattr(teacher_pass, "choose_runner", lambda *a, **k: passes.append(1) or real_choose(*a, **k))
    monkeypatch.setattr(Trainer, "train_step", killed_at_step_3)
    code, _, err = run_cli(_args(text, tiny_bert_dir, tmp_path / "killed", recipe=recipe), capsys)
    assert code == 130 and "--resume" in err
    monkeypatch.setattr(Trainer, "train_step", real_step)
    code, _, err = run_cli(_args(text, tiny_bert_dir, tmp_path / "killed", "--resume", recipe=recipe), capsys)
    assert code == 0, err
    assert passes == [], "the teacher's pass was kept in the cache (the first run) and in the run: never run again"
    assert json.loads((tmp_path / "killed" / "adapt.json").read_text())["selection"] == "guarded-distillation-loss"
    assert (tmp_path / "killed" / "guard-reference.json").read_bytes() == (
        tmp_path / "whole" / "guard-reference.json").read_bytes()
    for name in ("model.safetensors", "cselab.json"):
        whole, resumed = (tmp_path / run / "best" / name for run in ("whole", "killed"))
        if name == "cselab.json":  # the description names its run's config: compare what was trained
            a, b = json.loads(whole.read_text())["training"], json.loads(resumed.read_text())["training"]
            assert (a["step"], a["dev_score"]) == (b["step"], b["dev_score"])
        else:
            assert whole.read_bytes() == resumed.read_bytes()


def test_a_guarded_resume_without_its_reference_after_a_save_is_refused(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                        capsys, monkeypatch):
    from cselab.training.trainer import Trainer

    text = write_text(tmp_path / "text.txt")
    recipe = tiny_recipe(tmp_path / "recipe.yaml", "train.save_every=2", "train.eval_every=2")  # the guard
    real_step = Trainer.train_step

    def kill_at(step: int):
        def killed(self, batch):
            if self.state.step == step:
                raise KeyboardInterrupt
            return real_step(self, batch)
        return killed

    # killed after the save of step 2, the reference lost: step 0 is never scored again, so the resume is refused
    saved = tmp_path / "saved"
    monkeypatch.setattr(Trainer, "train_step", kill_at(3))
    code, _, err = run_cli(_args(text, tiny_bert_dir, saved, recipe=recipe), capsys)
    assert code == 130 and (saved / "last").is_dir()
    (saved / "guard-reference.json").unlink()
    before = snapshot(saved)
    monkeypatch.setattr(Trainer, "train_step", real_step)
    code, _, err = run_cli(_args(text, tiny_bert_dir, saved, "--resume", recipe=recipe), capsys)
    assert code == 2 and err.count("\n") == 1 and "guard-reference.json" in err, err
    assert "untouched model's held-out losses" in err and "afresh in a new --output" in err
    assert snapshot(saved) == before, "a refused resume changes nothing"
    # killed before the first save: the resume starts at step 0 again, which is scored again as the reference
    unsaved = tmp_path / "unsaved"
    monkeypatch.setattr(Trainer, "train_step", kill_at(1))
    code, _, err = run_cli(_args(text, tiny_bert_dir, unsaved, recipe=recipe), capsys)
    assert code == 130 and not (unsaved / "last").exists()
    (unsaved / "guard-reference.json").unlink()
    monkeypatch.setattr(Trainer, "train_step", real_step)
    code, _, err = run_cli(_args(text, tiny_bert_dir, unsaved, "--resume", recipe=recipe), capsys)
    assert code == 0, err
    assert (unsaved / "guard-reference.json").is_file() and (unsaved / "adapt.json").is_file()


def test_the_teacher_vectors_by_view_are_each_views_own_rows(home_with_teacher, tmp_path):
    from cselab.adaptation.selection import teacher_vectors_by_view
    from cselab.teacher.vectors import teacher_vectors

    teacher = str(home_with_teacher / "models" / "all-mpnet-base-v2")
    lines = write_text(tmp_path / "text.txt", n=12).read_text().splitlines()
    # the views share a text, and a view repeats one: each view's rows are still its own texts' in order
    views = {"lines": lines[:7], "passages": [" ".join(lines[:3]), lines[6], " ".join(lines[7:]), lines[6]]}
    for store in (tmp_path / "views", None):  # a run's store, or (the domain study's observer) the cache alone
        by_view = teacher_vectors_by_view(teacher, views, store, requested_precision="fp32")
        assert list(by_view) == ["lines", "passages"]
        for name, texts in views.items():
            alone = teacher_vectors(teacher, texts, tmp_path / f"alone-{name}", requested_precision="fp32",
                                    cache=False)
            assert by_view[name].shape == (len(texts), 48)
            np.testing.assert_allclose(by_view[name], alone, atol=1e-6)  # fp32: batched apart, rounding only
    assert set((tmp_path / "views" / "texts.txt").read_text().splitlines()) == set(views["lines"]) | set(
        views["passages"])


def test_resume_refuses_another_text_and_changes_nothing_of_a_finished_run(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                          capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    code, _, err = run_cli(_args(text, tiny_bert_dir, out), capsys)
    assert code == 0, err
    before = snapshot(out)
    # a finished adaptation resumed: nothing to do, nothing written
    code, stdout, err = run_cli(_args(text, tiny_bert_dir, out, "--resume"), capsys)
    assert code == 0 and "nothing to do" in stdout and snapshot(out) == before
    # the same directory for another text, or with --max-sentences: refused in one line, nothing written
    other = write_text(tmp_path / "other.txt", seed=9)
    for extra, message in (([], "another text"), (["--max-sentences", "200"], "another text")):
        code, _, err = run_cli(_args(other if not extra else text, tiny_bert_dir, out, "--resume", *extra), capsys)
        assert code == 2 and err.count("\n") == 1 and message in err, err
        assert snapshot(out) == before
    # without --resume a finished adaptation is refused too
    code, _, err = run_cli(_args(text, tiny_bert_dir, out), capsys)
    assert code == 2 and "finished adaptation" in err and snapshot(out) == before


@pytest.mark.parametrize("case", ["user-files", "train-run", "nothing-to-resume", "bogus-method", "bogus-option",
                                  "output-dir-override", "absurd-steps", "less-than-a-batch"])
def test_refused_runs_leave_no_trace(case, home_with_teacher, long_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "out"
    out.mkdir()
    extra: list[str] = []
    message = {"user-files": "did not write", "train-run": "not an adaptation",
               "nothing-to-resume": "no adaptation to resume",
               "bogus-method": "method: Input should be 'simcse' or 'distill'",
               "bogus-option": "bogus", "output-dir-override": "train.output_dir is set by --output, not by a recipe",
               "absurd-steps": "days on this machine",
               "less-than-a-batch": "examples (passages of up to 256 tokens), fewer than one batch of 64"}[case]
    if case == "user-files":
        (out / "config.yaml").write_text("mine: 1\n")
        (out / "results.json").write_text("{}\n")
        (out / "train.txt").write_text("my own text\n")
    elif case == "train-run":
        (out / ".cselab-run").write_text("a cselab run directory\n")
        (out / "metrics.jsonl").write_text('{"step": 1}\n')
        (out / "best").mkdir()
    elif case == "nothing-to-resume":
        extra = ["--resume"]
        out.rmdir()
    elif case == "bogus-method":  # a recipe file's method that cselab has not
        extra = ["--recipe", str(write_recipe(tmp_path / "recipe.yaml", method="bogus"))]
    elif case == "bogus-option":  # a method option the method does not take: refused when the plan is made
        options = {**recipe_with().method_options, "bogus": 1}
        extra = ["--recipe", str(write_recipe(tmp_path / "recipe.yaml", method_options=options))]
    elif case == "output-dir-override":  # the run directory is --output's, not a recipe's to move
        extra = ["--recipe", str(write_recipe(tmp_path / "recipe.yaml",
                                              overrides=(f"train.output_dir={tmp_path / 'elsewhere'}",)))]
    elif case == "absurd-steps":  # the default in batches of 8, which the 220 lines' passages fill
        extra = ["--steps", "1000000000000", "--recipe", str(write_recipe(tmp_path / "recipe.yaml", batch_size=8))]
    else:  # the default's passages of 256 tokens of 220 short lines, and as many general sentences: under 64
        out.rmdir()
    def users_files() -> dict[str, str]:  # the data home is cselab's cache (a precision probe may be kept there)
        return {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("home/")}

    before = users_files()
    code, _, err = run_cli(["adapt", str(text), "--model", str(long_bert_dir), "--output", str(out), *extra], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert users_files() == before, "a refused adaptation writes nothing"
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("what", ["run-directory", "twin", "text-file", "not-fetched"])
def test_a_model_that_is_not_one_encoder_is_refused_in_one_line(what, tiny_bert_dir, tmp_path, capsys):
    from cselab.models.encoder import Encoder
    from cselab.models.sentence_model import TwinModel, save_model

    text = write_text(tmp_path / "text.txt")
    if what == "run-directory":
        model = tmp_path / "run"
        save_model(Encoder.from_pretrained(tiny_bert_dir, pooler="mean"), model / "best")
        message = "its model is"
    elif what == "twin":
        a = Encoder.from_pretrained(tiny_bert_dir, pooler="cls")
        model = save_model(TwinModel(a, Encoder.from_pretrained(tiny_bert_dir, pooler="cls")), tmp_path / "twin")
        message = "not one encoder"
    elif what == "text-file":
        model = text
        message = "is a file"
    else:
        model = "all-MiniLM-L6-v2"  # the empty data home has nothing fetched
        message = "cselab data fetch models"
    code, _, err = run_cli(["adapt", str(text), "--model", str(model), "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["twin", "ensemble"])
def test_a_twin_or_an_ensemble_can_teach(kind, tiny_bert_dir, teacher_dir, tmp_path, capsys):
    """The papers' -D teachers: a twin (the sum of its two encoders) and a concatenating ensemble run the teacher's
    pass like one encoder (the ensemble is wider than the student: its vectors are reduced to the student's)."""
    from cselab.models.encoder import Encoder
    from cselab.models.sentence_model import EnsembleModel, TwinModel, save_model

    a = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    b = Encoder.from_pretrained(teacher_dir, pooler="mean")
    model = TwinModel(a, Encoder.from_pretrained(tiny_bert_dir, pooler="cls")) if kind == "twin" else \
        EnsembleModel([a, b], [0.5, 0.5], combine="concat")
    teacher = save_model(model, tmp_path / kind)
    out = tmp_path / "adapted"
    code, _, err = run_cli(_args(write_text(tmp_path / "text.txt"), tiny_bert_dir, out, "--teacher", str(teacher)),
                           capsys)
    assert code == 0, err
    state = json.loads((out / "teacher" / "state.json").read_text())
    assert state["dim"] == (32 if kind == "twin" else 80) and state["filled"] == state["rows"]


def test_the_guard_never_ranks_a_step_that_rose_on_a_view_above_the_untouched_model(tmp_path):
    from cselab.adaptation.selection import GuardedDistillationLoss

    vectors = np.eye(3, dtype=np.float32)
    views = {"lines": (["a", "b", "c"], vectors, None), "passages": (["a b", "c", "b c"], vectors, None)}
    guard = GuardedDistillationLoss(views, tmp_path / "reference.json")
    guard.reference = {"lines": 0.02, "passages": 0.04}  # as if step 0 had been scored
    # below the start on both views: minus the mean ratio (0.5 and 0.5); the start itself: -1
    assert guard.primary_score({"lines": 0.01, "passages": 0.02}) == pytest.approx(-0.5)
    assert guard.primary_score({"lines": 0.02, "passages": 0.04}) == pytest.approx(-1.0)
    # far better on lines but worse on passages: -(1 + (0.1 + 1.25) / 2), below the start
    assert guard.primary_score({"lines": 0.002, "passages": 0.05}) == pytest.approx(-1.675)
    # the first scored model is the reference, kept on disk; a new guard (a resumed run) reads it
    fresh = GuardedDistillationLoss(views, tmp_path / "step0.json")

    class Fixed:
        def encode(self, texts, batch_size=64):
            import torch

            return torch.tensor([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]])[:len(texts)]

    first = fresh(Fixed())
    # by hand: the student's off-diagonal cosines 0.6, 0.0, 0.48 against the teacher's 0 -> mean of squares (x2)/6
    assert first["lines"] == pytest.approx((0.36 + 0.0 + 0.2304) * 2 / 6, abs=1e-6)
    assert json.loads((tmp_path / "step0.json").read_text()) == pytest.approx(first)
    resumed = GuardedDistillationLoss(views, tmp_path / "step0.json")
    assert resumed.reference == pytest.approx(first) and resumed.primary_score(first) == pytest.approx(-1.0)


def test_the_guarded_selection_scores_lines_and_passages_against_the_start(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                          capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = tiny_recipe(tmp_path / "recipe.yaml", "train.eval_every=2", select="guarded-distillation-loss")
    code, _, err = run_cli(_args(text, tiny_bert_dir, out, recipe=recipe), capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert summary["selection"] == "guarded-distillation-loss"
    from cselab.adaptation import plan_adapt

    plan = plan_adapt(text, tmp_path / "again", model=str(tiny_bert_dir), recipe=recipe, steps=4)
    held, passages = plan.guard_views["lines"], plan.guard_views["passages"]
    assert held == (out / "held-out.txt").read_text().splitlines()
    # the teacher's pass over both views is kept in the run; passages of up to 256 tokens, not the training's 16
    assert set((out / "teacher-guard" / "texts.txt").read_text().splitlines()) == set(held) | set(passages)
    assert 1 <= len(passages) < len(held) and max(len(p.split()) for p in passages) > 16
    assert sorted(" ".join(passages).split()) == sorted(" ".join(held).split())  # every held-out line once

    def loss(model_dir, texts, max_length) -> float:
        student = _unit(load_model(model_dir, pooler="mean", max_length=max_length).encode(texts).numpy())
        teacher = _unit(load_model(home_with_teacher / "models" / "all-mpnet-base-v2").encode(texts).numpy())
        off = ~np.eye(len(texts), dtype=bool)
        return float(((student @ student.T - teacher @ teacher.T)[off] ** 2).mean())

    # the reference is the untouched student's loss on each view, computed here with numpy
    reference = json.loads((out / "guard-reference.json").read_text())
    # (lines at the training's 16 tokens, passages at 256)
    assert reference["lines"] == pytest.approx(loss(tiny_bert_dir, held, 16), rel=1e-4)
    assert reference["passages"] == pytest.approx(loss(tiny_bert_dir, passages, 256), rel=1e-4)
    dev = {r["step"]: r["dev"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
           if "dev" in r}
    assert sorted(dev) == [0, 2, 4] and dev[0] == pytest.approx(-1.0)
    assert summary["best_step"] == max(dev, key=lambda s: (dev[s], -s))
    # the kept model's score from its own losses on both views
    ratios = [loss(out / "best", texts, length) / reference[name]
              for name, texts, length in (("lines", held, 16), ("passages", passages, 256))]
    mean = sum(ratios) / 2
    expected = -(1 + mean) if max(ratios) > 1 else -mean
    assert dev[summary["best_step"]] == pytest.approx(expected, rel=1e-4)
    assert "held-out distillation loss / step 0's" in (out / "adapt-report.md").read_text()


def test_held_out_vectors_read_a_text_in_two_parts_from_its_first_part(monkeypatch):
    """A held-out text that is both a line and a passage (a passage of one line) reads the row of the lines' part,
    the row the assembled store keeps for it; every other held-out text reads its own row."""
    from types import SimpleNamespace

    import cselab.teacher.vectors
    from cselab.adaptation.run import held_out_teacher_vectors

    parts = {"lines": ["a b", "c d", "e f"], "passages": ["a b c d", "e f", "g h"]}
    seen = {}

    def rows_by_position(teacher, given_parts, store_dir, **options):
        seen.update(teacher=teacher, parts=given_parts, store_dir=store_dir, options=options)
        return np.arange(6, dtype=np.float32)[:, None] * np.ones((1, 4), dtype=np.float32)  # row i holds i

    monkeypatch.setattr(cselab.teacher.vectors, "teacher_vectors_of_parts", rows_by_position)
    plan = SimpleNamespace(teacher_parts=lambda: parts, held_out_units=["e f", "c d", "g h", "a b c d"])
    vectors = held_out_teacher_vectors(plan, "teacher-dir", None, requested_precision="fp32")
    # "e f" is row 2 (lines) and row 4 (passages): the first; "c d" row 1, "g h" row 5, "a b c d" row 3
    np.testing.assert_array_equal(vectors[:, 0], [2, 1, 5, 3])
    assert seen == {"teacher": "teacher-dir", "parts": parts, "store_dir": None,
                    "options": {"requested_precision": "fp32"}}


@pytest.mark.parametrize("name", ["vectors", "vectors-passages"])
def test_a_vector_recipe_plans_the_teachers_whole_vector_on_a_fixed_budget(name, home_with_teacher, long_bert_dir,
                                                                         tmp_path):
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt", n=2000)
    plan = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), recipe=LAB_RECIPES / f"{name}.yaml")
    options = plan.config.method_options
    assert (plan.recipe.name, plan.teacher, plan.config.method) == (name, "all-mpnet-base-v2", "distill")
    assert (options["target"], options["projection"], options["vector_loss"], options["neighbours"],
            options["length_groups"]) == ("vectors", "pca-rotation", "cosine", 0, 1)
    assert (plan.selection, plan.config.train.batch_size, plan.config.train.lr) == ("fixed-budget", 64, 1e-4)
    assert not plan.config.train.eval_at_start and plan.config.train.eval_every == plan.steps
    if name == "vectors":
        # each of the 1,900 training lines once, at 64 tokens: ceil(1900 / 64) = 30 steps, raised to the floor of 100
        assert (plan.units, plan.config.model.max_length, plan.steps) == ("lines", 64, 100)
        assert len(plan.train_units) == 1900
    else:
        # passages of up to 256 tokens, 100 steps whatever the text
        assert (plan.units, plan.config.model.max_length, plan.steps) == ("passages", 256, 100)
        assert len(plan.train_units) < 1900
    assert plan.describe().startswith(f"adapt ({name}): the teacher's whole vector of each")


def test_the_vector_recipe_caps_its_budget_at_448_steps(home_with_teacher, tiny_bert_dir, tmp_path):
    from cselab.adaptation.plan import default_steps
    from cselab.adaptation.recipe import load_recipe

    vectors = load_recipe(LAB_RECIPES / "vectors.yaml")
    # one pass: 64 lines a step, at least 100 and at most 448 steps
    assert [default_steps(n, vectors) for n in (640, 6400, 28_672, 28_673, 35_000)] == [100, 100, 448, 448, 448]
    assert default_steps(12_800, vectors) == 200


@pytest.mark.parametrize(("recipe", "extra", "message"), [
    (LAB_RECIPES / "vectors.yaml", {"no_teacher": True}, "the vectors recipe distils a teacher: drop --no-teacher"),
    ("simcse", {"teacher": "all-mpnet-base-v2"}, "the simcse recipe trains without a teacher: drop --teacher"),
    ("nonsense", {}, "--recipe nonsense: no such file (a recipe YAML file, or one of simcse, vectors-and-head, "
     "vectors-and-head-teacher-first)"),
])
def test_a_recipe_that_cannot_run_is_refused_in_one_line(recipe, extra, message, home_with_teacher, tiny_bert_dir,
                                                         tmp_path):
    import re

    from cselab.adaptation import plan_adapt

    with pytest.raises(CselabError, match="^" + re.escape(message) + "$"):
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir), recipe=recipe,
                   **extra)


def test_a_vector_recipe_without_a_teacher_at_hand_says_how_to_fetch_one(tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    with pytest.raises(CselabError, match="cselab data fetch models-mpnet"):  # empty home: no teacher fetched
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir),
                   recipe=LAB_RECIPES / "vectors.yaml")
    simcse = plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "b", model=str(tiny_bert_dir), recipe="simcse")
    assert (simcse.recipe.name, simcse.teacher) == ("simcse", None)


def test_the_recipes_are_the_vocabularys():
    """The recipes cselab ships (the ones ``--recipe NAME`` and the defaults name) are the vocabulary's, each a file
    whose name is the recipe's, and the defaults and ``--task`` choose among them."""
    from cselab.adaptation.recipe import RECIPES_DIR, TASK_RECIPES, load_recipe, recipe_for, shipped_recipes
    from cselab.vocabulary import ADAPT_RECIPES, ADAPT_TASKS

    assert shipped_recipes() == ADAPT_RECIPES
    assert all(load_recipe(RECIPES_DIR / f"{name}.yaml").name == name for name in ADAPT_RECIPES)
    chosen = {recipe_for(teacher=False).name, *(recipe_for(teacher=True, task=t).name for t in (None, *ADAPT_TASKS))}
    assert chosen == set(ADAPT_RECIPES) and set(TASK_RECIPES.values()) <= set(ADAPT_RECIPES)


def test_adapt_with_the_vector_recipe_trains_and_keeps_its_last_step(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                    capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    recipe = write_recipe(tmp_path / "vectors.yaml", LAB_RECIPES / "vectors.yaml", batch_size=8,
                          overrides=("train.precision=fp32",))
    code, stdout, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--output", str(out),
                                 "--recipe", str(recipe), "--steps", "3"], capsys)
    assert code == 0, err
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["recipe"], summary["selection"], summary["best_step"]) == ("vectors", "fixed-budget", 3)
    assert "the teacher's whole vector of each line" in stdout
    # the kept student is the student alone (no projection module): it loads and encodes at its own width
    model = load_model(out / "model")  # handed back unmixed (the recipe's mix is 1)
    assert model.encode(["a sentence"]).shape[-1] == load_model(tiny_bert_dir).encode(["a sentence"]).shape[-1]
