"""`cselab adapt --task`: similarity and search adapt the teacher first (as --adapt-teacher does) when a teacher
distils with the default recipe; clustering and classification keep the default; options the user gives are kept."""

from __future__ import annotations

import pytest

from cselab.errors import CselabError
from tests.adaptation.test_adapt_distill import write_text
from tests.helpers import run_cli


@pytest.mark.parametrize("task", ["similarity", "search"])
def test_similarity_and_search_adapt_the_teacher_first(task, home_with_teacher, tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(tiny_bert_dir), task=task)
    same = plan_adapt(text, out, model=str(tiny_bert_dir), adapt_teacher=True)
    assert plan.teacher_plan is not None and plan.teacher == same.teacher == str(out / "teacher-adapted" / "best")
    assert (plan.recipe, plan.mix) == ("vectors-and-head", 0.75) and plan.config == same.config
    assert f"\nadapt for {task}: the teacher's whole vector" in plan.describe()


@pytest.mark.parametrize("task", ["clustering", "classification"])
def test_clustering_and_classification_keep_the_default(task, home_with_teacher, tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    plan = plan_adapt(text, out, model=str(tiny_bert_dir), task=task)
    default = plan_adapt(text, out, model=str(tiny_bert_dir))
    assert plan.teacher_plan is None and plan.teacher == default.teacher == "all-mpnet-base-v2"
    assert plan.config == default.config and plan.task == task and default.task is None


def test_options_given_are_kept(home_with_teacher, tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text, out = write_text(tmp_path / "text.txt"), tmp_path / "adapted"
    # a recipe named by the user is not replaced: the untouched teacher distils
    named = plan_adapt(text, out, model=str(tiny_bert_dir), task="search", recipe="vectors")
    assert (named.recipe, named.teacher, named.teacher_plan) == ("vectors", "all-mpnet-base-v2", None)
    # no teacher: SimCSE, as without --task
    alone = plan_adapt(text, out, model=str(tiny_bert_dir), task="search", no_teacher=True)
    assert (alone.recipe, alone.teacher, alone.teacher_plan) == ("simcse", None, None)


def test_search_without_a_fetched_teacher_trains_simcse(tiny_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    plan = plan_adapt(write_text(tmp_path / "text.txt"), tmp_path / "a", model=str(tiny_bert_dir), task="search")
    assert (plan.recipe, plan.teacher, plan.teacher_plan) == ("simcse", None, None)


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
