"""The domain study: sentence-transformers' recipes through its trainer (lab/domain_study/domain_peers.py), the runner
(lab/domain_study/run_domains.py: one record per run, recorded runs skipped, the selection curves), the observer hook of
the trainer, the label-free held-out scores, and the report (means, regret and Spearman against hand
computations)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from cselab.adaptation.selection import HeldOutScores, deletion_view
from cselab.errors import CselabError
from lab.domain_study import bbc_train_articles, run_domains, score_suite, selected_model, time_adapt
from lab.domain_study.default_records import DEFAULTS, DERIVED, Derivation
from lab.domain_study.study import (
    CONFIGURATION,
    CRITERIA,
    DEFAULT_CONFIGURATION,
    domains_table,
    selection_agreement,
    selection_table,
)
from tests.helpers import LAB_RECIPES, WORDS, build_tiny_model_dir, recipe_with, write_sts_home

TOPICS = {"sport": ["ball", "run", "horse", "fast"], "music": ["guitar", "piano", "song", "music"],
          "home": ["house", "chair", "table", "bed"]}


def _topic_sentence(rng: random.Random, topic: str) -> str:
    words = [w for w in WORDS if w.isalpha()]
    return " ".join(rng.choice(TOPICS[topic]) if rng.random() < 0.5 else rng.choice(words)
                    for _ in range(rng.randint(5, 10)))


def write_domain_home(home: Path) -> Path:
    """A data home with a tiny STS-B and a synthetic `bbc-news` domain: 260 distinct sentences of text and a
    labels file of 30 other items (3 topics)."""
    write_sts_home(home)
    rng = random.Random(5)
    folder = home / "domains" / "bbc-news"
    folder.mkdir(parents=True)
    items = [(_topic_sentence(rng, t), t) for t in TOPICS for _ in range(10)]
    (folder / "labels.tsv").write_text("".join(f"{text}\t{label}\n" for text, label in items))
    held = {text for text, _ in items}
    train: dict[str, None] = {}
    while len(train) < 260:
        sentence = _topic_sentence(rng, rng.choice(list(TOPICS)))
        if sentence not in held:
            train[sentence] = None
    (folder / "train.txt").write_text("".join(f"{s}\n" for s in train))
    (home / "domains" / "manifest.json").write_text("{}")
    return home


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """One run of lab/domain_study/run_domains.py over every configuration but `mpnet` (2 steps of 8), and a second one
    that must skip them all."""
    pytest.importorskip("mteb")
    pytest.importorskip("accelerate")  # sentence-transformers' trainer needs it (cselab[bench])
    root = tmp_path_factory.mktemp("study")
    home = write_domain_home(root / "home")
    student = build_tiny_model_dir(root / "student", "bert", seed=0)
    teacher = build_tiny_model_dir(root / "teacher", "bert", seed=7)
    results = root / "domains.jsonl"
    argv = ["--domains", "bbc-news", "--configurations", "checkpoint,st-tsdae,st-ct,st-mnrl,cselab-simcse,cselab-adapt,"
            "cselab-distill-sim-nb3-passages",
            "--steps", "2", "--budget-note", "a test", "--batch-size", "8", "--max-length", "16",
            "--eval-max-length", "24", "--observe-every", "1", "--model", str(student), "--teacher", str(teacher),
            "--results", str(results), "--runs", str(root / "runs"), "--quiet"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CSELAB_HOME", str(home))
        # fp32 whatever the machine's load makes the timing probe say: the trainer's selection scores and the
        # observer's values are compared exactly, and bf16 autocast would part them by ~1e-5
        mp.setattr("cselab.runtime.precision.probe_matmul", lambda shape: {"fp32": 2.0, "bf16": 1.0})
        script = run_domains
        script.main(argv)
        first = results.read_text()
        script.main(argv)
    records = [json.loads(line) for line in first.splitlines()]
    return {"home": home, "student": student, "teacher": teacher, "records": records, "results": results,
            "first": first, "root": root}


def test_every_run_is_one_record_with_scores_budget_and_provenance(study):
    records = study["records"]
    assert [r["configuration"] for r in records] == ["checkpoint", "st-tsdae", "st-ct", "st-mnrl", "cselab-simcse",
                                                    "cselab-adapt", "cselab-distill-sim-nb3-passages"]
    for r in records:
        assert r["domain"] == "bbc-news" and r["seed"] == 1 and r["main_task"] == "clustering"
        assert r["main_score"] == r["scores"]["clustering"] and set(r["scores"]) == {"clustering", "classification"}
        assert -100 <= r["stsb_test"] <= 100
        assert ({"git", "machine", "date"} <= set(r["provenance"])
                and r["command"].startswith("python -m lab.domain_study.run_domains"))
        if r["configuration"] == "checkpoint":
            assert r["wall_s"] is None and r["training_text"] is None
        else:
            # --batch-size 8, unless the configuration's own overrides name its batch
            batch = next((int(o.split("=")[1]) for o in CONFIGURATION[r["configuration"]].overrides
                          if o.startswith("train.batch_size=")), 8)
            assert r["wall_s"] > 0 and r["steps"] == 2 and r["batch_size"] == batch
            assert r["budget_note"].startswith("a test") and "default" in r["budget_note"]
    peers = {r["configuration"]: r for r in records if r["configuration"].startswith("st-")}
    assert {r["recipe"]["recipe"]["loss"] for r in peers.values()} == {
        "DenoisingAutoEncoderLoss", "ContrastiveTensionLossInBatchNegatives", "MultipleNegativesRankingLoss"}
    assert all(r["training_text"]["trained_on"] == 260 and r["training_text"]["held_out"] == 0 for r in peers.values())
    assert peers["st-tsdae"]["recipe"]["deletion"] == 0.6


def test_a_second_run_skips_every_recorded_run(study):
    assert study["results"].read_text() == study["first"]


def test_the_peers_saved_models_are_what_was_scored(study, monkeypatch):
    """A peer's record is the score of its saved model, re-scored here from the directory (at the eval length)."""
    from cselab.evaluation.domain import evaluate_domain

    monkeypatch.setenv("CSELAB_HOME", str(study["home"]))
    record = next(r for r in study["records"] if r["configuration"] == "st-mnrl")
    from cselab.models.sentence_model import load_model

    model = load_model(record["recipe"]["model_dir"], max_length=24)
    assert evaluate_domain(model, domain="bbc-news") == record["scores"]


def test_cselab_runs_record_the_curves_of_the_criteria(study):
    for r in study["records"]:
        if not r["configuration"].startswith("cselab-"):
            assert "curve" not in r
            continue
        curve = r["curve"]
        assert [p["step"] for p in curve] == [0, 1, 2]  # step 0 and every evaluation
        assert {"teacher_agreement", "stsb_dev", "infonce", "alignment", "uniformity", "domain"} <= set(curve[0])
        # each view's held-out loss and the teacher's neighbourhoods in it (lines, and the guard's passages)
        assert {f"{key}{view}" for key in ("distillation_loss", "neighbour_overlap", "partition_agreement")
                for view in ("", "_passages")} <= set(curve[0])
        assert r["selection_study"] == selection_agreement(curve)
        assert r["training_text"]["held_out"] == 20 and r["training_text"]["trained_on"] == 240
    adapt = next(r for r in study["records"] if r["configuration"] == "cselab-adapt")
    metrics = [json.loads(line) for line in
               (study["root"] / "runs" / "bbc-news" / "cselab-adapt-s1" / "metrics.jsonl").read_text().splitlines()]
    dev = {m["step"]: m["dev"] for m in metrics if "dev" in m}
    assert {p["step"]: p["teacher_agreement"] for p in adapt["curve"]} == dev  # what adapt selects by
    assert adapt["trace"]["selection_logged"] == [[step, round(dev[step], 4)] for step in (0, 1, 2)]
    # observing never selects: adapt kept its own best step of the teacher agreement
    assert adapt["best_step"] == max(dev, key=lambda s: (dev[s], -s))
    assert adapt["selection_study"]["criteria"]["teacher_agreement"]["selected_step"] == adapt["best_step"]
    simcse = next(r for r in study["records"] if r["configuration"] == "cselab-simcse")
    assert simcse["best_step"] == 2 and simcse["selection"] == "fixed-budget"
    # a passages run is watched on the held-out passages it selects by: the observer's held-out distillation loss
    # is the one the run logged as its (negated) selection score at every step
    metrics = [json.loads(line) for line in (study["root"] / "runs" / "bbc-news" /
                                             "cselab-distill-sim-nb3-passages-s1" / "metrics.jsonl").read_text()
               .splitlines()]
    dev = {m["step"]: m["dev"] for m in metrics if "dev" in m}
    passages = next(r for r in study["records"] if r["configuration"] == "cselab-distill-sim-nb3-passages")
    assert {p["step"]: -p["distillation_loss"] for p in passages["curve"]} == pytest.approx(dev, abs=1e-7)


def test_held_out_scores_by_hand(tiny_bert_dir):
    from cselab.models.sentence_model import load_model

    rng = random.Random(0)
    assert deletion_view("one", 0.5, rng) == "one"
    view = deletion_view("a b c d e f g h i j", 0.1, random.Random(3))
    assert 1 <= len(view.split()) < 10 and set(view.split()) <= set("abcdefghij")
    sentences = [" ".join(rng.choice([w for w in WORDS if w.isalpha()]) for _ in range(8)) for _ in range(12)]
    model = load_model(tiny_bert_dir, pooler="mean")
    scores = HeldOutScores(sentences, seed=1)(model)
    views = [deletion_view(s, 0.1, r) for r in [random.Random(1)] for s in sentences]
    a = torch.nn.functional.normalize(model.encode(sentences).float(), dim=1).double()
    b = torch.nn.functional.normalize(model.encode(views).float(), dim=1).double()
    logits = (a @ b.T) / 0.05
    infonce = float(np.mean([-(logits[i, i] - torch.logsumexp(logits[i], 0)).item() for i in range(12)]))
    align = float(((a - b) ** 2).sum(1).mean())
    sq = [float(((a[i] - a[j]) ** 2).sum()) for i in range(12) for j in range(i + 1, 12)]
    uniform = math.log(np.mean([math.exp(-2 * d) for d in sq]))
    assert scores["infonce"] == pytest.approx(infonce, abs=1e-4)
    assert scores["alignment"] == pytest.approx(align, abs=1e-5)
    assert scores["uniformity"] == pytest.approx(uniform, abs=1e-5)


def test_regret_and_spearman_by_hand():
    curve = [
        {"step": 0, "domain": 80.0, "teacher_agreement": 90.0, "stsb_dev": 86.0, "infonce": 0.5, "alignment": 0.2,
         "uniformity": -2.0},
        {"step": 10, "domain": 82.0, "teacher_agreement": 92.0, "stsb_dev": 85.0, "infonce": 0.4, "alignment": 0.3,
         "uniformity": -2.0},
        {"step": 20, "domain": 83.5, "teacher_agreement": 92.0, "stsb_dev": 84.0, "infonce": 0.45, "alignment": 0.1,
         "uniformity": -2.5},
        {"step": 30, "domain": 81.0, "teacher_agreement": 91.0, "stsb_dev": 83.0, "infonce": 0.3, "alignment": 0.4,
         "uniformity": -3.0},
    ]
    study = selection_agreement(curve)
    assert (study["best_step"], study["best_score"], study["steps"]) == (20, 83.5, [0, 10, 20, 30])
    got = {k: (v["selected_step"], v["regret"]) for k, v in study["criteria"].items()}
    assert got == {
        "teacher_agreement": (10, -1.5),  # 92 at steps 10 and 20: the earliest, as the trainer keeps it
        "stsb_dev": (0, -3.5),
        "infonce": (30, -2.5),  # lowest loss
        "alignment": (20, 0.0),
        "uniformity": (30, -2.5),
        "fixed_budget": (30, -2.5),
    }
    # Spearman by hand: domain ranks (0 10 20 30) = 1 3 4 2
    # stsb_dev ranks 4 3 2 1 -> d = -3 0 2 1, sum d^2 = 14, rho = 1 - 6*14/(4*15) = -0.4
    assert study["criteria"]["stsb_dev"]["spearman"] == pytest.approx(-0.4)
    # fixed budget: the step number, ranks 1 2 3 4 -> d = 0 1 1 -2, sum 6, rho = 0.4
    assert study["criteria"]["fixed_budget"]["spearman"] == pytest.approx(0.4)
    # -alignment ranks 3 2 4 1 -> d = -2 1 0 1, sum 6, rho = 0.4
    assert study["criteria"]["alignment"]["spearman"] == pytest.approx(0.4)
    # a criterion missing at some step is left out
    assert "infonce" not in selection_agreement([{**p, "infonce": None} for p in curve])["criteria"]


def _record(domain, configuration, seed, main, stsb, wall, curve=None):
    record = {"domain": domain, "configuration": configuration, "seed": seed, "main_task": "clustering",
              "main_score": main, "stsb_test": stsb, "wall_s": wall, "provenance": {"git": "abcdef0123456789"},
              "training_text": None if wall is None else {"file": "x/train.txt", "trained_on": 100, "held_out": 5},
              "steps": None if wall is None else 50, "batch_size": 64}
    if curve:
        record["curve"] = curve
        record["selection_study"] = selection_agreement(curve)
    return record


def test_the_report_renders_seed_means_and_the_agreement(tmp_path, capsys):
    curve_a = [{"step": s, "domain": d, "teacher_agreement": t, "stsb_dev": 80.0 + s, "infonce": 1.0, "alignment": 0.1,
                "uniformity": -1.0} for s, d, t in ((0, 70.0, 50.0), (5, 72.0, 60.0), (10, 71.0, 55.0))]
    records = [
        _record("bbc-news", "checkpoint", 1, 80.0, 82.03, None),
        _record("bbc-news", "cselab-adapt", 1, 81.0, 82.5, 100.0, curve_a),
        _record("bbc-news", "cselab-adapt", 2, 82.5, 82.0, 140.0, curve_a),
        _record("bbc-news", "st-ct", 1, 79.0, 81.0, 90.0),
        _record("linux-man", "checkpoint", 1, 70.0, 82.03, None),
    ]
    table = domains_table(records)
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[:2]: line for line in table.splitlines()[2:]}
    adapt = [c.strip() for c in rows[("bbc-news (clustering)", CONFIGURATION["cselab-adapt"].label)]
             .strip("|").split("|")]
    mean = (81.0 + 82.5) / 2
    assert adapt[4] == "2 (1, 2)" and adapt[5] == f"{mean:.2f}" and adapt[6] == f"{mean - 80.0:+.2f}"
    assert adapt[7] == f"{(82.5 + 82.0) / 2:.2f}" and adapt[8] == f"{(100 + 140) / 2:.0f}"
    with_threads = [{**r, "threads": 2} for r in records]
    cells = [line for line in domains_table(with_threads).splitlines() if "neighbour pairs" in line][0].split("|")
    assert cells[9].strip() == "120 (2 thr.)"  # wall time with the threads it ran on
    machines = [{**r, "provenance": {"machine": {"cpu": cpu}}}
                for r, cpu in zip(with_threads, ["AMD EPYC", "AMD EPYC", "Intel(R) Xeon(R) Processor", "AMD EPYC",
                                                 "AMD EPYC"], strict=True)]
    cells = [line for line in domains_table(machines).splitlines() if "neighbour pairs" in line][0].split("|")
    assert cells[9].strip() == "100 (2 thr., AMD EPYC); 140 (2 thr., Intel Xeon)"  # one mean per CPU, named
    # domains in the suite's order, the checkpoint first in each (the record's main task is shown as recorded)
    assert [k[0].split()[0] for k in rows] == ["bbc-news"] * 3 + ["linux-man"]
    assert list(rows)[0][1].startswith("all-MiniLM-L6-v2 untouched")
    # a transductive run is listed but kept out of the means: there the teacher agreement picks the worst step
    curve_t = [{**point, "domain": d} for point, d in zip(curve_a, (71.0, 70.0, 72.0), strict=True)]
    agreement = selection_table([*records, _record("bbc-news", "cselab-simcse-transductive", 1, 72.0, 82.0, 90.0,
                                                   curve_t)])
    assert f"| bbc-news | {CONFIGURATION['cselab-simcse-transductive'].label} | 1 |" in agreement
    assert "| -2.00 / -0.50 (step 5) |" in agreement  # 70 at step 5 against 72 at step 10; ranks (1,3,2) vs (2,1,3)
    header = [c.strip() for c in agreement.splitlines()[0].strip("|").split("|")]
    last = agreement.splitlines()[-2]  # the mean row
    teacher_cell = last.strip("|").split("|")[header.index("teacher agreement: regret / ρ")].strip()
    assert teacher_cell == "**+0.00 / 1.00**"  # teacher agreement peaks where the domain peaks
    assert "2 of 2" in agreement.splitlines()[-1]
    # a column for each criterion the curves hold (and the fixed budget), none for those no record observed
    observed = {"teacher_agreement", "stsb_dev", "infonce", "alignment", "uniformity", "fixed_budget"}
    assert header[5:] == [f"{c.label}: regret / ρ" for c in CRITERIA if c.key in observed]
    # lab.render writes the block into the document; the brief goals block where a document has it, demanded of none
    from lab.domain_study.study import brief_goals_table, domains_report, read_domain_records
    from lab.render import render

    results = tmp_path / "domains.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    makers = {"domains": lambda: domains_report(read_domain_records(results)),
              "domain-goals": lambda: brief_goals_table(read_domain_records(results))}
    doc = tmp_path / "adapt.md"
    doc.write_text("# x\n\n<!-- cselab:domains -->\nold\n<!-- /cselab:domains -->\n\nafter\n")
    text = render(tmp_path, [doc], makers)[doc][1]
    assert "old" not in text and f"| {mean:.2f} |" in text and text.endswith("after\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- cselab:domain-goals -->\nstale\n<!-- /cselab:domain-goals -->\nend\n")
    changed = render(tmp_path, [doc, readme], makers)
    assert "stale" not in changed[readme][1] and "<!-- cselab:domains -->" not in changed[readme][1]
    assert "vs untouched (goal" not in domains_report(read_domain_records(results))  # the full tables only
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"domain": "x"}) + "\n")
    with pytest.raises(CselabError, match="bad.jsonl:1.*configuration"):
        read_domain_records(bad)


@pytest.fixture
def study_home(long_bert_dir, tmp_path, monkeypatch):
    """A data home with the teacher fetched, a text of 240 lines, and the study's general sentences (900 lines of
    upper-case words, unlike the text); the plan of a configuration on them (``plan(spec)``)."""
    import argparse
    import shutil
    from types import SimpleNamespace

    home = tmp_path / "home"
    shutil.copytree(long_bert_dir, home / "models" / "all-mpnet-base-v2")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    rng = random.Random(0)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{' '.join(rng.choice(WORDS) for _ in range(8))} {i}\n" for i in range(240)))
    general = tmp_path / "general.txt"
    general.write_text("".join(f"{' '.join(rng.choice(WORDS).upper() for _ in range(6))} G{i}\n" for i in range(900)))
    args = argparse.Namespace(steps=None, batch_size=None, max_length=None)

    def plan(spec):  # as run_domains plans it: the general sentences for a configuration that trains on them
        return run_domains.configuration_plan(
            spec, text, tmp_path / "run", args, seed=1, model=str(long_bert_dir),
            teacher=str(home / "models" / "all-mpnet-base-v2"), general=general if spec.general else None,
            runtime=["train.threads=1", "train.device=cpu"])

    return SimpleNamespace(home=home, text=text, general=general, args=args, plan=plan)


def test_a_run_is_flagged_default_when_it_runs_the_defaults_settings(study_home):
    """The teacher named by its fetched name (cselab adapt's default) or given as its directory (the study) is one
    teacher, the study's general sentences stand for the fetched corpus; a setting that differs from the default's
    is no default run."""
    from dataclasses import replace

    config = CONFIGURATION[DEFAULT_CONFIGURATION]

    def flagged(*overrides: str, **options) -> bool:
        spec = replace(config, overrides=(*config.overrides, *overrides), **options)
        plan = study_home.plan(spec)
        answer = run_domains.is_default(plan, study_home.text, study_home.args)
        # run_one hands over the default it planned already (the study's general text, the default budget)
        planned = run_domains.default_plan(study_home.text, plan.output_dir, study_home.args, seed=1,
                                           model=plan.model, general=study_home.general)
        assert run_domains.is_default(plan, study_home.text, study_home.args, default=planned) == answer
        return answer

    assert flagged()
    other = study_home.plan(replace(config, overrides=(*config.overrides, "train.lr=3e-5")))
    assert not run_domains.is_default(study_home.plan(config), study_home.text, study_home.args, default=other)
    assert not flagged("train.lr=3e-5")
    selection = study_home.plan(config).selection
    assert not flagged(select="guarded-distillation-loss" if selection == "fixed-budget" else "fixed-budget")
    assert not flagged("model.max_length=128")
    assert not flagged(passages="similar")  # no config key differs, the plan does
    assert not flagged("train.batch_size=32")
    assert not flagged(mix=0.25)  # no config key differs, the plan does
    assert not flagged(steps=450)
    # the passages recipe with the general recipe's budget, general sentences and mix
    assert not flagged(adapt_recipe="vectors-passages", steps=200, mix=0.25)
    for key in ("cselab-distill-sim-nb3-guarded-mixed", "cselab-distill-sim-nb3-passages",
                "cselab-distill-pca-cos-general", "cselab-vectors-general", "cselab-distill-pcahead-cos-general",
                "cselab-vectors-and-head"):
        if key != DEFAULT_CONFIGURATION:
            assert not run_domains.is_default(study_home.plan(CONFIGURATION[key]), study_home.text,
                                              study_home.args), key


def test_the_recipes_table_by_hand():
    from lab.domain_study.study import recipes_table

    default = _record("bbc-news", DEFAULT_CONFIGURATION, 1, 84.5, 82.2, 500.0)
    default["default"] = True
    records = [
        _record("bbc-news", "checkpoint", 1, 86.0, 82.03, None),
        _record("bbc-news", "cselab-simcse", 1, 83.0, 82.0, 100.0),
        _record("bbc-news", "cselab-simcse", 2, 84.0, 82.0, 100.0),
        default,
        _record("brown-genres", "checkpoint", 1, 45.0, 82.03, None),
    ]
    lines = recipes_table(records).splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["configuration", "bbc-news (clustering)",
                                                                   "brown-genres (classification)",
                                                                   "suite: mean change, worst"]
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}
    assert rows[CONFIGURATION["checkpoint"].label] == ["86.00", "45.00", "-"]
    # the seed mean (83.0 + 84.0) / 2 = 83.5, 2.5 below the checkpoint; two seeds of 50 steps; not run on brown;
    # run on one suite domain of four, so no suite mean
    assert rows[CONFIGURATION["cselab-simcse"].label] == ["83.50 (-2.50); 2x50 steps", "-", "-"]
    assert rows[f"**{CONFIGURATION[DEFAULT_CONFIGURATION].label}** (the default)"] == [
        "84.50 (-1.50); 1x50 steps", "-", "-"]
    # on the four suite domains: changes -2.50 (bbc-news), +1.00 (stsb), +2.00 (tweets), +0.50 (linux-man) give a
    # mean of (-2.5 + 1 + 2 + 0.5) / 4 = +0.25 and the worst -2.50; brown-genres, outside the suite, is not in it
    suite = [*records,
             _record("stsb", "checkpoint", 1, 82.0, 82.0, None), _record("stsb", "cselab-simcse", 1, 83.0, 82.0, 1.0),
             _record("tweets", "checkpoint", 1, 68.0, 82.0, None),
             _record("tweets", "cselab-simcse", 1, 70.0, 82.0, 1.0),
             _record("linux-man", "checkpoint", 1, 78.0, 82.0, None),
             _record("linux-man", "cselab-simcse", 1, 78.5, 82.0, 1.0),
             _record("brown-genres", "cselab-simcse", 1, 10.0, 82.0, 1.0)]
    lines = recipes_table(suite).splitlines()
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}
    assert rows[CONFIGURATION["cselab-simcse"].label][-1] == "+0.25, worst -2.50 (bbc-news)"
    assert rows[CONFIGURATION["checkpoint"].label][-1] == "-"


def test_the_observer_watches_and_never_selects(sts_home, tiny_bert_dir, tmp_path):
    """A trainer with an observer keeps the same best step and the same weights as one without."""
    from cselab.config.run_config import RunConfig, validate
    from cselab.training.trainer import Trainer
    from tests.helpers import write_corpus

    corpus = write_corpus(tmp_path / "c.txt", n=64)
    seen = []

    def raw(out):
        return {"method": "simcse", "model": {"backbone": str(tiny_bert_dir), "pooler": "mean", "max_length": 16},
                "data": {"corpus": str(corpus)},
                "train": {"output_dir": str(out), "batch_size": 8, "max_steps": 5, "eval_every": 2, "seed": 3,
                          "precision": "fp32"}}

    plain = Trainer(validate(RunConfig, raw(tmp_path / "a")))
    plain_result = plain.run()
    watched = Trainer(validate(RunConfig, raw(tmp_path / "b")),
                      observer=lambda model, step: seen.append((step, model.encode(["a man"]).shape)) or
                      {"x": float(step)}, observe_every=3)
    watched_result = watched.run()
    assert [step for step, _ in seen] == [0, 3, 5]
    assert watched_result.best_step == plain_result.best_step
    for p, q in zip(plain.method.parameters(), watched.method.parameters(), strict=True):
        assert torch.equal(p, q)
    logged = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["observed"]) for r in logged if "observed" in r] == [(0, {"x": 0.0}), (3, {"x": 3.0}),
                                                                              (5, {"x": 5.0})]


def test_the_goals_by_task_take_each_domain_s_task_recipe_by_hand():
    """--task search runs the teacher adapted first, --task clustering the default: each domain's row holds the runs
    of its task's recipe, and a domain kept outside the suite says so."""
    from lab.domain_study.study import ADAPTED_TEACHER_STUDENT, DEFAULT_CONFIGURATION, brief_goals_table

    records = [
        _record("linux-man", "checkpoint", 1, 78.39, 82.03, None),
        _record("linux-man", "mpnet", 1, 83.11, 83.42, None),
        _record("linux-man", DEFAULT_CONFIGURATION, 1, 78.90, 82.10, 10.0),
        _record("linux-man", ADAPTED_TEACHER_STUDENT, 1, 81.00, 82.00, 10.0),
        _record("linux-man", ADAPTED_TEACHER_STUDENT, 2, 81.40, 82.20, 10.0),
        _record("bbc-news", "checkpoint", 1, 86.88, 82.03, None),
        _record("bbc-news", DEFAULT_CONFIGURATION, 1, 88.00, 82.10, 10.0),
        _record("bbc-news", ADAPTED_TEACHER_STUDENT, 1, 87.00, 82.10, 10.0),
        _record("linux-man-overviews", "checkpoint", 1, 90.72, 82.03, None),
        _record("linux-man-overviews", ADAPTED_TEACHER_STUDENT, 1, 89.72, 82.21, 10.0),
    ]
    brief = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in
                                           brief_goals_table(records, by_task=True).splitlines()[2:])}
    # search: the adapted teacher's student, mean (81.00 + 81.40) / 2 = 81.20, +2.81 over 78.39; its lowest seed
    # +2.61; 2.81 / 4.72 = 0.60 of the teacher's lead
    assert brief["linux-man (retrieval, nDCG@10)"][3:7] == [
        "`--task search` (the teacher adapted first): 81.20", "1, 2", "**+2.81**; +2.61", "**+0.60**"]
    # clustering: the default's run, 88.00 - 86.88 = +1.12
    assert brief["bbc-news (clustering, V-measure)"][3:6] == ["`--task clustering`: 88.00", "1", "**+1.12**; +1.12"]
    # outside the suite: named so; 89.72 - 90.72 = -1.00, missed by 2.00
    outside = brief["linux-man-overviews (retrieval, nDCG@10), kept outside the suite"]
    assert outside[5] == "-1.00, missed by 2.00; -1.00"


def test_the_goals_table_by_hand():
    from lab.domain_study.study import brief_goals_table, goals_table, peers_table

    records = [
        _record("linux-man", "checkpoint", 1, 78.39, 82.03, None),
        _record("linux-man", "mpnet", 1, 83.11, 83.42, None),
        _record("linux-man", "st-mnrl", 1, 77.62, 82.79, 10.0),
        _record("linux-man", "st-ct", 1, 80.00, 82.00, 10.0),
        _record("linux-man", "cselab-simcse", 1, 81.00, 81.50, 10.0),
        _record("linux-man", "cselab-simcse", 2, 81.66, 81.90, 10.0),
        _record("tweets", "cselab-simcse", 1, 70.0, 82.0, 10.0),  # nothing to compare with
        _record("linux-man", "cselab-simcse-transductive", 1, 82.00, 82.0, 10.0),
    ]
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in goals_table(records, "cselab-simcse").splitlines()[2:])}
    assert set(rows) == {"linux-man", "tweets"}
    cells = rows["linux-man"]
    # mean 81.33; 81.33 - 78.39 = 2.94 >= 1.0; the lowest seed 81.00 - 78.39 = 2.61 >= 0; the teacher's lead
    # 83.11 - 78.39 = 4.72, of which 2.94 / 4.72 = 0.62 >= 0.5 is recovered; best peer st-ct 80.00: +1.33 >= 0.5;
    # STS-B's lowest seed 81.50 - 82.03 = -0.53 < -0.3, missed by 0.23
    assert cells[:3] == ["linux-man", "2 (1, 2)", "81.33"]
    assert cells[3] == "+2.94 (met)"
    assert cells[4] == "+2.61 (met)"
    assert cells[5] == "+0.62 (met) (all-mpnet-base-v2 83.11)"
    assert cells[6] == "+1.33 (met) (st-ct 80.00)"
    assert cells[7] == "81.50: -0.53 (missed by 0.23)"
    assert cells[8] == "+3.61 (82.00, 1 seed)"  # 82.00 - 78.39, held to no goal
    assert rows["tweets"][3:] == ["-", "-", "-", "-", "82.00", "-"]
    assert goals_table(records, "cselab-adapt") == "_No `cselab-adapt` run recorded yet._"
    # the user's guide's view of the same margins, bold where met
    brief = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                           for line in brief_goals_table(records, "cselab-simcse").splitlines()[2:])}
    assert brief["linux-man (retrieval, nDCG@10)"] == [
        "linux-man (retrieval, nDCG@10)", "78.39", "83.11", "81.33", "1, 2", "**+2.94**; +2.61", "**+0.62**",
        "**+1.33** (`st-ct`)", "81.50: -0.53, missed by 0.23"]
    assert brief["tweets (classification, accuracy)"][1:] == ["-", "-", "70.00", "1", "-", "-", "-", "82.00"]
    assert brief_goals_table(records, "cselab-adapt") == "_No `cselab-adapt` run recorded yet._"
    # without a configuration named, the tables hold the declared default's runs (a record's "default" flag says
    # what the default was when it ran, not what it is)
    from lab.domain_study.study import DEFAULT_CONFIGURATION

    declared = [*records, {**_record("linux-man", DEFAULT_CONFIGURATION, 1, 82.0, 82.1, 10.0), "default": True},
                {**_record("linux-man", "cselab-distill-pca-cos", 1, 79.0, 82.1, 10.0), "default": True}]
    assert "82.00" in goals_table(declared).splitlines()[2] and "79.00" not in goals_table(declared)
    # the recipes side by side: differences to the checkpoint (78.39), the row's best bold; tweets has no checkpoint
    peers = peers_table(records).splitlines()
    assert len(peers) == 3
    assert [c.strip() for c in peers[2].strip("|").split("|")] == [
        "linux-man", "not run", "+1.61 (82.00), 1 seed", "-0.77 (82.79), 1 seed", "not run",
        "**+2.94** (81.70), 2 seeds"]
    # a recipe that beats the default gets the bold; three seeds need no note
    stsb = [_record("stsb", "checkpoint", 1, 82.03, 82.03, None),
            *(_record("stsb", "st-tsdae", seed, 85.0 + seed, 80.0, 10.0) for seed in (1, 2, 3)),
            _record("stsb", "cselab-simcse", 1, 83.03, 83.0, 10.0)]
    assert [c.strip() for c in peers_table(stsb).splitlines()[2].strip("|").split("|")] == [
        "stsb", "**+4.97** (80.00)", "not run", "not run", "not run", "+1.00 (83.00), 1 seed"]  # 87.00 - 82.03


def test_time_adapt_records_the_whole_command_and_its_scores(tmp_path, monkeypatch):
    """lab/domain_study/time_adapt.py runs `cselab adapt` as a user would and records the command's time beside
    adapt.json's; the recorded scores are those of the untouched and the saved model, scored again here."""
    pytest.importorskip("mteb")
    from cselab.evaluation.domain import evaluate_domain
    from cselab.models.sentence_model import load_model

    home = write_domain_home(tmp_path / "home")
    student = build_tiny_model_dir(tmp_path / "student", "bert", seed=0)
    monkeypatch.setenv("CSELAB_HOME", str(home))
    results, out = tmp_path / "time.jsonl", tmp_path / "run"
    real_run, envs = time_adapt.subprocess.run, []

    def recorded_run(command, **kwargs):
        envs.append(kwargs.get("env"))
        return real_run(command, **kwargs)

    monkeypatch.setattr(time_adapt.subprocess, "run", recorded_run)
    time_adapt.main(["--domain", "bbc-news", "--model", str(student), "--max-sentences", "200",
                                "--steps", "2", "--threads", "1", "--output", str(out), "--results", str(results)])
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    # 200 sentences: 5% held out, but at least 20; of the 180 others, the 2 steps of SimCSE's 64 train on 128
    assert (record["sentences"], record["held_out"], record["text_train_sentences"], record["steps"]) == (
        200, 20, 180, 2)
    assert record["train_sentences"] == 2 * 64
    assert record["command_s"] >= record["adapt_wall_s"] >= record["train_s"] > 0
    assert record["estimate_s"] is not None and record["threads"] == 1
    # the command as a user types it; the threads are the environment's (OMP_NUM_THREADS), as a user sets them
    assert (record["adapt_command"].startswith("-m cselab.cli adapt ") and "threads" not in record["adapt_command"]
            and record["command"].startswith("python -m lab.domain_study.time_adapt"))
    assert len(envs) == 1 and envs[0]["OMP_NUM_THREADS"] == "1"
    assert record["before"] == evaluate_domain(load_model(student, pooler="mean"), domain="bbc-news")
    assert record["after"] == evaluate_domain(load_model(out / "model"), domain="bbc-news")  # the model handed back
    assert (record["teacher"], record["teacher_s"], record["teacher_passes_made"]) == (None, 0.0, 0)


def test_time_adapt_passes_the_task_and_the_recipe_on_to_the_command():
    """--task (similarity and search adapt the teacher first) and --recipe reach `cselab adapt` as given, and only
    when given."""
    args = time_adapt.parse_args(["--domain", "stsb", "--max-sentences", "10000", "--task", "search", "--recipe",
                                  "mine.yaml"])
    command = time_adapt.adapt_command(args, Path("train.txt"))
    assert command[command.index("adapt"):] == ["adapt", "train.txt", "--output", str(args.output), "--seed", "1",
                                                "--domain", "stsb", "--max-sentences", "10000", "--task", "search",
                                                "--recipe", "mine.yaml"]
    plain = time_adapt.adapt_command(time_adapt.parse_args(["--domain", "stsb"]), Path("train.txt"))
    assert "--task" not in plain and "--recipe" not in plain


def test_time_adapt_records_the_teacher_pass_and_whether_the_cache_held_it(tmp_path, monkeypatch):
    """With a teacher, the record carries the teacher pass's seconds (adapt.json's) and how many passes the command
    added to the data home's cache: some in an empty home, none when the same command runs again."""
    pytest.importorskip("mteb")
    home = write_domain_home(tmp_path / "home")
    (home / "corpus").mkdir()
    (home / "corpus" / "default.txt").write_text("".join(f"a general sentence number {i}.\n" for i in range(300)))
    student = build_tiny_model_dir(tmp_path / "student", "bert", seed=0)
    teacher = build_tiny_model_dir(tmp_path / "teacher", "bert", seed=7)
    monkeypatch.setenv("CSELAB_HOME", str(home))
    results, out = tmp_path / "time.jsonl", tmp_path / "run"
    # the default recipe at 64 tokens in batches of 8 (tiny models: 128 positions; the recipe: 256 tokens)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(recipe_with(max_length=64, batch_size=8).model_dump(mode="json", by_alias=True)))
    argv = ["--domain", "bbc-news", "--model", str(student), "--teacher", str(teacher), "--max-sentences", "200",
            "--steps", "2", "--threads", "1", "--output", str(out), "--results", str(results), "--recipe", str(recipe)]
    time_adapt.main(argv)
    adapt_json = json.loads((out / "adapt.json").read_text())
    time_adapt.main(argv)  # the output directory is replaced; the home's cache is not
    first, again = [json.loads(line) for line in results.read_text().splitlines()]
    assert first["teacher_s"] == adapt_json["teacher_s"] > 0 and again["teacher_s"] > 0
    assert first["teacher_passes_made"] == len(list((home / "teacher-vectors").iterdir())) > 0
    assert again["teacher_passes_made"] == 0


def test_score_suite_scores_the_study_models_as_the_study_did(study, tmp_path, monkeypatch, capsys):
    """lab/domain_study/score_suite.py finds a study run's saved model (cselab's `best`, a peer's `model`) and scores
    it as the study scored it: the same main score as the study's own record; a second call skips recorded models."""
    monkeypatch.setenv("CSELAB_HOME", str(study["home"]))
    script = score_suite
    results = tmp_path / "suite.jsonl"
    argv = ["--domain-run", "bbc-news/cselab-simcse-s1", "--domain-run", "bbc-news/st-ct-s1", "--domains", "bbc-news",
            "--eval-max-length", "24", "--domain-runs", str(study["root"] / "runs"), "--results", str(results)]
    script.main(argv)
    first = results.read_text()
    script.main(argv)
    assert results.read_text() == first
    records = [json.loads(line) for line in first.splitlines()]
    by_config = {r["configuration"]: r for r in study["records"]}
    assert [r["origin"]["configuration"] for r in records] == ["cselab-simcse", "st-ct"]
    for r in records:
        assert r["scores"] == {"bbc-news": by_config[r["origin"]["configuration"]]["main_score"]}
        assert r["tasks"] == {"bbc-news": "clustering"} and {"git", "machine"} <= set(r["provenance"])
    # the fixture's texts fit in 24 tokens, so the records above cannot tell whether --eval-max-length is used;
    # at 4 tokens every text is cut, and the score must be that of the model loaded at 4 tokens
    from cselab.evaluation.domain import evaluate_domain
    from cselab.models.sentence_model import load_model

    short = tmp_path / "short.jsonl"
    script.main([*argv[:2], "--domains", "bbc-news", "--eval-max-length", "4", "--domain-runs",
                 str(study["root"] / "runs"), "--results", str(short)])
    (cut,) = [json.loads(line) for line in short.read_text().splitlines()]
    best = study["root"] / "runs" / "bbc-news" / "cselab-simcse-s1" / "best"
    expected = evaluate_domain(load_model(best, max_length=4), domain="bbc-news")
    assert cut["scores"] == {"bbc-news": expected["clustering"]}
    assert cut["scores"] != records[0]["scores"]
    with pytest.raises(SystemExit, match="expected DOMAIN/CONFIGURATION-sSEED"):
        script.main(["--domain-run", "bbc-news/cselab-simcse", "--results", str(results)])
    with pytest.raises(SystemExit, match="unknown news"):
        script.main(["--domains", "news", "--results", str(results)])
    with pytest.raises(SystemExit, match="no model at"):
        script.main(["--domain-run", "bbc-news/st-mnrl-s9", "--domain-runs", str(study["root"] / "runs"),
                     "--results", str(tmp_path / "other.jsonl")])


def test_score_suite_records_what_a_model_directory_says_it_is(study, tmp_path, monkeypatch):
    """`--model NAME=PATH` records the directory's cselab.json (an ensemble's weights and combine mode, a trained
    model's config) as read from the file; a directory without one (a sentence-transformers save) records the path."""
    monkeypatch.setenv("CSELAB_HOME", str(study["home"]))
    runs = study["root"] / "runs" / "bbc-news"
    best, peer = runs / "cselab-simcse-s1" / "best", runs / "st-ct-s1" / "model"
    results = tmp_path / "suite.jsonl"
    score_suite.main(["--model", f"ours={best}", "--model", f"peer={peer}", "--domains", "bbc-news",
                      "--eval-max-length", "24", "--results", str(results)])
    ours, theirs = [json.loads(line) for line in results.read_text().splitlines()]
    assert ours["origin"] == {"kind": "path", "description": json.loads((best / "cselab.json").read_text())}
    assert theirs["origin"] == {"kind": "path"} and not (peer / "cselab.json").exists()


def test_selected_model_prints_the_run_directorys_selected_model(tmp_path, capsys):
    """The study's shell scripts (soup.sh, teacher_student_ensemble.sh) ask this module where a run keeps its model."""
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "best").mkdir(parents=True)
    (two / "stage2" / "best").mkdir(parents=True)
    selected_model.main([str(one)])
    selected_model.main([str(two)])
    assert capsys.readouterr().out.splitlines() == [str(one / "best"), str(two / "stage2" / "best")]
    with pytest.raises(SystemExit, match="usage"):
        selected_model.main([])


def test_score_suite_finds_a_two_stage_rows_model(tmp_path):
    """A TNCSE/JTCSE protocol row keeps its selected model under stage2/best, a one-stage row under best."""
    from cselab.training.run_directory import selected_model_dir

    script = score_suite
    one, two = tmp_path / "simcse-indomain", tmp_path / "tncse-indomain"
    (one / "best").mkdir(parents=True)
    (two / "stage1" / "encoder_1" / "best").mkdir(parents=True)
    (two / "stage2" / "best").mkdir(parents=True)
    assert selected_model_dir(one) == one / "best"
    assert selected_model_dir(two) == two / "stage2" / "best"
    (two / "stage2" / "results.json").write_text(json.dumps({"config": {"effective": {"data": {
        "corpus": "stsb-train-minus-all-eval"}}}}))
    name, path, origin = script.protocol_model("tncse-indomain", tmp_path, print)
    assert (name, path, origin) == ("protocol/tncse-indomain", two / "stage2" / "best",
                                    {"kind": "protocol-row", "row": "tncse-indomain",
                                     "corpus": "stsb-train-minus-all-eval"})


def test_score_suite_table_by_hand():
    """The table's differences from the checkpoint and the mean over the domains a model was not trained on."""
    script = score_suite
    checkpoint = {"stsb": 82.0, "bbc-news": 86.0, "tweets": 68.0, "linux-man": 78.0}
    records = [
        {"model": "bbc-news/cselab-simcse-s1", "origin": {"kind": "domain-run", "domain": "bbc-news"},
         "scores": {"stsb": 83.0, "bbc-news": 84.0, "tweets": 67.0, "linux-man": 79.5}},
        {"model": "protocol/simcse", "origin": {"kind": "protocol-row", "row": "simcse"},
         "scores": {"stsb": 82.5, "bbc-news": 85.0, "tweets": 68.5, "linux-man": 78.0}},
        {"model": "protocol/ifcl", "origin": {"kind": "protocol-row", "row": "ifcl", "corpus": "parallel-de"},
         "scores": {"stsb": 82.5}},
    ]
    table = script.render_table(records, checkpoint).splitlines()
    assert table[2] == "| all-MiniLM-L6-v2 untouched (mean pooling) | - | 82.00 | 86.00 | 68.00 | 78.00 | - |"
    # bbc-news is its own domain (marked, left out of the mean): (+1.0 - 1.0 + 1.5) / 3 = +0.50
    assert table[3] == ("| bbc-news/cselab-simcse-s1 | bbc-news | 83.00 (+1.00) | 84.00* (-2.00) | 67.00 (-1.00) "
                        "| 79.50 (+1.50) | +0.50 (3) |")
    # the protocol trained on STS-B's text: stsb is its own; (-1.0 + 0.5 + 0.0) / 3 = -0.17
    assert table[4].endswith("| 82.50* (+0.50) | 85.00 (-1.00) | 68.50 (+0.50) | 78.00 (+0.00) | -0.17 (3) |")
    assert table[4].startswith("| protocol/simcse | STS-B train text, selected on STS-B dev |")
    assert table[5].startswith("| protocol/ifcl | English-German parallel text, selected on STS-B dev |")


def test_the_suite_table_is_rendered_into_its_doc_block(tmp_path):
    from lab.render import render, table_makers

    study = tmp_path / "domains.jsonl"
    study.write_text("".join(json.dumps({"domain": "tweets", "configuration": c, "seed": 1, "main_score": v,
                                         "stsb_test": 80.0, "wall_s": None}) + "\n"
                             for c, v in (("checkpoint", 68.0), ("mpnet", 71.0))))
    results = tmp_path / "suite.jsonl"
    results.write_text(json.dumps({"model": "m", "origin": {"kind": "path"}, "scores": {"tweets": 69.25}}) + "\n")
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- cselab:suite -->\nold\n<!-- /cselab:suite -->\nafter\n")
    text = render(tmp_path, [doc], {"suite": table_makers(tmp_path)["suite"]})[doc][1]
    assert "old" not in text and text.startswith("before\n") and text.endswith("after\n")
    assert "| m | - | 69.25 (+1.25) | +1.25 (1) |" in text
    assert "| all-mpnet-base-v2 untouched (5x larger) | - | 71.00 (+3.00) | +3.00 (1) |" in text


def test_run_domains_trains_on_another_text_when_given(study, tmp_path, monkeypatch):
    text = tmp_path / "documents.txt"
    documents = [f"document {i} " + " ".join(WORDS[(i + j) % 20] for j in range(12)) for i in range(240)]
    text.write_text("".join(f"{d}\n" for d in documents))
    results = tmp_path / "domains.jsonl"
    argv = ["--domains", "bbc-news", "--configurations", "cselab-simcse", "--steps", "2", "--budget-note", "a test",
            "--batch-size", "8", "--max-length", "16", "--eval-max-length", "24", "--model", str(study["student"]),
            "--teacher", str(study["teacher"]), "--results", str(results), "--runs", str(tmp_path / "runs"), "--quiet",
            "--text", str(text)]
    monkeypatch.setenv("CSELAB_HOME", str(study["home"]))
    script = run_domains
    script.main(argv)
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    held = 20  # 5% of 240 is 12, below the least held out (20)
    assert record["training_text"] == {"file": str(text), "sentences": 240, "trained_on": 240 - held,
                                       "held_out": held}
    trained = (tmp_path / "runs" / "bbc-news" / "cselab-simcse-s1" / "train.txt").read_text().splitlines()
    assert len(trained) == 240 - held and set(trained) <= set(documents)
    with pytest.raises(SystemExit, match="not checkpoint"):
        script.main([*argv[:3], "checkpoint", *argv[4:]])


def test_a_general_configuration_needs_the_general_text_and_records_it(study, tmp_path, monkeypatch):
    import hashlib

    runs = tmp_path / "runs"
    results = tmp_path / "domains.jsonl"
    argv = ["--domains", "bbc-news", "--configurations", "cselab-distill-pca-cos-general", "--steps", "2",
            "--budget-note", "a test", "--max-length", "16", "--eval-max-length", "24", "--observe-every", "0",
            "--model", str(study["student"]), "--teacher", str(study["teacher"]), "--results", str(results),
            "--runs", str(runs), "--quiet"]
    monkeypatch.setenv("CSELAB_HOME", str(study["home"]))
    with pytest.raises(SystemExit, match="trains on the study's general text, .*general.txt: build it first"):
        run_domains.main(argv)
    assert not results.exists()
    general = runs / "general.txt"
    general.parent.mkdir(parents=True)
    general.write_text("".join(f"General sentence number {i} about {WORDS[i % 20]} and more.\n" for i in range(500)))
    run_domains.main(argv)
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    trained = (runs / "bbc-news" / "cselab-distill-pca-cos-general-s1" / "train.txt").read_text().splitlines()
    drawn = [t for t in trained if t.startswith("General sentence number")]
    # as many general sentences as the domain's passages, after them
    assert len(drawn) == len(trained) // 2 and trained[len(trained) // 2:] == drawn
    assert record["general_text"] == {"file": str(general), "sentences": len(drawn),
                                      "sha256": hashlib.sha256(general.read_bytes()).hexdigest()}


def test_bbc_train_articles_leaves_out_test_items_and_copies(tmp_path):
    script = bbc_train_articles
    articles = ["Rates rise  again. Banks react.", "rates rise again. banks react.", "A test article here.",
                "Another\tarticle stays."]
    source = tmp_path / "bbc-news.jsonl"
    source.write_text("".join(json.dumps({"text": a, "label": "x"}) + "\n" for a in articles))
    labels = tmp_path / "labels.tsv"
    labels.write_text("A TEST article here.\tbusiness\n"
                      + "".join(f"other test item {i}\t{'business' if i < 4 else 'sport'}\n" for i in range(9)))
    # the second is the first with other case and spacing; the third is a test item (other case)
    assert script.train_articles(source, labels) == ["Rates rise again. Banks react.", "Another article stays."]


def test_a_screen_changes_only_the_overrides_it_names():
    from lab.domain_study.study import _changed

    base = ("a.x=1", "b=two", "c.d=3")
    assert _changed(base, "b=2") == ("a.x=1", "b=2", "c.d=3")
    assert _changed(base, "c.d=4", "a.x=0") == ("a.x=0", "b=two", "c.d=4")
    with pytest.raises(ValueError):
        _changed(base, "e=1")


def test_the_comparison_keeps_the_chosen_seeds_and_the_checkpoint(tmp_path, capsys):
    from lab.domain_study import compare

    records = [_record("bbc-news", "checkpoint", 1, 86.0, 82.03, None),
               _record("bbc-news", "cselab-simcse", 1, 83.0, 82.0, 100.0),
               _record("bbc-news", "cselab-simcse", 2, 84.0, 82.0, 100.0),
               _record("bbc-news", "cselab-simcse", 3, 90.0, 82.0, 100.0),
               _record("bbc-news", "st-ct", 1, 79.0, 81.0, 90.0)]
    chosen = compare.chosen_records(records, ["cselab-simcse"], [1, 2])
    assert [(r["configuration"], r["seed"]) for r in chosen] == [
        ("checkpoint", 1), ("cselab-simcse", 1), ("cselab-simcse", 2)]
    (tmp_path / "domains.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "domains_check.jsonl").write_text("")
    compare.main(["--results", str(tmp_path), "--seeds", "1,2", "--configurations", "cselab-simcse"])
    rows = capsys.readouterr().out.splitlines()[2:]
    # seeds 1 and 2 only: (83 + 84) / 2 = 83.5, 2.5 below the checkpoint; seed 3's 90 is left out
    assert [c.strip() for c in rows[1].strip("|").split("|")][1] == "83.50 (-2.50); 2x50 steps"
    assert len(rows) == 2
    # cselab-simcse is the former default; the records' own default (not among those shown) is, so none is marked
    (tmp_path / "domains_check.jsonl").write_text(json.dumps(_record("bbc-news", DEFAULT_CONFIGURATION, 1, 88.0, 82.0,
                                                                     10.0)) + "\n")
    compare.main(["--results", str(tmp_path), "--configurations", "cselab-simcse"])
    assert "(the default)" not in capsys.readouterr().out
    (tmp_path / "domains_check.jsonl").write_text("")
    with pytest.raises(SystemExit):
        compare.main(["--results", str(tmp_path), "--configurations", "nothing-such"])
    assert "no record of nothing-such" in capsys.readouterr().err
    # a screen's file read beside the suite's: its seeds averaged against the suite's checkpoint, (80 + 81) / 2
    screen = tmp_path / "screen.jsonl"
    screen.write_text("".join(json.dumps(_record("bbc-news", "st-tsdae", seed, 80.0 + seed - 1, 81.0, 10.0)) + "\n"
                              for seed in (1, 2)))
    compare.main(["--results", str(tmp_path), "--also", str(screen), "--configurations", "st-tsdae"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [c.strip() for c in rows[1].strip("|").split("|")][1] == "80.50 (-5.50); 2x50 steps"


def test_the_comparison_per_seed(tmp_path, capsys):
    from lab.domain_study import compare

    records = [_record("bbc-news", "checkpoint", 1, 86.0, 82.03, None),
               _record("bbc-news", "cselab-simcse", 2, 84.0, 81.5, 100.0),
               _record("bbc-news", "cselab-simcse", 1, 83.0, 82.25, 100.0),
               _record("bbc-news", "st-ct", 1, 79.0, 81.0, 90.0)]
    (tmp_path / "domains.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "domains_check.jsonl").write_text("")
    compare.main(["--results", str(tmp_path), "--per-seed", "--configurations", "cselab-simcse"])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()[2:]]
    # one row a seed, in seed order, each against the checkpoint's 86.0, with its own STS-B test score
    assert [row[:5] for row in rows] == [["bbc-news", "cselab-simcse", "1", "83.00 (-3.00)", "82.25"],
                                         ["bbc-news", "cselab-simcse", "2", "84.00 (-2.00)", "81.50"]]


def test_the_mean_of_recorded_kmeans_means(tmp_path, capsys):
    from lab.domain_study import clustering_seeds

    path = tmp_path / "clustering_seeds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (
        {"domain": "bbc-news", "model": "a", "mean": 80.0}, {"domain": "bbc-news", "model": "b", "mean": 84.0},
        {"domain": "bbc-news", "model": "a", "mean": 82.0}, {"domain": "tweets", "model": "b", "mean": 10.0})))
    # the latest record of a (82.0) and b's bbc-news record (84.0): (82 + 84) / 2 = 83.0
    clustering_seeds.main(["--domain", "bbc-news", "--mean-of", "a,b", "--results", str(path)])
    assert capsys.readouterr().out.strip().endswith(": 83.00")
    with pytest.raises(SystemExit):
        clustering_seeds.main(["--domain", "tweets", "--mean-of", "a", "--results", str(path)])
    assert "no tweets record of a" in capsys.readouterr().err


def test_an_observed_curve_prints_each_step_and_the_kept_steps_change(tmp_path, capsys):
    from lab.domain_study import curves

    record = {**_record("bbc-news", "cselab-simcse", 2, 84.0, 82.0, 100.0), "best_step": 20, "curve": [
        {"step": 0, "domain": 86.0, "overlap": 0.5},
        {"step": 10, "domain": 85.0, "overlap": 0.75},
        {"step": 20, "domain": 84.0, "overlap": 0.625},
        {"step": 10, "domain": 83.0, "overlap": 0.25}]}  # step 10 observed again by a resumed run: the last wins
    path = tmp_path / "observed.jsonl"
    path.write_text(json.dumps(record) + "\n")
    curves.main(["--results", str(path), "--keys", "domain,overlap"])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()
            if line.startswith("|")]
    assert rows[0] == ["value", "0", "10", "20", "kept (20) - step 0"]
    assert rows[2] == ["domain", "86", "83", "84", "-2"]
    assert rows[3] == ["overlap", "0.5", "0.25", "0.625", "+0.125"]
    with pytest.raises(SystemExit):
        curves.main(["--results", str(path), "--keys", "nothing"])
    assert "observed no nothing" in capsys.readouterr().err


def test_run_trace_records_the_logged_selection_and_each_loss_terms_first_and_last_value(tmp_path):
    from lab.domain_study import run_trace

    run = tmp_path / "runs" / "tweets" / "cselab-x-s2"
    run.mkdir(parents=True)
    logged = [{"step": 0, "dev": -1.0, "best_dev": -1.0},
              {"step": 10, "lr": 1e-4, "sent_per_s": 8.0, "loss": 0.5, "a_term": 0.1, "b_term": 0.4},
              {"step": 20, "lr": 9e-5, "sent_per_s": 8.5, "loss": 0.3, "a_term": 0.05, "b_term": 0.25},
              {"step": 20, "dev": -2.123456, "best_dev": -1.0},
              {"step": 20, "dev": -2.2, "best_dev": -1.0},  # a resumed run logs the step again: its last value
              {"step": 30, "lr": 8e-5, "sent_per_s": 8.1, "loss": 0.2, "a_term": 0.04, "b_term": 0.16}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))
    out = tmp_path / "traces.jsonl"
    run_trace.main([str(run), "--results", str(out)])
    record = json.loads(out.read_text())
    assert (record["domain"], record["configuration"], record["seed"]) == ("tweets", "cselab-x", 2)
    assert record["selection_logged"] == [[0, -1.0], [20, -2.2]]
    assert record["loss_terms"] == {
        "loss": {"first_step": 10, "first": 0.5, "last_step": 30, "last": 0.2},
        "a_term": {"first_step": 10, "first": 0.1, "last_step": 30, "last": 0.04},
        "b_term": {"first_step": 10, "first": 0.4, "last_step": 30, "last": 0.16}}
    with pytest.raises(SystemExit):
        run_trace.main([str(tmp_path), "--results", str(out)])
    assert len(out.read_text().splitlines()) == 1  # a refused command appends nothing


@pytest.mark.parametrize(("recipe", "configuration", "steps"), [("vectors", "cselab-distill-pca-cos-lines", 448),
                                                                 ("vectors-passages", "cselab-distill-pca-cos", 100)])
def test_cselab_adapts_vector_recipes_are_the_configurations_the_study_measured(recipe, configuration, steps,
                                                                                 long_bert_dir, tmp_path):
    """``cselab adapt --recipe lab/recipes/NAME.yaml`` plans the run the study recorded as CONFIGURATION (its recipe
    with its arms, as run_domains plans it): the same effective configuration, units, length and selection (on a
    text long enough for the budget the study ran)."""
    from cselab.adaptation import plan_adapt
    from cselab.config.run_config import flatten_config
    from lab.domain_study.recipes import configuration_recipe
    from lab.domain_study.study import CONFIGURATION
    from tests.helpers import build_tiny_model_dir

    student = long_bert_dir  # the recipes' passages are 256 tokens
    teacher = build_tiny_model_dir(tmp_path / "teacher", "bert", seed=7, hidden_size=48)
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "\n"
                            for _ in range(30_000)))
    spec = CONFIGURATION[configuration]
    studied = plan_adapt(text, tmp_path / "a", model=str(student), teacher=str(teacher), steps=spec.steps,
                         recipe=configuration_recipe(spec))
    named = plan_adapt(text, tmp_path / "a", model=str(student), teacher=str(teacher),
                       recipe=LAB_RECIPES / f"{recipe}.yaml")
    assert named.steps == studied.steps == steps
    assert (named.units, named.selection, named.passages) == (studied.units, studied.selection, studied.passages)
    assert flatten_config(named.config.model_dump(mode="json")) == flatten_config(
        studied.config.model_dump(mode="json"))


def test_a_run_cut_short_is_resumed_only_when_it_is_the_same_adaptation(study_home):
    from cselab.adaptation.plan import ADAPT_FILE, PLAN_FILE
    from cselab.training.run_directory import RUN_MARKER

    plan = study_home.plan(CONFIGURATION["cselab-distill-pca-cos-general"])
    run_dir = plan.output_dir
    assert not run_domains.resumable(plan)  # nothing there
    run_dir.mkdir()
    (run_dir / "teacher-passages").mkdir()
    assert not run_domains.resumable(plan)  # files cselab did not write
    (run_dir / RUN_MARKER).write_text("a cselab run directory\n")
    assert not run_domains.resumable(plan)  # a cselab run, not an adaptation
    facts = plan.facts()
    (run_dir / PLAN_FILE).write_text(json.dumps({**facts, "steps": 100}))
    assert not run_domains.resumable(plan)  # another adaptation
    (run_dir / PLAN_FILE).write_text(json.dumps(facts))
    assert run_domains.resumable(plan)  # this one, cut short
    (run_dir / ADAPT_FILE).write_text("{}")
    assert run_domains.resumable(plan)  # this one, finished but not recorded


@pytest.mark.parametrize("derivation", DERIVED, ids=lambda d: d.key)
def test_each_default_configuration_plans_what_its_derived_records_were_trained_as(study_home, derivation):
    """A default's configuration (cselab-vectors-and-head-mix075; cselab-vectors-and-head and cselab-vectors-general
    before it) and the configuration whose runs, mixed at the default's weight, are its derived records plan the same
    training; only the mix differs."""
    default = study_home.plan(CONFIGURATION[derivation.key])
    source = study_home.plan(CONFIGURATION[derivation.source])
    paths = {"train": {"output_dir"}, "data": {"corpus"}, "method_options": {"teacher_vectors"}}
    assert default.config.model_dump(exclude=paths) == source.config.model_dump(exclude=paths)
    assert (default.train_units, default.general_units, default.held_out) == (
        source.train_units, source.general_units, source.held_out)
    assert len(default.general_units) == len(default.text_units) > 0 and default.steps == 200
    assert set(default.general_units) <= set(study_home.general.read_text().splitlines())
    assert (default.mix, source.mix) == (derivation.mix, 1.0)


def test_the_default_configuration_is_the_last_default_derivation():
    assert DEFAULTS[-1].key == DEFAULT_CONFIGURATION
    assert [d.key for d in DERIVED].count(DEFAULT_CONFIGURATION) == 1
    assert [d.first for d in DERIVED] == [None, None, None, "mpnet-simcse"]


@pytest.mark.parametrize(("configuration", "override", "mix"), [
    ("cselab-distill-head-cos-general", "method_options.projection=linear-head", 0.5),
    ("cselab-distill-pcahead-cos-general", "method_options.projection=pca-rotation+linear-head", 0.5),
    ("cselab-distill-pca-mse-general", "method_options.vector_loss=mse", 0.5),
    ("cselab-distill-pca-cos-general-bf16", "train.precision=bf16", 0.25),
])
def test_a_variant_as_a_user_spells_it_plans_the_studys_configuration(study_home, configuration, override, mix):
    """`cselab adapt TEXT --recipe FILE`, FILE vectors-general's recipe with the mix M and the one option changed (as
    lab/books/adapt_results.md gives the variants), trains what the study ran as the variant's configuration:
    vectors-general's training with that one option changed."""
    from cselab.adaptation import plan_adapt
    from cselab.adaptation.recipe import load_recipe

    study = study_home.plan(CONFIGURATION[configuration])
    option, _, value = override.partition("=")
    section, key = option.split(".")
    base = LAB_RECIPES / "vectors-general.yaml"
    # a method's option in the recipe's method_options, any other run-configuration key in its overrides
    changed_field = {"method_options": {**load_recipe(base).method_options, key: value}} \
        if section == "method_options" else {"overrides": (override, "train.threads=1")}
    recipe = recipe_with(base, general_file=str(study_home.general), mix=mix,
                         **{"overrides": ("train.threads=1",), **changed_field})
    spelled = plan_adapt(study_home.text, study.output_dir, model=study.model, teacher=study.teacher, seed=1,
                         recipe=recipe, device="cpu")
    default = study_home.plan(CONFIGURATION["cselab-distill-pca-cos-general"])
    paths = {"train": {"output_dir"}, "data": {"corpus"}, "method_options": {"teacher_vectors"}}
    assert spelled.config.model_dump(exclude=paths) == study.config.model_dump(exclude=paths)
    changed = default.config.model_dump(exclude=paths)
    assert changed[section][key] != value
    changed[section][key] = value
    assert study.config.model_dump(exclude=paths) == changed  # nothing else differs from the default's training
    assert spelled.steps == study.steps == 200
    assert (spelled.train_units, spelled.general_units) == (study.train_units, study.general_units)
    assert (spelled.mix, study.mix) == (mix, 1.0)


@pytest.mark.parametrize(("configuration", "weight"), [
    ("cselab-distill-pcahead-cos-general-simcse", None), ("cselab-distill-pcahead-cos-general-simcse02", 0.2)])
def test_simcses_term_beside_the_default_plans_the_defaults_training_with_the_term_added(study_home, configuration,
                                                                                        weight):
    """`cselab adapt TEXT --recipe FILE`, FILE the default recipe with the options of SimCSE's term in its
    method_options (and a half mix), trains what the study ran as the configuration: the default's training, those
    options changed."""
    from cselab.adaptation import plan_adapt
    from cselab.adaptation.recipe import load_recipe

    study = study_home.plan(CONFIGURATION[configuration])
    default = study_home.plan(CONFIGURATION["cselab-distill-pcahead-cos-general"])
    weighed = {} if weight is None else {"loss_weights": {"info_nce": weight}}
    options = {**load_recipe("vectors-and-head").method_options, "contrastive": True, "temperature": 0.2, **weighed}
    recipe = recipe_with("vectors-and-head", general_file=str(study_home.general), mix=0.5, method_options=options,
                         overrides=("train.threads=1",))
    spelled = plan_adapt(study_home.text, study.output_dir, model=study.model, teacher=study.teacher, seed=1,
                         recipe=recipe, device="cpu")
    paths = {"train": {"output_dir"}, "data": {"corpus"}, "method_options": {"teacher_vectors"}}
    assert spelled.config.model_dump(exclude=paths) == study.config.model_dump(exclude=paths)
    changed = default.config.model_dump(exclude=paths)
    assert not {"contrastive", "temperature"} & set(changed["method_options"])  # the method's defaults: off, 0.05
    changed["method_options"].update(contrastive=True, temperature=0.2)
    if weight is not None:
        assert "loss_weights" not in changed["method_options"]
        changed["method_options"]["loss_weights"] = {"info_nce": weight}
    assert study.config.model_dump(exclude=paths) == changed
    assert spelled.steps == study.steps == 200 and (spelled.mix, study.mix) == (0.5, 1.0)
    assert (spelled.train_units, spelled.general_units) == (study.train_units, study.general_units)


def test_the_defaults_records_join_each_mix_at_the_derivations_weight_with_its_runs_record():
    from lab.domain_study.default_records import derived_records

    runs = [{"domain": "stsb", "configuration": "cselab-distill-pca-cos-general", "seed": 1, "main_score": 82.35,
             "stsb_test": 82.35, "wall_s": 1701.9, "steps": 200, "batch_size": 64, "provenance": {"git": "aaa"}},
            {"domain": "stsb", "configuration": "cselab-distill-pca-cos-general", "seed": 2, "main_score": 82.0,
             "stsb_test": 82.0, "wall_s": 900.0, "steps": 200, "provenance": {"git": "bbb"}},
            {"domain": "stsb", "configuration": "cselab-distill-pca-cos", "seed": 1, "main_score": 80.0}]
    interpolations = [
        {"domain": "stsb", "run": "stsb/cselab-distill-pca-cos-general-s1", "seed": 1, "weight": 0.25,
         "scores": {"sts": 82.25}, "main_score": 82.25, "stsb_test": 82.25, "command": "c1",
         "provenance": {"git": "ccc"}},
        {"domain": "stsb", "run": "stsb/cselab-distill-pca-cos-general-s1", "seed": 1, "weight": 0.5,
         "scores": {"sts": 82.38}, "main_score": 82.38, "stsb_test": 82.38},
        {"domain": "stsb", "run": "stsb/cselab-distill-pca-cos-general-s2", "seed": 2, "weight": 0.25,
         "chosen_on": {}, "scores": {}, "main_score": 1.0, "stsb_test": 1.0},  # a chosen weight: not the default
        {"domain": "stsb", "run": "stsb/cselab-distill-pca-cos-s1", "seed": 1, "weight": 0.25,
         "scores": {}, "main_score": 2.0, "stsb_test": 2.0},  # another configuration's run
        {"domain": "bbc-news", "run": "bbc-news/cselab-distill-pca-cos-general-s1", "seed": 1, "weight": 0.25,
         "scores": {}, "main_score": 3.0, "stsb_test": 3.0},  # no record of its run
    ]
    (record,) = derived_records(interpolations, runs, DERIVED[0])
    assert (record["configuration"], record["seed"], record["main_score"], record["stsb_test"]) == (
        "cselab-vectors-general", 1, 82.25, 82.25)
    # vectors-general is no longer cselab adapt's default: its records made now do not say it is
    assert (record["wall_s"], record["steps"], record["batch_size"], record["default"], record["mix"]) == (
        1701.9, 200, 64, False, 0.25)
    assert record["provenance"] == {"git": "aaa"} and record["derived_from"] == {
        "run": "stsb/cselab-distill-pca-cos-general-s1", "run_commit": "aaa", "interpolation": "c1",
        "interpolation_commit": "ccc"}
    # the same runs derived as the default at half: the mix at 0.5 is read, and the record says it is the default
    (half,) = derived_records(interpolations, runs, Derivation(DEFAULT_CONFIGURATION, "cselab-distill-pca-cos-general",
                                                               0.5))
    assert (half["configuration"], half["main_score"], half["mix"], half["default"]) == (
        DEFAULT_CONFIGURATION, 82.38, 0.5, True)


def test_a_derivation_run_after_another_adds_that_runs_wall_time_and_needs_its_record():
    """cselab adapt --adapt-teacher's records: the taught run mixed at 0.75, its time the teacher's adaptation's
    plus its own; a seed whose teacher's run has no record is left out."""
    from lab.domain_study.default_records import derived_records

    taught, first = "cselab-distill-pcahead-cos-general-tsimcse", "mpnet-simcse"
    runs = [{"domain": "stsb", "configuration": taught, "seed": 1, "main_score": 83.0, "stsb_test": 83.0,
             "wall_s": 700.0, "steps": 200, "provenance": {"git": "aaa"}},
            {"domain": "stsb", "configuration": taught, "seed": 2, "main_score": 83.1, "stsb_test": 83.1,
             "wall_s": 710.0, "steps": 200, "provenance": {"git": "aaa"}},
            {"domain": "stsb", "configuration": first, "seed": 1, "main_score": 85.7, "stsb_test": 85.7,
             "wall_s": 550.5, "steps": 100, "provenance": {"git": "bbb"}}]
    interpolations = [{"domain": "stsb", "run": f"stsb/{taught}-s{seed}", "seed": seed, "weight": 0.75,
                       "scores": {"sts": score}, "main_score": score, "stsb_test": score, "command": "c",
                       "provenance": {"git": "ccc"}} for seed, score in ((1, 83.37), (2, 83.29))]
    (derivation,) = [d for d in DERIVED if d.key == "cselab-adapt-teacher"]
    (record,) = derived_records(interpolations, runs, derivation)  # seed 2's teacher has no record
    assert (record["seed"], record["main_score"], record["mix"], record["default"]) == (1, 83.37, 0.75, False)
    assert (record["wall_s"], record["steps"], record["first_steps"]) == (1250.5, 200, 100)
    assert record["provenance"] == {"git": "aaa"}
    assert (record["derived_from"]["first_run"], record["derived_from"]["first_run_commit"]) == (
        "stsb/mpnet-simcse-s1", "bbb")


def test_a_configuration_taught_by_another_runs_model_needs_that_run_and_records_its_teacher(study, tmp_path,
                                                                                            monkeypatch):
    """The teacher adapted first: ``mpnet-simcse`` adapts the larger model itself (its record names it), and
    ``cselab-distill-pcahead-cos-general-tsimcse`` is taught by the model that run kept on the same domain and seed;
    without that run it stops in one line, recording nothing."""
    import shutil

    runs = tmp_path / "runs"
    results = tmp_path / "domains.jsonl"
    home = tmp_path / "home"
    shutil.copytree(study["home"], home)
    shutil.copytree(study["teacher"], home / "models" / "all-mpnet-base-v2")  # the study's larger model, by name
    (runs / "bbc-news").mkdir(parents=True)
    (runs / "general.txt").write_text("".join(f"General sentence number {i} about {WORDS[i % 20]}.\n"
                                              for i in range(500)))
    monkeypatch.setenv("CSELAB_HOME", str(home))
    argv = ["--domains", "bbc-news", "--steps", "2", "--budget-note", "a test", "--batch-size", "8", "--max-length",
            "16", "--eval-max-length", "24", "--observe-every", "0", "--model", str(study["student"]), "--teacher",
            str(study["teacher"]), "--results", str(results), "--runs", str(runs), "--quiet", "--configurations"]
    taught = "cselab-distill-pcahead-cos-general-tsimcse"
    with pytest.raises(SystemExit, match=r"taught by mpnet-simcse's run on bbc-news at seed 1, .* holds no model: "
                                         r"run --configurations mpnet-simcse --domains bbc-news --seeds 1 first"):
        run_domains.main([*argv, taught])
    assert not results.exists()
    run_domains.main([*argv, f"mpnet-simcse,{taught}"])
    adapted, distilled = [json.loads(line) for line in results.read_text().splitlines()]
    assert (adapted["configuration"], adapted["model"], adapted["teacher"]) == (
        "mpnet-simcse", "all-mpnet-base-v2", None)
    kept = runs / "bbc-news" / "mpnet-simcse-s1" / "model"  # the model the teacher's run handed back
    assert (distilled["configuration"], distilled["model"], distilled["teacher"]) == (
        taught, str(study["student"]), str(kept))
    assert distilled["config"]["effective"]["method_options"]["teacher"] == str(kept)  # what it trained against
    assert distilled["default"] is False


def test_a_teacher_run_with_a_mix_teaches_with_the_mixed_model_it_hands_back(tmp_path):
    """``mpnet-simcse-mix05`` hands back its weights mixed half-way (``model``, what cselab adapt saves; ``weight-mix``
    in a run made before cselab adapt handed back one path); the configuration it teaches is taught by that model,
    not by the unmixed ``best`` beside it."""
    from types import SimpleNamespace

    args = SimpleNamespace(runs=tmp_path, teacher="unused")
    run = tmp_path / "bbc-news" / "mpnet-simcse-mix05-s2"
    (run / "best").mkdir(parents=True)
    (run / "best" / "config.json").write_text("{}")
    (run / "adapt.json").write_text(json.dumps({"mix": 0.5}))  # what a finished run of a 0.5 mix records
    half = CONFIGURATION["cselab-distill-pcahead-cos-general-tsimcse05"]
    with pytest.raises(SystemExit, match=r"mpnet-simcse-mix05-s2/weight-mix holds no model"):
        run_domains.teacher_of(half, "bbc-news", 2, args)
    (run / "weight-mix").mkdir()
    (run / "weight-mix" / "config.json").write_text("{}")
    assert run_domains.teacher_of(half, "bbc-news", 2, args) == str(run / "weight-mix")  # an earlier run's
    (run / "model").mkdir()
    (run / "model" / "config.json").write_text("{}")
    assert run_domains.teacher_of(half, "bbc-news", 2, args) == str(run / "model")  # a run made now
    whole = tmp_path / "bbc-news" / "mpnet-simcse-s2" / "best"
    whole.mkdir(parents=True)
    (whole / "config.json").write_text("{}")
    tsimcse = CONFIGURATION["cselab-distill-pcahead-cos-general-tsimcse"]
    assert run_domains.teacher_of(tsimcse, "bbc-news", 2, args) == str(whole)  # no adapt.json: a cselab run's best
    (whole.parent / "adapt.json").write_text(json.dumps({"mix": 1.0}))
    assert run_domains.teacher_of(tsimcse, "bbc-news", 2, args) == str(whole)  # unmixed, made before OUTPUT/model
    (whole.parent / "model").mkdir()
    (whole.parent / "model" / "config.json").write_text("{}")
    assert run_domains.teacher_of(tsimcse, "bbc-news", 2, args) == str(whole.parent / "model")


def test_the_teacher_adapted_first_as_a_user_spells_it_plans_the_studys_two_runs(study_home):
    """`cselab adapt TEXT --recipe vectors-and-head-teacher-first --output DIR` (what --task similarity and search
    run) trains what the study ran as ``mpnet-simcse`` (in DIR/teacher-adapted) and
    ``cselab-distill-pcahead-cos-general-tsimcse`` (taught by the model the first hands back); the student's model is
    handed back at the default's mix."""
    import shutil

    from cselab.adaptation import plan_adapt

    larger = str(study_home.home / "models" / "all-mpnet-base-v2")  # what run_domains' model_path finds by name
    runtime = ["train.threads=1", "train.device=cpu"]
    paths = {"train": {"output_dir"}, "data": {"corpus"}, "method_options": {"teacher_vectors", "teacher"}}

    def study(key, model, teacher):
        return run_domains.configuration_plan(CONFIGURATION[key], study_home.text, study_home.text.parent / key,
                                              study_home.args, seed=1, model=model, teacher=teacher,
                                              general=study_home.general if CONFIGURATION[key].general else None,
                                              runtime=runtime)

    adapted = study("mpnet-simcse", larger, larger)
    kept = str(adapted.output_dir / "best")
    shutil.copytree(larger, kept)  # as if the study's first run had finished
    student = larger  # any model: the study's student is all-MiniLM-L6-v2
    taught = study("cselab-distill-pcahead-cos-general-tsimcse", student, kept)
    output = study_home.text.parent / "mine"
    recipe = recipe_with("vectors-and-head-teacher-first", general_file=str(study_home.general),
                         overrides=("train.threads=1",))
    spelled = plan_adapt(study_home.text, output, model=student, teacher=larger, seed=1, recipe=recipe, device="cpu")
    first = spelled.teacher_plan
    assert adapted.teacher is None and adapted.recipe.name == first.recipe.name == "simcse"
    assert first.config.model_dump(exclude=paths) == adapted.config.model_dump(exclude=paths)
    assert (first.steps, first.mix, first.held_out) == (adapted.steps, adapted.mix, adapted.held_out) == (
        100, 1.0, adapted.held_out)
    assert spelled.config.model_dump(exclude=paths) == taught.config.model_dump(exclude=paths)
    assert spelled.config.method_options["teacher"] == str(output / "teacher-adapted" / "model")
    assert taught.config.method_options["teacher"] == kept
    assert (spelled.train_units, spelled.general_units) == (taught.train_units, taught.general_units)
    assert (spelled.steps, spelled.mix, taught.mix) == (200, 0.75, 1.0)


def test_a_run_hands_back_its_weight_mix_and_a_mix_starts_from_the_selected_model(tmp_path):
    """score_suite scores what a run hands its user (``model``, mixed or not; in a run made before cselab adapt
    handed back one path, ``weight-mix`` when mixed, else ``best``); interpolate mixes from the selected
    checkpoint."""
    from lab.domain_study.domain_peers import MODEL_DIR, saved_model

    mixed, unmixed, bare = tmp_path / "mixed", tmp_path / "unmixed", tmp_path / "bare"
    for run, summary in ((mixed, {"mix": 0.75}), (unmixed, {"mix": 1.0}), (bare, None)):
        (run / "best").mkdir(parents=True)
        if summary is not None:
            (run / "adapt.json").write_text(json.dumps(summary))
    configuration = "cselab-distill-pcahead-cos-general"
    # runs made before OUTPUT/model
    assert saved_model(mixed, configuration, handed_back=True) == mixed / "weight-mix"
    assert saved_model(unmixed, configuration, handed_back=True) == unmixed / "best"
    # runs made now: OUTPUT/model, mixed or not; the selected checkpoint is still what a mix starts from
    for run in (mixed, unmixed):
        (run / "model").mkdir()
        assert saved_model(run, configuration, handed_back=True) == run / "model"
        assert saved_model(run, configuration) == run / "best"
    assert saved_model(bare, configuration, handed_back=True) == bare / "best"  # a run that is not cselab adapt's
    assert saved_model(mixed, "st-distill", handed_back=True) == mixed / MODEL_DIR
