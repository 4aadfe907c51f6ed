"""`cselab adapt --task`: with a teacher and no recipe named, similarity and search run the recipe that adapts the
teacher first (vectors-and-head-teacher-first: the default with ``adapt_teacher``); clustering and classification keep
the default; a recipe the user gives is kept."""

from __future__ import annotations

import pytest

from cselab.errors import CselabError
from tests.adaptation.test_adapt_distill import write_text
from tests.helpers import LAB_RECIPES, recipe_with, run_cli


@pytest.mark.parametrize("task", ["similarity", "search"])
def test_similarity_and_search_adapt_the_teacher_first(task, home_with_teacher, long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(long_bert_dir), task=task)
    named = plan_adapt(text, out, model=str(long_bert_dir), recipe="vectors-and-head-teacher-first")
    # the default recipe with the teacher adapted first, as a user's recipe file would say it
    same = plan_adapt(text, out, model=str(long_bert_dir), recipe=recipe_with(adapt_teacher=True))
    assert plan.teacher_plan is not None and plan.teacher == same.teacher == str(out / "teacher-adapted" / "model")
    assert (plan.recipe.name, plan.mix) == ("vectors-and-head-teacher-first", 0.75)
    assert plan.config == named.config == same.config and plan.train_units == same.train_units
    assert plan.teacher_plan.config == same.teacher_plan.config
    assert f"\nadapt for {task} (vectors-and-head-teacher-first): the teacher's whole vector" in plan.describe()


@pytest.mark.parametrize("task", ["clustering", "classification"])
def test_clustering_and_classification_keep_the_default(task, home_with_teacher, long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(long_bert_dir), task=task)
    default = plan_adapt(text, out, model=str(long_bert_dir))
    assert plan.recipe.name == default.recipe.name == "vectors-and-head"
    assert plan.teacher_plan is None and plan.teacher == default.teacher == "all-mpnet-base-v2"
    assert plan.config == default.config and plan.task == task and default.task is None


def test_options_given_are_kept(home_with_teacher, tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    # a recipe named by the user is not replaced: the untouched teacher distils
    named = plan_adapt(text, out, model=str(tiny_bert_dir), task="search", recipe=LAB_RECIPES / "vectors.yaml")
    assert (named.recipe.name, named.teacher, named.teacher_plan) == ("vectors", "all-mpnet-base-v2", None)
    # no teacher: SimCSE, as without --task
    alone = plan_adapt(text, out, model=str(tiny_bert_dir), task="search", no_teacher=True)
    assert (alone.recipe.name, alone.teacher, alone.teacher_plan) == ("simcse", None, None)


def test_search_without_a_fetched_teacher_trains_simcse(tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    plan = plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir), task="search")
    assert (plan.recipe.name, plan.teacher, plan.teacher_plan) == ("simcse", None, None)


def test_an_unknown_task_is_refused_in_one_line(tiny_bert_dir, tmp_path, capsys):
    from cselab.adaptation import plan_adapt

    with pytest.raises(CselabError, match="--task must be one of similarity, search, clustering, classification, "
                                          "got 'ranking'"):
        plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir), task="ranking")
    out = tmp_path / "b"
    code, _, err = run_cli(["adapt", str(write_text(tmp_path / "text.txt")), "--model", str(tiny_bert_dir),
                            "--output", str(out), "--task", "ranking"], capsys)
    assert code != 0 and "--task" in err and "ranking" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
