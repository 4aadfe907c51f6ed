"""What the user is told when their own labelled data says the adapted model lost against the untouched one, or that
the teacher does not lead it."""

import json
import time
from pathlib import Path

from cselab.adaptation import plan_adapt
from cselab.adaptation.plan import TEACHER_DIR
from cselab.adaptation.report import scores_lost, teacher_not_ahead, write_report
from cselab.adaptation.run import AdaptResult, run_adapt, summary_of
from cselab.reporter import Reporter, reporting
from tests.adaptation.test_adapt import write_text
from tests.helpers import LAB_RECIPES, recipe_with


def test_only_the_scores_that_fell_are_named() -> None:
    before = {"clustering": 86.88, "classification": 67.90, "sts": 82.03}
    after = {"clustering": 83.33, "classification": 67.90, "sts": 82.50}
    line = scores_lost(before, after)
    assert line is not None and "clustering 86.88 -> 83.33" in line
    assert "classification" not in line and "sts" not in line  # level or better: not a loss
    assert scores_lost(before, {**after, "clustering": 86.88}) is None
    assert scores_lost({}, {}) is None


def test_the_printed_summary_warns_after_the_scores(tmp_path) -> None:
    result = AdaptResult(tmp_path / "m", 200, "fixed-budget", {"retrieval": 90.72}, {"retrieval": 89.31}, 60.0,
                         tmp_path / "r.md", 0.75)
    lines = summary_of(result).splitlines()
    assert lines[1] == "retrieval: 90.72 -> 89.31 (-1.41)"
    assert lines[2].startswith("warning: on your labelled data the model handed back scores below the untouched "
                               "model (retrieval 90.72 -> 89.31)")
    gained = AdaptResult(tmp_path / "m", 200, "fixed-budget", {"retrieval": 78.39}, {"retrieval": 78.70}, 60.0,
                         tmp_path / "r.md", 0.75)
    assert "warning" not in summary_of(gained)


def test_the_report_says_it_below_the_table(tmp_path) -> None:
    (tmp_path / "metrics.jsonl").write_text("")
    summary = {"text": "t.txt", "sentences": 400, "held_out": 20, "model": "m", "teacher": None, "selection":
               "fixed-budget", "best_step": 3, "steps": 3, "wall_s": 1.0, "before": {"clustering": 86.88},
               "after": {"clustering": 83.33}}
    report = write_report(tmp_path, summary).read_text()
    table_end = report.index("| clustering | 86.88 | 83.33 | -3.55 |")
    assert report.index("**On your labelled data the model handed back scores below") > table_end


def test_the_teacher_is_named_where_it_does_not_lead_a_tie_included() -> None:
    before = {"clustering": 86.88, "classification": 67.90, "sts": 82.03}
    teacher = {"clustering": 90.10, "classification": 67.90, "sts": 81.00}
    line = teacher_not_ahead(before, teacher, "all-mpnet-base-v2")
    assert line is not None and "the teacher (all-mpnet-base-v2)" in line
    assert "classification 67.90 against 67.90" in line and "sts 81.00 against 82.03" in line
    assert "clustering" not in line  # it leads there
    assert teacher_not_ahead(before, {**teacher, "classification": 68.0, "sts": 82.5}, "t") is None
    assert teacher_not_ahead(before, {}, "t") is None  # no teacher scored: nothing to say


TEACHER_SCORING_S = 1.0


def test_the_teacher_is_scored_before_its_pass_and_the_warning_reaches_summary_and_report(
        tiny_bert_dir, teacher_dir, tmp_path) -> None:
    """With labelled data, the teacher (48 wide) is scored before its pass over the text and before training; where
    it does not lead the untouched student (32 wide), the warning is said then, and again in the summary and the
    report."""
    out = tmp_path / "adapted"
    plan = plan_adapt(write_text(tmp_path / "text.txt"), out, model=str(tiny_bert_dir), teacher=str(teacher_dir),
                      steps=2, recipe=recipe_with(LAB_RECIPES / "vectors.yaml", batch_size=8, max_length=16,
                                                  overrides=("train.precision=fp32",)))
    seen = []

    def evaluate(encoder):
        width = encoder.encode(["a line"]).shape[1]
        seen.append((width, (out / TEACHER_DIR).exists(), (out / "metrics.jsonl").exists()))
        if width == 48:
            time.sleep(TEACHER_SCORING_S)  # scoring time, to be counted once: as scoring, not as the teacher's pass
        return {"retrieval": 88.59} if width == 48 else {"retrieval": 90.72}

    said: list[str] = []
    with reporting(Reporter(lines=said.append)):
        result = run_adapt(plan, evaluate=evaluate)
    # the untouched student, then the teacher before its pass and before any training step, then the model handed back
    assert [width for width, *_ in seen] == [32, 48, 32]
    assert seen[1][1:] == (False, False)
    warned = [i for i, line in enumerate(said) if line.startswith("warning: on your labelled data the teacher")]
    passes = [i for i, line in enumerate(said) if line.startswith("teacher pass")]
    assert len(warned) == 1 and passes and warned[0] < passes[0]
    assert result.teacher_scores == {"retrieval": 88.59}
    record = json.loads((out / "adapt.json").read_text())
    assert record["teacher_scores"] == {"retrieval": 88.59}
    # the teacher's scoring is in evaluate_s and not in teacher_s: the parts add up to no more than the whole
    assert record["evaluate_s"] >= TEACHER_SCORING_S
    assert record["teacher_s"] + record["train_s"] + record["evaluate_s"] <= record["wall_s"] + 0.01
    summary = summary_of(result)
    assert f"the teacher ({teacher_dir}) does not score above the untouched model (retrieval 88.59 against 90.72)" \
        in summary
    report = (out / "adapt-report.md").read_text()
    assert "The teacher on your labelled data, before training: retrieval 88.59." in report
    assert "**On your labelled data the teacher" in report


def test_a_teacher_that_leads_brings_no_warning(tmp_path) -> None:
    result = AdaptResult(tmp_path / "m", 200, "fixed-budget", {"retrieval": 78.39}, {"retrieval": 78.70}, 60.0,
                         tmp_path / "r.md", 0.75, "all-mpnet-base-v2", {"retrieval": 83.11})
    assert "warning" not in summary_of(result)


def _summary(**extra) -> dict:
    return {"text": "t.txt", "sentences": 400, "held_out": 20, "model": "m", "teacher": None, "selection":
            "fixed-budget", "best_step": 3, "steps": 3, "wall_s": 1.0, **extra}


def test_the_picture_is_named_for_what_it_draws(tmp_path) -> None:
    """A fixed budget scores one step: the picture is the user's scores alone and its caption says so; a curve of
    the selection criterion adds its panel and its name; without labels or a curve there is no picture."""
    (tmp_path / "metrics.jsonl").write_text("")
    scores = {"before": {"retrieval": 78.39}, "after": {"retrieval": 79.23}}
    report = write_report(tmp_path, _summary(**scores)).read_text()
    assert "![your task](adapt-report.png)" in report and "selection" not in report.split("![")[1]
    assert (tmp_path / "adapt-report.png").stat().st_size > 0

    curved = tmp_path / "curved"
    curved.mkdir()
    (curved / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "dev": -loss}) + "\n"
                                                  for s, loss in ((0, 0.30), (5, 0.21), (10, 0.25))))
    report = write_report(curved, _summary(criterion="held-out/-distillation-loss", **scores)).read_text()
    assert "![your task; selection (no labels)](adapt-report.png)" in report
    assert "held-out distillation loss by step: 0: 0.3, 5: 0.21, 10: 0.25" in report

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "metrics.jsonl").write_text("")
    report = write_report(bare, _summary()).read_text()
    assert "![" not in report and not (bare / "adapt-report.png").exists()


def test_the_teachers_score_stands_beside_before_and_after(tmp_path, monkeypatch) -> None:
    """Where the teacher was scored on the user's labels, its bar stands beside before and after, in the group of
    the key it was scored on; the drawn heights are the figures given, and the axis shows the lowest of them."""
    import cselab.adaptation.report as report_module

    drawn = {}

    def keep(fig, path):
        drawn["fig"] = fig
        return Path(path)

    monkeypatch.setattr(report_module, "save_figure", keep)
    before, after = {"clustering": 86.88, "classification": 67.90}, {"clustering": 88.07, "classification": 69.70}
    report_module.plot_adaptation(before, after, [], "fixed-budget", False, tmp_path / "p.png",
                                  {"classification": 61.50, "sts": 83.42})  # sts: not scored before/after, not drawn
    ax = drawn["fig"].axes[0]
    heights = {label: [round(p.get_height(), 2) for p in container.patches]
               for container, label in zip(ax.containers, ("before", "after", "teacher"), strict=True)}
    assert heights == {"before": [86.88, 67.90], "after": [88.07, 69.70], "teacher": [61.50]}
    teacher_bar = ax.containers[2].patches[0]
    centre = teacher_bar.get_x() + teacher_bar.get_width() / 2
    assert 0.5 < centre < 1.5  # in the second group (classification, at x = 1), right of its before/after bars
    assert centre > ax.containers[1].patches[1].get_x() + ax.containers[1].patches[1].get_width()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["before", "after", "teacher"]
    assert ax.get_ylim()[0] == 61.50 - 5.0  # the teacher's bar, the lowest, is in view
