"""A recipe's ``adapt_teacher`` (the shipped vectors-and-head-teacher-first, which ``--task similarity`` and ``search``
run): the teacher adapted to the text with SimCSE first, inside the run directory, then distilled; its adaptation
planned with the student's held-out part, run once (a resume never runs it again), and counted in the time
estimate.

Expected vectors come from numpy over the adapted teacher's own ``encode``, never from the code under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from cselab.errors import CselabError
from cselab.models.sentence_model import load_model
from tests.adaptation.test_adapt_distill import _unit, snapshot, write_recipe, write_text
from tests.helpers import recipe_with, run_cli

FIRST = "vectors-and-head-teacher-first"
# the recipe on a tiny batch and length, the teacher adapted for 3 steps, in fp32 (the student trains --steps 3)
TINY = {"batch_size": 8, "max_length": 16, "adapted_teacher_steps": 3, "overrides": ("train.precision=fp32",)}


def test_the_teachers_adaptation_is_planned_first_with_the_students_held_out_part(home_with_teacher, long_bert_dir,
                                                                                 tmp_path):
    from cselab.adaptation import plan_adapt
    from cselab.adaptation.recipe import load_recipe

    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(long_bert_dir),
                      recipe=recipe_with(FIRST, lr=0.001, overrides=("train.precision=fp32",)))
    inner = plan.teacher_plan
    assert (inner.model, inner.teacher, inner.recipe.name, inner.steps, inner.output_dir) == (
        "all-mpnet-base-v2", None, "simcse", 100, out / "teacher-adapted")
    assert load_recipe(FIRST).adapted_teacher_steps == 100
    assert inner.held_out == plan.held_out and inner.train_sentences == plan.train_sentences
    # where and how it computes is the student's; what it trains is SimCSE's own
    assert (inner.config.train.precision, inner.config.train.lr) == ("fp32", 1e-5)
    assert (plan.config.train.precision, plan.config.train.lr) == ("fp32", 0.001)
    assert plan.teacher == str(out / "teacher-adapted" / "model") == plan.config.method_options["teacher"]
    assert (plan.recipe.name, plan.mix) == (FIRST, 0.75)
    facts = plan.facts()
    assert (facts["adapted_teacher"], facts["adapted_teacher_steps"]) == ("all-mpnet-base-v2", 100)
    assert plan.describe().startswith("adapt (simcse): SimCSE")
    assert f"\nadapt ({FIRST}): the teacher's whole vector" in plan.describe()
    assert "adapted_teacher" not in plan_adapt(text, out, model=str(long_bert_dir)).facts()


@pytest.mark.parametrize(("extra", "message"), [
    (["--no-teacher", "--recipe", FIRST], f"the {FIRST} recipe distils a teacher: drop --no-teacher"),
    ("simcse-file", "a simcse recipe trains without a teacher: no adapt_teacher"),
])
def test_adapt_teacher_without_a_teacher_is_refused_in_one_line(extra, message, home_with_teacher, tiny_bert_dir,
                                                                tmp_path, capsys):
    out = tmp_path / "adapted"
    if extra == "simcse-file":  # a SimCSE recipe file that asks for the teacher adapted first: it has none
        extra = ["--recipe", str(write_recipe(tmp_path / "recipe.yaml", "simcse", adapt_teacher=True))]
    code, _, err = run_cli(["adapt", str(write_text(tmp_path / "text.txt")), "--model", str(tiny_bert_dir),
                            "--output", str(out), *extra], capsys)
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_adapt_teacher_with_no_teacher_fetched_says_how_to_fetch_one(tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    with pytest.raises(CselabError, match=f"^the {FIRST} recipe distils a teacher: give --teacher .*cselab data fetch "
                                          "models-mpnet"):
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir), recipe=FIRST)
    with pytest.raises(CselabError, match="recipe distils a teacher: give --teacher .*cselab data fetch models-mpnet"):
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir),
                   recipe=recipe_with(adapt_teacher=True))


def test_the_adapted_teacher_is_what_the_student_learns_and_a_resume_never_adapts_it_again(
        tiny_bert_dir, teacher_dir, tmp_path, monkeypatch):
    from cselab.adaptation import plan_adapt, run_adapt
    from cselab.teacher.vectors import read_teacher_vectors
    from cselab.training.trainer import Trainer

    text = write_text(tmp_path / "text.txt")
    general = write_text(tmp_path / "general.txt", n=300, seed=5)
    out = tmp_path / "adapted"

    def plan():
        return plan_adapt(text, out, model=str(tiny_bert_dir), teacher=str(teacher_dir), steps=3,
                          recipe=recipe_with(FIRST, general_file=str(general), **TINY))

    # killed in the student's training, after the teacher's adaptation finished
    real_step = Trainer.train_step

    def killed_in_the_student(self, batch):
        if self.config.method == "distill":
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", killed_in_the_student)
    from cselab.teacher import vectors as teacher_pass

    real_pass, export_dirs = teacher_pass.teacher_vectors, set()

    def recorded_pass(*args, **kwargs):
        export_dirs.add(kwargs.get("export_dir"))
        return real_pass(*args, **kwargs)

    monkeypatch.setattr(teacher_pass, "teacher_vectors", recorded_pass)
    with pytest.raises(KeyboardInterrupt):
        run_adapt(plan())
    assert export_dirs == {out / "teacher-exports"}  # the adapted teacher's exports are kept in its run
    inner_dir = out / "teacher-adapted"
    inner = json.loads((inner_dir / "adapt.json").read_text())
    assert (inner["model"], inner["teacher"], inner["recipe"], inner["best_step"]) == (
        str(teacher_dir), None, "simcse", 3)
    adapted_files = snapshot(inner_dir)
    with pytest.raises(CselabError, match="add --resume"):
        run_adapt(plan())
    monkeypatch.setattr(Trainer, "train_step", real_step)
    result = run_adapt(plan(), resume=True)
    assert snapshot(inner_dir) == adapted_files, "the finished adaptation of the teacher is never run again"

    summary = json.loads((out / "adapt.json").read_text())
    assert summary["teacher"] == str(inner_dir / "model")
    assert (summary["adapted_teacher"]["model"], summary["adapted_teacher"]["steps"]) == (str(teacher_dir), 3)
    assert result.model_dir == out / "model" and summary["recipe"] == FIRST
    report = (out / "adapt-report.md").read_text()
    assert f"{teacher_dir} adapted to the text first (3 steps of SimCSE)" in report
    assert f"{summary['adapted_teacher']['wall_s']:.0f} s adapting the teacher" in report
    adaptation = json.loads((result.model_dir / "cselab.json").read_text())["adaptation"]
    assert adaptation["adapted_teacher"] == summary["adapted_teacher"]
    card = (result.model_dir / "README.md").read_text()
    assert f"- teacher: {inner_dir / 'model'} ({teacher_dir} adapted to the text first (3 steps of SimCSE));" in card
    # the student's targets are the ADAPTED teacher's unit vectors, which SimCSE moved away from the untouched one's
    held = plan().held_out_units
    stored = read_teacher_vectors(out / "teacher", held)
    adapted = _unit(load_model(inner_dir / "model").encode(held))
    untouched = _unit(load_model(teacher_dir).encode(held))
    np.testing.assert_allclose(stored, adapted, atol=1e-4)
    assert np.abs(adapted - untouched).max() > 1e-3
    assert run_adapt(plan(), resume=True).model_dir == result.model_dir  # finished: nothing to do


def test_the_estimate_adds_the_teachers_adaptation_until_it_is_finished(home_with_teacher, tiny_bert_dir, tmp_path,
                                                                       monkeypatch):
    import cselab.adaptation.estimate as estimate
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(tiny_bert_dir), steps=3, recipe=recipe_with(FIRST, **TINY))
    seen = []

    def by_plan(p, student, teacher=None):
        seen.append((p.output_dir, teacher is not None))
        return 1000.0 if p is plan.teacher_plan else 7.0

    monkeypatch.setattr(estimate, "extrapolate_seconds", by_plan)
    assert estimate.estimate_seconds(plan) == 1007.0
    # the student's pass through a teacher that is not made yet is timed (on the untouched teacher, of its shape)
    assert seen == [(out / "teacher-adapted", False), (out, True)]
    (out / "teacher-adapted").mkdir(parents=True)
    (out / "teacher-adapted" / "adapt.json").write_text("{}")
    seen.clear()
    loaded = []

    class Loaded(Exception):
        pass

    def record(name, *args, **kwargs):
        loaded.append(name)
        raise Loaded

    monkeypatch.setattr("cselab.teacher.vectors.load_teacher", record)
    with pytest.raises(Loaded):
        estimate.estimate_seconds(plan)
    # finished: nothing more to adapt, and the pass's cost is read off the adapted teacher itself
    assert loaded == [plan.teacher] and seen == []
