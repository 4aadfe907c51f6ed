"""`cselab adapt` walks once: the user's text is read once, the output checked once, the untouched model and the
teacher loaded once each (the estimate, the scores, the teacher's pass and the weight mix share them); the command,
`cselab.adapt()` and the library hand back the same model at one path; the cost follows the budget, not the text."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.adaptation.test_adapt_distill import write_text
from tests.helpers import recipe_with


def _labels(path: Path, text: Path) -> Path:
    lines = text.read_text().splitlines()[:60]
    path.write_text("".join(f"{line}\t{'ab'[i % 2]}\n" for i, line in enumerate(lines)))
    return path


@pytest.mark.slow
def test_the_text_is_read_once_the_output_checked_once_and_each_model_loaded_once(home_with_teacher, tiny_bert_dir,
                                                                                   tmp_path, monkeypatch):
    pytest.importorskip("mteb")
    import cselab
    import cselab.adaptation.examples as examples
    import cselab.adaptation.run as run
    import cselab.models.sentence_model as sentence_model
    import cselab.teacher.vectors as teacher_pass

    text = write_text(tmp_path / "text.txt")
    labels = _labels(tmp_path / "labels.tsv", text)
    reads, checks, loads, teachers = Counter(), Counter(), Counter(), Counter()
    read_corpus, check_output = examples.read_corpus, run.check_output
    load_model, load_teacher = sentence_model.load_model, teacher_pass.load_teacher

    def counted_read(path, *a, **k):
        reads[Path(path).resolve()] += 1
        return read_corpus(path, *a, **k)

    def counted_check(plan, **k):
        checks[plan.output_dir] += 1
        return check_output(plan, **k)

    def counted_load(path, *a, **k):
        loads[str(path)] += 1
        return load_model(path, *a, **k)

    def counted_teacher(path, *a, **k):
        teachers[str(path)] += 1
        return load_teacher(path, *a, **k)

    monkeypatch.setattr(examples, "read_corpus", counted_read)
    monkeypatch.setattr(run, "check_output", counted_check)
    monkeypatch.setattr(sentence_model, "load_model", counted_load)
    monkeypatch.setattr(teacher_pass, "load_teacher", counted_teacher)
    out = tmp_path / "adapted"
    recipe = tmp_path / "recipe.yaml"  # the default recipe at the tiny model's length
    recipe.write_text(yaml.safe_dump(recipe_with(max_length=64).model_dump(mode="json", by_alias=True)))
    result = cselab.adapt(text, out, model=str(tiny_bert_dir), steps=2, labels=labels, device="cpu", progress=False,
                          recipe=recipe)
    assert reads[text.resolve()] == 1
    assert checks == Counter({out: 1})
    assert teachers == Counter({"all-mpnet-base-v2": 1})
    # the untouched model once (estimate, scores, mix), the teacher once (through load_teacher: estimate, scores,
    # pass), the selected checkpoint once (the model handed back, scored after); nothing else
    assert loads == Counter({str(tiny_bert_dir): 1, "all-mpnet-base-v2": 1, str(out / "best"): 1})
    assert result.model_dir == out / "model" and (out / "model" / "config.json").is_file()
    assert set(result.before) == set(result.after) == set(result.teacher_scores) and result.before
    summary = json.loads((out / "adapt.json").read_text())
    assert summary["model_dir"] == str(out / "model") and summary["recipe"] == "vectors-and-head"
    # both models' serving cost beside their scores: the size is the served form's files, summed here
    serving = summary["serving"]
    assert summary["serving_s"] > 0  # timed apart from the teacher's pass
    for who, directory in (("model", out / "model"), ("teacher", home_with_teacher / "models" / "all-mpnet-base-v2")):
        cost = serving[who]
        assert cost["sentences_per_s"] > 0 and cost["backend"] in ("torch", "onnx", "openvino")
        if cost["backend"] == "torch":
            assert cost["size_mb"] == round(sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
                                            / 1e6, 1)
    from cselab.teacher.vectors import pass_backend

    assert summary["teacher_pass"] == pass_backend(out / "teacher")  # the way the pass ran, in the record
    report = (out / "adapt-report.md").read_text()
    assert f"its pass ran on {summary['teacher_pass']['backend']} {summary['teacher_pass']['precision']}" in report
    row = next(line for line in report.splitlines() if line.startswith("| your model (handed back) |"))
    assert f"{result.after[next(iter(result.after))]:.2f}" in row and f"{serving['model']['size_mb']:,.0f} MB" in row
    with pytest.raises(cselab.CselabError, match="takes at most 128 tokens, the recipe's max_length is 256"):
        cselab.adapt(text, tmp_path / "long", model=str(tiny_bert_dir), progress=False)  # before anything is written
    assert not (tmp_path / "long").exists()


def _weights(directory: Path) -> str:
    return hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_command_and_the_api_hand_back_the_same_model_at_one_path(tiny_bert_dir, tmp_path, capsys):
    import cselab
    from tests.helpers import run_cli

    text = write_text(tmp_path / "text.txt")
    code, out, err = run_cli(["adapt", str(text), "--output", str(tmp_path / "cli"), "--model", str(tiny_bert_dir),
                              "--no-teacher", "--steps", "2", "--device", "cpu"], capsys)
    assert code == 0
    assert f"model: {tmp_path / 'cli' / 'model'} " in out
    assert "examples_s=" in err and "best_dev" not in err  # the bar shows what an adapt run has: no dev set
    result = cselab.adapt(text, tmp_path / "api", model=tiny_bert_dir, no_teacher=True, steps=2, device="cpu",
                          progress=False)
    assert result.model_dir == tmp_path / "api" / "model"
    assert _weights(tmp_path / "cli" / "model") == _weights(result.model_dir)  # one seed, one model
    # unmixed (SimCSE's recipe), the model handed back is the selected checkpoint's weights
    assert _weights(result.model_dir) == _weights(tmp_path / "api" / "best")


def test_the_examples_follow_the_budget_not_the_text(home_with_teacher, tiny_bert_dir, tmp_path):
    """10 times the text at the same budget plans as many training examples (a seeded draw of lines, every line
    tokenised or passed to the teacher being a drawn one); a larger budget draws more."""
    from cselab.adaptation import plan_adapt
    from tests.adaptation.test_adapt_distill import write_general

    write_general(home_with_teacher / "corpus" / "default.txt", 3000)  # more general sentences than the budget's
    small = write_text(tmp_path / "small.txt", n=2000)
    lines = small.read_text().splitlines()
    large = tmp_path / "large.txt"
    large.write_text("".join(f"{line} {k}\n" for k in range(10) for line in lines))
    import cselab.adaptation.examples as examples

    tokenised: dict[str, list[int]] = {}  # the lines made into passages, per plan (held-out and guard texts aside)
    made_into_passages = examples.training_units

    def counted(model, train, *args, **kwargs):
        tokenised.setdefault(current, []).append(len(train))
        return made_into_passages(model, train, *args, **kwargs)

    short = recipe_with(max_length=64)  # the default at the tiny model's length
    plans = {}
    for current, path in (("small", small), ("large", large)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(examples, "training_units", counted)
            plans[current] = plan_adapt(path, tmp_path / current, model=str(tiny_bert_dir), steps=2, recipe=short)
    budget = 2 * 64
    for plan in plans.values():  # as many general sentences as passages, together at most the budget's examples
        assert len(plan.text_units) == len(plan.general_units) == budget // 2
        assert len(plan.train_units) == budget and plan.train_sentences < plan.text_train_sentences
    assert plans["large"].text_train_sentences > 9 * plans["small"].text_train_sentences
    assert plans["large"].train_sentences < 2 * plans["small"].train_sentences
    # only drawn lines are tokenised: no call made passages of more lines than the plan trains on
    for name, plan in plans.items():
        assert max(tokenised[name]) == plan.train_sentences < plan.text_train_sentences, (name, tokenised[name])
    more = plan_adapt(large, tmp_path / "more", model=str(tiny_bert_dir), steps=8, recipe=short)
    assert len(more.train_units) == 8 * 64 and more.train_sentences > plans["large"].train_sentences
    assert "sentences to train on (what 2 steps use; --steps trains on more)" in plans["large"].describe()


def test_a_serving_cost_that_cannot_be_timed_is_said_and_left_out(monkeypatch, tmp_path):
    """The scores stand without it: a failure to time a model's serving cost is a line, not an error."""
    import cselab.adaptation.serving as serving
    from cselab.adaptation.run import _serving
    from cselab.errors import CselabError
    from cselab.reporter import Reporter, reporting

    def broken(*args, **kwargs):
        raise CselabError("the onnx export does not load")

    monkeypatch.setattr(serving, "serving_cost", broken)
    lines: list[str] = []
    plan = type("Plan", (), {"held_out": ["a line"] * 4})()
    with reporting(Reporter(lines=lines.append)):
        assert _serving(plan, "m", object(), tmp_path) is None
    assert lines == ["adapt: m's serving cost could not be timed (the onnx export does not load); the report "
                     "leaves it out"]


@pytest.mark.slow
def test_the_untouched_model_is_freed_before_training_only_where_nothing_after_reads_it(tiny_bert_dir, tmp_path,
                                                                                        monkeypatch):
    """SimCSE's recipe hands back the selected weights unmixed: the untouched model it scored is gone from memory
    while training runs (only training's own copy is held). A recipe that mixes the weights still holds it then."""
    import gc
    import weakref

    import cselab
    import cselab.models.sentence_model as sentence_model
    from cselab.training.trainer import Trainer

    text = write_text(tmp_path / "text.txt")
    labels = _labels(tmp_path / "labels.tsv", text)
    loaded, alive_in_training = [], []
    load_model, run = sentence_model.load_model, Trainer.run

    def watched_load(path, *a, **k):
        model = load_model(path, *a, **k)
        if str(path) == str(tiny_bert_dir):
            loaded.append(weakref.ref(model))
        return model

    def watched_run(self, *a, **k):
        gc.collect()
        alive_in_training.append([ref() is not None for ref in loaded])
        return run(self, *a, **k)

    monkeypatch.setattr(sentence_model, "load_model", watched_load)
    monkeypatch.setattr(Trainer, "run", watched_run)
    pytest.importorskip("mteb")
    cselab.adapt(text, tmp_path / "simcse", model=str(tiny_bert_dir), no_teacher=True, steps=2, labels=labels,
                 device="cpu", progress=False)
    mixed = tmp_path / "mixed.yaml"  # SimCSE's recipe with the default's weight mix
    recipe = yaml.safe_load((Path(cselab.__file__).parent / "adaptation" / "recipes" / "simcse.yaml").read_text())
    mixed.write_text(yaml.safe_dump({**recipe, "name": "simcse-mixed", "mix": 0.75}))
    cselab.adapt(text, tmp_path / "mixed", model=str(tiny_bert_dir), steps=2, labels=labels, device="cpu",
                 progress=False, recipe=mixed)
    assert alive_in_training == [[False], [False, True]]  # the first run's model freed; the mixed run's held
