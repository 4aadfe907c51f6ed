"""--lead-of of lab/domain_study/clustering_seeds.py: the share of a reference's lead that a mean recovers, against
hand-computed numbers."""

from __future__ import annotations

import json

import pytest

from lab.domain_study.clustering_seeds import lead_share, main


def test_the_share_of_the_lead_is_the_gain_over_the_lead_in_percent():
    # (88.27 - 86.42) / (89.07 - 86.42) = 1.85 / 2.65 = 0.698113...
    assert lead_share(88.27, 86.42, 89.07) == pytest.approx(69.8113, abs=1e-3)
    assert lead_share(86.42, 86.42, 89.07) == 0.0  # no gain
    assert lead_share(89.07, 86.42, 89.07) == pytest.approx(100.0)  # the whole lead
    assert lead_share(85.0, 86.0, 90.0) == pytest.approx(-25.0)  # below the untouched model: -1 / 4
    with pytest.raises(ValueError):
        lead_share(88.0, 86.42, 86.42)  # no lead to recover


def _records(path):
    path.write_text("".join(json.dumps(r) + "\n" for r in (
        {"domain": "bbc-news", "model": "checkpoint", "path": "all-MiniLM-L6-v2", "v_measure": {"42": 86.88},
         "mean": 86.42, "min": 86.17, "max": 86.88},
        {"domain": "bbc-news", "model": "mpnet", "mean": 89.07},
        {"domain": "bbc-news", "model": "s1", "mean": 88.0},
        {"domain": "bbc-news", "model": "s2", "mean": 88.54},
        {"domain": "bbc-news", "model": "same", "mean": 86.42},
        {"domain": "tweets", "model": "mpnet", "mean": 50.0})))
    return path


def test_lead_of_prints_the_mean_both_models_and_the_share_recovered(tmp_path, capsys):
    path = _records(tmp_path / "clustering_seeds.jsonl")
    main(["--domain", "bbc-news", "--mean-of", "s1,s2", "--lead-of", "checkpoint,mpnet", "--results", str(path)])
    mean_line, lead_line = capsys.readouterr().out.strip().splitlines()
    # (88.0 + 88.54) / 2 = 88.27; (88.27 - 86.42) / (89.07 - 86.42) = 69.81...% -> 69.8%
    assert mean_line.endswith(": 88.27")
    assert "checkpoint 86.42" in lead_line and "mpnet 89.07" in lead_line
    assert "recovers 69.8% of mpnet's lead over checkpoint" in lead_line


@pytest.mark.parametrize(("args", "message"), [
    (["--mean-of", "s1,s2", "--lead-of", "checkpoint,bert"], "--lead-of: no bbc-news record of bert"),
    (["--mean-of", "s1,s2", "--lead-of", "checkpoint,same"], "there is no lead"),
    (["--mean-of", "s1,s2", "--lead-of", "checkpoint"], "expected UNTOUCHED,REFERENCE"),
    (["--lead-of", "checkpoint,mpnet"], "--lead-of goes with --mean-of"),
])
def test_lead_of_refuses_a_missing_model_no_lead_or_a_lone_name(tmp_path, capsys, args, message):
    path = _records(tmp_path / "clustering_seeds.jsonl")
    with pytest.raises(SystemExit):
        main(["--domain", "bbc-news", *args, "--results", str(path)])
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]  # argparse's usage, then the one-line error
    assert "error: " in last and message in last
    assert captured.out == ""  # refused before the mean is printed
