"""lab/domain_study/interpolate.py: the choice on STS-B dev, the means over runs, and main's wiring with its models,
data and scoring replaced by fakes (the mixing itself, cselab's ``mixed_weights``, is tested in tests/experiments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch


def test_the_largest_weight_within_the_tolerance_is_kept_asking_from_the_largest_down():
    from lab.domain_study.interpolate import largest_weight_within

    dev = {1.0: 80.0, 0.75: 81.0, 0.5: 81.8, 0.25: 82.1}
    asked_order = []

    def dev_of(weight):
        asked_order.append(weight)
        return dev[weight]

    # the untouched model at 82.0, tolerance 0.3: 0.5 (81.8 >= 81.7) is the first from the top that passes
    weight, asked = largest_weight_within(dev_of, [0.25, 0.5, 1.0, 0.75], 82.0, 0.3)
    assert weight == 0.5 and asked_order == [1.0, 0.75, 0.5] and asked == {1.0: 80.0, 0.75: 81.0, 0.5: 81.8}
    # none within: the untouched model (weight 0), every weight asked
    assert largest_weight_within(dev.__getitem__, [1.0, 0.75], 83.0, 0.3) == (0.0, {1.0: 80.0, 0.75: 81.0})


def _record(run, weight, main_score, stsb_test, **more):
    return {"domain": run.partition("/")[0], "run": run, "seed": int(run.rpartition("-s")[2]), "weight": weight,
            "main_task": "clustering", "main_score": main_score, "stsb_test": stsb_test, **more}


def test_the_means_over_the_runs_at_a_weight_and_at_their_chosen_weights():
    from lab.domain_study.interpolate import RunMeans, mean_over_runs

    chosen = {"stsb_dev_tolerance": 0.3}
    records = [
        _record("bbc-news/x-s1", 0.5, 80.0, 82.0),
        _record("bbc-news/x-s2", 0.5, 84.0, 81.0),
        _record("bbc-news/x-s1", 0.5, 81.0, 82.5),  # a later record of s1 at 0.5: the latest counts
        _record("bbc-news/x-s3", 0.5, 99.0, 99.0),  # a run not asked about
        _record("bbc-news/x-s1", 1.0, 90.0, 70.0),
        _record("bbc-news/x-s1", 0.8, 86.0, 81.0, chosen_on=chosen),
        _record("bbc-news/x-s2", 0.9, 87.0, 80.5, chosen_on=chosen),
        _record("bbc-news/x-s2", 1.0, 95.0, 60.0, chosen_on=chosen),  # chosen at 1.0, then chosen again at 0.9
        _record("bbc-news/x-s2", 0.9, 87.0, 80.5, chosen_on=chosen),
    ]
    runs = ["bbc-news/x-s1", "bbc-news/x-s2"]
    # at 0.5: s1's latest (81.0, 82.5) and s2 (84.0, 81.0): (81 + 84) / 2 = 82.5, (82.5 + 81) / 2 = 81.75
    assert mean_over_runs(records, runs, 0.5) == RunMeans(82.5, 81.75, 2)
    # at 1.0 only s1 has a fixed-weight record (s2's record at 1.0 is a chosen one and does not count there)
    assert mean_over_runs(records, runs, 1.0) == RunMeans(90.0, 70.0, 1)
    # each at its chosen weight (the records with chosen_on): (86 + 87) / 2 = 86.5, (81 + 80.5) / 2 = 80.75
    assert mean_over_runs(records, runs, None) == RunMeans(86.5, 80.75, 2)
    assert mean_over_runs(records, runs, 0.3) is None


@pytest.fixture
def fake_models(tmp_path, monkeypatch):
    """main's expensive parts replaced: every run's adapted model holds ones and the untouched model zeros (so a model
    interpolated at weight w holds w); STS-B dev is read from ``dev[run][w]``, the domain's main score is
    80 + 10 w and STS-B test 85 - 5 w. Returns (the models loaded, dev)."""
    from types import SimpleNamespace

    import cselab.data.evalsets.domains as domains
    import cselab.evaluation.domain as domain
    import cselab.models.sentence_model as sentence_model
    import cselab.provenance as provenance
    import lab.domain_study.score_suite as score_suite
    import lab.domain_study.scoring as scoring

    runs = tmp_path / "runs"
    loaded: list[str] = []
    dev: dict[str, dict[float, float]] = {}
    current = {}

    def run_model(spec, runs_dir):
        path = runs / spec / "best"
        path.mkdir(parents=True, exist_ok=True)
        (path.parent / "adapt.json").write_text(json.dumps({"model": "untouched", "best_step": 7}))
        return spec, path, {"kind": "domain-run", "domain": spec.partition("/")[0], "seed": int(spec[-1])}

    def load_model(path, max_length=None):
        loaded.append(path)
        model = torch.nn.Linear(2, 2)
        adapted = path != "untouched"
        if adapted:
            current["run"] = str(Path(path).parent.relative_to(runs))
        with torch.no_grad():
            for tensor in model.parameters():
                tensor.fill_(1.0 if adapted else 0.0)
        return model

    def weight_of(model):
        return model.weight[0, 0].item()

    def study_scores(model, inputs, task):
        w = weight_of(model)
        return {"scores": {task: 80 + 10 * w}, "main_score": 80 + 10 * w, "stsb_test": 85 - 5 * w}

    monkeypatch.setattr(score_suite, "domain_run_model", run_model)
    monkeypatch.setattr(sentence_model, "load_model", load_model)
    monkeypatch.setattr(domain, "load_inputs", lambda domain: SimpleNamespace(domain=domain))
    monkeypatch.setattr(domains, "get_domain", lambda name: SimpleNamespace(main_task="clustering"))
    monkeypatch.setattr(scoring, "study_scores", study_scores)
    monkeypatch.setattr(scoring, "stsb_dev", lambda model: dev[current["run"]][weight_of(model)])
    monkeypatch.setattr(provenance, "provenance", lambda: {})
    return loaded, dev


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_choosing_on_stsb_dev_records_the_chosen_weight_and_a_resumed_command_appends_nothing(
        tmp_path, capsys, fake_models):
    from lab.domain_study.interpolate import main

    loaded, dev = fake_models
    # the untouched model (weight 0) at 86.0 on STS-B dev, tolerance 0.3: a weight passes at 85.7 or more.
    # s1, asked from the largest down: 1.0 (85.0) and 0.75 (85.6) fail, 0.5 (85.8) passes -> 0.5; 0.25 never asked.
    # s2: 1.0 (85.9) passes at once -> 1.0
    dev["bbc-news/x-s1"] = {0.0: 86.0, 1.0: 85.0, 0.75: 85.6, 0.5: 85.8, 0.25: 86.1}
    dev["bbc-news/x-s2"] = {0.0: 86.0, 1.0: 85.9, 0.75: 85.0, 0.5: 85.0, 0.25: 85.0}
    results = tmp_path / "interpolation_dev.jsonl"
    argv = ["--choose-on-stsb-dev", "0.3", "--weights", "0.25,0.5,0.75,1", "--runs", "bbc-news/x-s1,bbc-news/x-s2",
            "--threads", str(torch.get_num_threads()), "--results", str(results)]
    main(argv)
    s1, s2 = _lines(results)
    assert s1["run"] == "bbc-news/x-s1" and s1["weight"] == 0.5 and s1["seed"] == 1 and s1["selected_step"] == 7
    assert s1["chosen_on"] == {"stsb_dev_tolerance": 0.3, "untouched_stsb_dev": 86.0,
                               "stsb_dev": {"1.0": 85.0, "0.75": 85.6, "0.5": 85.8}}
    # scored at the chosen weight: 80 + 10 * 0.5, 85 - 5 * 0.5
    assert (s1["main_score"], s1["stsb_test"]) == (85.0, 82.5)
    assert s2["weight"] == 1.0 and s2["chosen_on"]["stsb_dev"] == {"1.0": 85.9}
    assert (s2["main_score"], s2["stsb_test"]) == (90.0, 80.0)
    # one mean over the runs at their chosen weights: (85 + 90) / 2 = 87.5, (82.5 + 80) / 2 = 81.25
    out = capsys.readouterr().out
    assert "mean over 2 runs, each at its own chosen weight: main score 87.50, STS-B test 81.25" in out

    loaded_before = list(loaded)
    main(argv)  # the same command again: both runs were chosen already
    assert len(_lines(results)) == 2 and loaded == loaded_before
    assert "mean over 2 runs, each at its own chosen weight: main score 87.50, STS-B test 81.25" in \
        capsys.readouterr().out


def test_the_mean_at_each_weight_counts_a_run_a_resumed_command_skipped(tmp_path, capsys, fake_models):
    from lab.domain_study.interpolate import main

    loaded, _ = fake_models
    results = tmp_path / "interpolation.jsonl"
    results.write_text(json.dumps(_record("bbc-news/x-s1", 0.5, 84.0, 82.0)) + "\n")  # s1 at 0.5 recorded already
    main(["--weights", "0.5,1", "--runs", "bbc-news/x-s1,bbc-news/x-s2", "--threads", str(torch.get_num_threads()),
          "--results", str(results)])
    recorded = [(r["run"], r["weight"]) for r in _lines(results)]
    assert recorded == [("bbc-news/x-s1", 0.5), ("bbc-news/x-s1", 1.0), ("bbc-news/x-s2", 0.5),
                        ("bbc-news/x-s2", 1.0)]
    out = capsys.readouterr().out
    # at 0.5: s1's recorded (84.0, 82.0) and s2's (85.0, 82.5): 84.5, 82.25; at 1.0 both (90.0, 80.0)
    assert "mean over 2 runs, at weight 0.5: main score 84.50, STS-B test 82.25" in out
    assert "mean over 2 runs, at weight 1.0: main score 90.00, STS-B test 80.00" in out
