"""What the user is told when their own labelled data says the adapted model lost against the untouched one."""

from cselab.adapt.report import scores_lost, write_report
from cselab.adapt.run import AdaptResult, summary_of


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
