"""``cselab reproduce``: each of the six methods end to end on a tiny random BERT, with the papers' data served by a
loopback HTTP server (a tiny Wiki1M and SentEval's fixture layout), the round trips made by tiny random Marian models,
and the table printed with the paper's column. The paper's figures are typed here from the papers' tables, apart from
the package's file, so a slip in either shows."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import spearmanr

from cselab.data.papers import http_fetch
from cselab.data.papers import paper_data as paper_mod
from cselab.data.papers.paper_data import RemoteFile
from cselab.data.registry.download import files_entry
from cselab.errors import UsageError
from cselab.methods import register_method
from cselab.methods.simcse import SimCSE
from cselab.research.experiments.reproduce import (
    ComparisonRow,
    ReproducePlan,
    comparison_rows,
    estimate_seconds,
    plan_reproduction,
)
from cselab.research.paper_figures import paper_row, paper_rows, paper_tasks
from tests.data.test_paper_data import WIKI, WIKI_LINES, LoopbackServer, _independent_pair_counts, _senteval_tar
from tests.helpers import build_tiny_marian_dir, run_cli, write_sts_home

# STS12 and the average of each method's own row on bert-base-uncased, typed from the papers' tables
PAPER_STS12_AVG = {
    "simcse": (68.40, 76.25),  # SimCSE as quoted in CoT-BERT Table 2 (and the other three)
    "simcse++": (73.66, 78.05),  # SimCSE++ Table 3
    "cot-bert": (72.56, 79.40),  # CoT-BERT Table 2
    "ifcl": (71.57, 77.80),  # IFCL Table 1
    "tncse": (75.52, 79.58),  # TNCSE Table 1
    "jtcse": (74.95, 79.70),  # JTCSE Table I
}
FAST = ["train.max_steps=2", "train.batch_size=8", "train.eval_every=2", "train.eval_at_start=false",
        "model.max_length=16", "train.device=cpu", "train.precision=fp32", "train.log_every=1"]
EXTRA = {
    "cot-bert": [],
    "ifcl": [],
    "tncse": ["method_options.pipeline.stage1.settings.train={batch_size: 8, max_steps: 2, eval_every: 2}",
              "method_options.pipeline.stage1.settings.model={max_length: 16, dropout: 0.1}"],
}
EXTRA["jtcse"] = EXTRA["tncse"] + ["method_options.num_ca_layers=1"]


def _fetched_sts(home: Path) -> Path:
    """A tiny STS-B in the fetched layout, with its manifest (so `cselab data fetch sts` finds it done)."""
    write_sts_home(home)
    names = [f"stsb/sts-{s}.csv" for s in ("train", "dev", "test")]
    manifest = {"target": "sts", "files": files_entry(home / "sts", names)}
    (home / "sts" / "manifest.json").write_text(json.dumps(manifest))
    return home


@pytest.fixture
def papers_home(tmp_path, monkeypatch):
    monkeypatch.setattr(paper_mod, "WIKI1M", RemoteFile("wiki1m_for_simcse.txt", lines=len(WIKI_LINES)))
    monkeypatch.setattr(paper_mod, "SENTEVAL_PAIRS", _independent_pair_counts())
    monkeypatch.setattr(http_fetch, "CHUNK", 4096)
    home = _fetched_sts(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    with LoopbackServer({"wiki1m_for_simcse.txt": WIKI, "senteval.tar": _senteval_tar()}) as server:
        monkeypatch.setenv("CSELAB_PAPERS_URL", server.url)
        yield home


def test_the_kept_figures_are_the_papers():
    rows = paper_rows()
    assert {(r.method, r.backbone) for r in rows} == {
        ("simcse", "bert-base-uncased"), ("simcse", "roberta-base"), ("simcse++", "bert-base-uncased"),
        ("cot-bert", "bert-base-uncased"), ("cot-bert", "roberta-base"), ("ifcl", "bert-base-uncased"),
        ("tncse", "bert-base-uncased"), ("tncse", "roberta-base"), ("jtcse", "bert-base-uncased"),
        ("jtcse", "roberta-base")}
    for method, (sts12, avg) in PAPER_STS12_AVG.items():
        row = paper_row(method, "bert-base-uncased")
        assert (row.scores["sts12"], row.avg) == (sts12, avg)
    assert paper_row("cot-bert", "roberta-base").scores == {
        "sts12": 75.43, "sts13": 85.47, "sts14": 78.74, "sts15": 85.64, "sts16": 82.21, "stsb": 83.40, "sickr": 73.46}
    for row in rows:  # every printed average is the mean of its seven figures, but the one the paper misprints
        mean = statistics.fmean(row.scores[t] for t in paper_tasks())
        if (row.method, row.backbone) == ("jtcse", "roberta-base"):
            assert round(mean, 2) == 79.85 and row.avg == 79.94 and "79.85" in row.note
        else:
            assert abs(mean - row.avg) <= 0.005 + 1e-9, (row.method, row.backbone, mean, row.avg)


def test_plan_maps_the_presets_placeholders_to_fetched_data(tmp_path):
    home = tmp_path / "home"
    plan = plan_reproduction("jtcse", "roberta-base", seeds=[1, 2], home=home, out_dir=tmp_path / "out")
    assert plan.preset == "jtcse/paper-roberta-base"
    assert plan.raw["data"]["corpus"] == str(home / "wiki1m-sickr" / "wiki1m+sickr.txt")
    encoders = plan.raw["method_options"]["pipeline"]["stage1"]["encoders"]
    assert [e["augmentation"]["path"] for e in encoders] == [str(home / "rtt" / "wiki1m+sickr.rtt-nl.txt"),
                                                              str(home / "rtt" / "wiki1m+sickr.rtt-zh.txt")]
    assert [t for t, _ in plan.fetch] == ["wiki1m-sickr", "sts", "senteval"]
    assert plan.raw["method_options"]["pipeline"]["stage1_dir"] == str(tmp_path / "out" / "stage1")
    assert plan.paper.backbone == "roberta-base" and plan.paper.avg == 79.94
    ifcl = plan_reproduction("ifcl", home=home)
    assert ifcl.raw["method_options"]["parallel"] == {"source": str(home / "wiki1m" / "wiki1m_for_simcse.txt"),
                                                      "target": str(home / "rtt" / "wiki1m_for_simcse.de.txt")}
    minilm = plan_reproduction("simcse", "all-MiniLM-L6-v2", home=home, sts="partial")
    assert minilm.preset == "simcse/cpu-minilm" and minilm.senteval_dir is None
    assert [t for t, _ in minilm.fetch] == ["corpus", "models", "sts"]
    assert minilm.paper.backbone == "bert-base-uncased" and "another backbone" in minilm.notes[0]
    with pytest.raises(UsageError, match="the ifcl paper reports no roberta-base row"):
        plan_reproduction("ifcl", "roberta-base", home=home)
    with pytest.raises(UsageError, match="unknown method 'simcsx'"):
        plan_reproduction("simcsx", home=home)


def test_comparison_rows_mark_partial_sets_and_spread():
    plan = ReproducePlan("simcse", "bert-base-uncased", "simcse/paper-bert-base", [1, 2], Path("x"), {},
                         paper=paper_row("simcse", "bert-base-uncased"))
    scores = {1: {"sts12-part": 60.0, "stsb": 70.0, "sts17-en": 80.0}, 2: {"sts12-part": 62.0, "stsb": 74.0,
                                                                           "sts17-en": 81.0}}
    rows = {r.task: r for r in comparison_rows(plan, scores)}
    assert rows["STS12"] == ComparisonRow("STS12", 68.40, 61.0, 1.41, 2, "STS12-part (partial: 1500 of 3108 pairs)",
                                          False)
    assert rows["STS-B"].ours == 72.0 and rows["STS-B"].std == pytest.approx(2.83) and rows["STS-B"].difference == -4.85
    assert rows["SICK-R"].ours is None and rows["STS13"].our_set == "not scored (needs SentEval's data)"
    assert rows["STS17-en"].paper is None and rows["STS17-en"].ours == 80.5
    assert rows["Avg."].paper == 76.25 and rows["Avg."].difference is None  # not the paper's set of tasks
    # the mean over the seeds of each seed's avg-available (rounded to 2 decimals, as a run records it)
    assert rows["Avg."].ours == round(statistics.fmean([70.0, 72.33]), 2)


@pytest.mark.parametrize("method", ["simcse", "simcse++", "cot-bert", "ifcl", "tncse", "jtcse"])
def test_reproduce_end_to_end(method, papers_home, tiny_bert_dir, tmp_path, capsys):
    args = ["reproduce", method, "--backbone", "bert-base-uncased", "--seeds", "1", "--output-dir",
            str(tmp_path / "out"), *FAST, f"model.backbone={tiny_bert_dir}", *EXTRA.get(method, [])]
    if method == "cot-bert":
        args += ["train.batch_size=8"]
    if method == "ifcl":
        de = build_tiny_marian_dir(tmp_path / "en-de", seed=5)
        args += ["--rtt-models", f"en-de={de}", f"method_options.fraternal_model={tiny_bert_dir}"]
    if method in ("tncse", "jtcse"):
        pairs = {p: build_tiny_marian_dir(tmp_path / p, seed=i) for i, p in enumerate(("en-fr", "fr-en", "en-ru",
                                                                                        "ru-en"))}
        args += ["--rtt-models", ",".join(f"{k}={v}" for k, v in pairs.items())]
    rc, out, err = run_cli(args, capsys)
    assert rc == 0, err[-3000:]
    assert re.search(r"estimate: (about \d+ (s|min)|none)", out)
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in out.splitlines() if line.startswith("| ")}
    sts12, avg = PAPER_STS12_AVG[method]
    assert table["STS12"][0] == f"{sts12:.2f}" and table["Avg."][0] == f"{avg:.2f}"
    assert [t for t in table if t not in ("task",)] == ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R",
                                                        "Avg."]
    summary = json.loads((tmp_path / "out" / "reproduce.json").read_text())
    assert summary["sts"] == "senteval"
    ours = summary["scores"]["1"]
    assert set(ours) == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"}
    assert table["STS12"][1] == f"{ours['sts12']:.2f}" and table["SICK-R"][1] == f"{ours['sickr']:.2f}"
    assert table["STS12"][3] == f"{ours['sts12'] - sts12:+.2f}"  # the same set on the paper's backbone name
    if method in ("tncse", "jtcse"):
        assert (papers_home / "rtt" / "wiki1m+sickr.rtt-fr.txt").is_file()
    if method == "simcse":  # our STS-B figure, computed here with numpy and scipy from the saved model's vectors
        from cselab.models.sentence_model import load_model

        rows = [line.split("\t") for line in (paper_mod.paper_path("senteval", papers_home) /
                                              "STS/STSBenchmark/sts-test.csv").read_text().splitlines() if line]
        model = load_model(tmp_path / "out" / "run-seed1" / "best")
        a = model.encode([" ".join(r[5].split()) for r in rows]).numpy().astype(np.float64)
        b = model.encode([" ".join(r[6].split()) for r in rows]).numpy().astype(np.float64)
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        expected = 100 * spearmanr(cos, [float(r[4]) for r in rows]).statistic
        assert ours["stsb"] == pytest.approx(expected, abs=0.006)
        rc, out2, _ = run_cli(args, capsys)  # a rerun finds the seed recorded and scored: same table
        assert rc == 0 and "already recorded, skipped" in out2
        assert [line for line in out2.splitlines() if line.startswith("| ")] == \
            [line for line in out.splitlines() if line.startswith("| ")]


@pytest.mark.parametrize("how", [["--sts", "partial"], ["--no-fetch"]])
def test_partial_sets_are_marked(how, tmp_path, tiny_bert_dir, monkeypatch, capsys):
    home = _fetched_sts(tmp_path / "home")
    (home / "corpus").mkdir()
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"{line}\n" for line in WIKI_LINES[:64]))
    monkeypatch.setenv("CSELAB_HOME", str(home))
    rc, out, err = run_cli(["reproduce", "simcse", "--backbone", str(tiny_bert_dir), *how,
                            "--output-dir", str(tmp_path / "out"), *FAST, f"data.corpus={corpus}"], capsys)
    assert rc == 0, err[-2000:]
    assert "the partial sets cselab builds from STS-B" in out
    assert "STS12-part (partial: 1500 of 3108 pairs)" in out
    assert "| SICK-R | 72.23 | - | not scored (needs SentEval's data) | - |" in out
    assert "| STS17-en | - |" in out
    assert "note: the papers report no" in out
    assert ("note: SentEval's data is not fetched (no fetching under --no-fetch or torchrun)" in out) == \
        (how == ["--no-fetch"])


def test_reproduce_user_errors_are_one_line(tmp_path, capsys):
    for args, message in (
        (["reproduce", "simcsx"], "unknown method 'simcsx'"),
        (["reproduce", "simcse++", "--backbone", "roberta-base"], "the simcse++ paper reports no roberta-base row"),
        (["reproduce", "simcse", "--seeds", "1,x"], "'x' is not a whole number"),
        (["reproduce", "simcse", "--sts", "partial", "--senteval-dir", str(tmp_path)], "contradict each other"),
        (["reproduce", "simcse", "--senteval-dir", str(tmp_path)], "is not a SentEval data directory"),
        (["reproduce", "simcse", "--preset", "tncse/cpu-minilm"], "trains 'tncse', not 'simcse'"),
        (["reproduce", "simcse", "--no-fetch", "--sts", "partial"], "missing: cselab data fetch wiki1m"),
        (["reproduce", "tncse", "--rtt-models", "en-fr"], "give SRC-TGT=MODEL pairs"),
    ):
        rc, _, err = run_cli(args, capsys)
        assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, (args, err)


def _torchrun(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    # `python -m torch.distributed.run` is the torchrun launcher, independent of PATH
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "cselab.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def test_reproduce_under_torchrun(tmp_path, tiny_bert_dir):
    """Two CPU ranks (gloo): both train, the main rank scores and prints the table once; with data missing, a
    torchrun launch refuses in one line before any work and names --prepare-only."""
    home = _fetched_sts(tmp_path / "home")
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"{line}\n" for line in WIKI_LINES[:64]))
    env = {**os.environ, "CSELAB_HOME": str(home), "OMP_NUM_THREADS": "1"}
    args = ["reproduce", "simcse", "--backbone", str(tiny_bert_dir), "--sts", "partial", "--output-dir",
            str(tmp_path / "out"), *FAST, "train.batch_size=8", f"data.corpus={corpus}"]
    done = _torchrun(args, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("| STS12 |") == 1  # one table: the main rank's
    records = (tmp_path / "out" / "seeds.jsonl").read_text().splitlines()
    assert len(records) == 1 and json.loads(records[0])["seed"] == 1
    missing = _torchrun(["reproduce", "simcse", "--backbone", str(tiny_bert_dir), "--output-dir",
                         str(tmp_path / "out2"), *FAST], env)
    assert missing.returncode != 0
    assert "under torchrun, reproduce only trains" in missing.stderr and "--prepare-only" in missing.stderr


def test_the_python_api_returns_the_rows(tmp_path, tiny_bert_dir, monkeypatch, capsys):
    import cselab

    home = _fetched_sts(tmp_path / "home")
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"{line}\n" for line in WIKI_LINES[:64]))
    monkeypatch.setenv("CSELAB_HOME", str(home))
    result = cselab.reproduce("simcse", str(tiny_bert_dir), *FAST, f"data.corpus={corpus}", seeds=[1, 2], sts="partial",
                              output_dir=tmp_path / "out", progress=False)
    assert capsys.readouterr().out == ""  # progress=False: quiet
    rows = {r.task: r for r in result.rows}
    stsb = [result.scores[s]["stsb"] for s in (1, 2)]
    assert rows["STS-B"].ours == round(statistics.fmean(stsb), 2)
    assert rows["STS-B"].std == round(statistics.stdev(stsb), 2) and rows["STS-B"].seeds == 2
    assert rows["STS12"].our_set == "STS12-part (partial: 1500 of 3108 pairs)" and rows["STS12"].paper == 68.40
    assert result.estimate_s is not None and result.estimate_s > 0


# -- a method from outside the package: what reproduce needs of it is declared in its own class ------------------
@register_method
class ToyMethod(SimCSE):
    """SimCSE under another name, declaring its presets (beside this file), an alias, five views and a template of
    seven tokens; nothing in cselab names it."""

    name = "test-toy"
    preset_dir = Path(__file__).with_name("toy_presets")
    aliases = ("toy",)
    views = 5
    template_tokens = 7


def test_a_method_declares_what_reproduce_needs(tmp_path, tiny_bert_dir, monkeypatch, capsys):
    home = _fetched_sts(tmp_path / "home")
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"{line}\n" for line in WIKI_LINES[:64]))
    monkeypatch.setenv("CSELAB_HOME", str(home))
    plan = plan_reproduction("Toy", str(tiny_bert_dir), overrides=[f"data.corpus={corpus}"], sts="partial",
                             out_dir=tmp_path / "plan", home=home)
    assert (plan.method, plan.preset, plan.views, plan.template_tokens) == ("test-toy", "toy_presets/cpu-minilm", 5, 7)
    assert plan.raw["train"]["lr"] == 7.0e-4 and plan.raw["method_options"] == {"temperature": 0.07}  # its preset
    assert plan.paper is None and plan.notes == ["no paper's figures are kept for test-toy: the table has ours only"]
    assert not (tmp_path / "plan").exists()  # a plan writes nothing
    # the estimate's training FLOPs grow with the declared views: 6 x parameters x views x batch x tokens x steps
    gflops, efficiency = 1.0, 0.8
    five = estimate_seconds(plan, home=home, gflops=gflops)
    plan.views = 2
    two = estimate_seconds(plan, home=home, gflops=gflops)
    layers, hidden, ff = 2, 32, 64  # tiny_bert_dir's shape (tests/helpers.py: 2 layers, 32 wide, 2 x 32)
    params = layers * (4 * hidden * hidden + 2 * hidden * ff)
    words = [len(line.split()) for line in WIKI_LINES[:64]]
    tokens = min(16.0, 1.3 * sum(words) / len(words) + 2) + 7
    assert five - two == pytest.approx(6 * params * 3 * 8 * tokens * 3 / (gflops * 1e9 * efficiency), rel=1e-9)
    # and the command plans and prepares it
    rc, out, err = run_cli(["reproduce", "toy", "--backbone", str(tiny_bert_dir), "--sts", "partial",
                            "--output-dir", str(tmp_path / "out"), "--prepare-only", f"data.corpus={corpus}"], capsys)
    assert rc == 0, err
    assert "reproduce test-toy on " in out and "preset toy_presets/cpu-minilm" in out and "prepared: " in out
    written = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert written["method"] == "test-toy" and written["model"]["backbone"] == str(tiny_bert_dir)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".cselab-reproduce", "config.yaml"]


# -- killed anywhere in a seed's life, the same command continues, bit-identical ---------------------------------
class Killed(BaseException):
    """A kill: no handler of cselab's catches it (they catch Exception, or KeyboardInterrupt in the trainer)."""


def _run_dir_of(args: tuple, kwargs: dict) -> str:
    """The run directory's name a call acts on, from its arguments (a Trainer, a path, a config, a record)."""
    first = args[0] if args else None
    record = args[1] if len(args) > 1 else kwargs.get("record")
    if isinstance(record, dict):  # append_record(results_file, record)
        return f"run-seed{record.get('seed')}"
    if hasattr(first, "output_dir"):  # the trainer
        return Path(first.output_dir).name
    if isinstance(first, Path):
        return first.name if first.name.startswith("run-seed") else first.parent.name
    if hasattr(first, "train"):  # a RunConfig
        return Path(first.train.output_dir).name
    return ""


def _kill_at(monkeypatch, owner: object, name: str, seed: int, *, before: bool) -> None:
    """Raise :class:`Killed` at the first call of ``owner.name`` for seed ``seed``'s run, before or after it ran."""
    original = getattr(owner, name)
    fired = []

    def killed(*args, **kwargs):
        if fired or _run_dir_of(args, kwargs) != f"run-seed{seed}":
            return original(*args, **kwargs)
        fired.append(True)
        if not before:
            original(*args, **kwargs)
        raise Killed(f"{name} of seed {seed}")

    monkeypatch.setattr(owner, name, killed)


def _kill_points() -> dict[str, tuple[object, str, bool]]:
    from cselab.training import run_directory, runs
    from cselab.training.trainer import Trainer

    return {  # a seed's life, in order: (where, what, before the call)
        "before-run-dir": (runs, "train_and_record", True),
        "after-config": (run_directory, "write_config", False),
        "after-step0-best-before-checkpoint": (Trainer, "_save_best", False),
        "mid-training": (Trainer, "_save_last", False),
        "after-training-before-scoring": (runs, "score_test_sets", True),
        "after-results-before-record": (runs, "append_record", True),
        "after-record": (runs, "append_record", False),
    }


# (point, seeds, the seed killed): every point of a seed's life, and issue 92's case: seed 2's step-0 evaluation
# wrote best/ and the kill came before its first checkpoint (seed 1 recorded by then)
KILL_CASES = [*((point, "1", 1) for point in _kill_points()), ("after-step0-best-before-checkpoint", "1,2", 2)]


@pytest.fixture(scope="module")
def kill_world(tmp_path_factory, tiny_bert_dir):
    w = tmp_path_factory.mktemp("reproduce-kills")
    home = _fetched_sts(w / "home")
    corpus = w / "c.txt"
    corpus.write_text("".join(f"{line}\n" for line in WIKI_LINES[:64]))
    # 3 steps: step 0's evaluation, a checkpoint at step 2 (mid-training), the last at step 3
    overrides = ["train.max_steps=3", "train.batch_size=8", "train.eval_every=2", "train.save_every=2",
                 "train.eval_at_start=true", "train.lr=1e-3", "model.max_length=16", "train.device=cpu",
                 "train.precision=fp32", "train.log_every=1", "train.threads=1", f"data.corpus={corpus}"]
    return w, home, str(tiny_bert_dir), overrides


def _outcome(out: Path, seeds: tuple[int, ...] = (1, 2)) -> dict:
    """What a finished reproduction computed: each seed's selected weights (sha256), metrics (timing aside), test
    scores and record, and the summary's scores."""
    import hashlib

    runs = {}
    for seed in seeds:
        run = out / f"run-seed{seed}"
        metrics = [{k: v for k, v in json.loads(line).items() if k != "sent_per_s"}
                   for line in (run / "metrics.jsonl").read_text().splitlines()]
        runs[seed] = {"weights": hashlib.sha256((run / "best" / "model.safetensors").read_bytes()).hexdigest(),
                       "metrics": metrics, "scores": json.loads((run / "results.json").read_text())["scores"]}
    records = [json.loads(line) for line in (out / "seeds.jsonl").read_text().splitlines()]
    return {"runs": runs, "records": [(r["seed"], r["scores"]) for r in records],
            "summary": json.loads((out / "reproduce.json").read_text())["scores"]}


@pytest.fixture(scope="module")
def uninterrupted(kill_world):
    """The outcomes of the uninterrupted runs over seeds 1 and over seeds 1,2 (the API and the CLI run the same
    orchestrator)."""
    import cselab

    w, home, backbone, overrides = kill_world
    outcomes = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CSELAB_HOME", str(home))
        for seeds in ((1,), (1, 2)):
            out = w / f"uninterrupted-{len(seeds)}"
            cselab.reproduce("simcse", backbone, *overrides, seeds=list(seeds), sts="partial", output_dir=out,
                             progress=False)
            outcomes[",".join(map(str, seeds))] = _outcome(out, seeds)
    return outcomes


@pytest.mark.parametrize(("point", "seeds", "seed"), KILL_CASES, ids=[f"seeds{s}-{p}" for p, s, _ in KILL_CASES])
def test_a_kill_anywhere_continues_bit_identically(point, seeds, seed, kill_world, uninterrupted, tmp_path,
                                                   monkeypatch, capsys):
    w, home, backbone, overrides = kill_world
    monkeypatch.setenv("CSELAB_HOME", str(home))
    command = ["reproduce", "simcse", "--backbone", backbone, "--sts", "partial", "--seeds", seeds,
               "--output-dir", str(tmp_path / "out"), *overrides]
    with monkeypatch.context() as kill:
        owner, name, before = _kill_points()[point]
        _kill_at(kill, owner, name, seed, before=before)
        with pytest.raises(Killed):
            run_cli(command, capsys)
    rc, out, err = run_cli(command, capsys)  # the same command, no other option
    assert rc == 0, err[-2000:]
    assert _outcome(tmp_path / "out", tuple(int(s) for s in seeds.split(","))) == uninterrupted[seeds]
    # a seed recorded before the kill is skipped, not trained again
    assert ("seed 1: already recorded, skipped" in out) == (seed == 2 or point == "after-record")


def test_a_sigkill_after_step0_best_continues(kill_world, uninterrupted, tmp_path, monkeypatch, capsys):
    """A real kill (SIGKILL of the process, its lock left behind) where issue 92 stranded the run: step 0's best/
    is in place, no checkpoint yet (the first directory swap of the run, ``CSELAB_TEST_KILL_AT``)."""
    from cselab.fileio import KILL_HOOK_ENV

    w, home, backbone, overrides = kill_world
    out = tmp_path / "out"
    command = ["reproduce", "simcse", "--backbone", backbone, "--sts", "partial", "--seeds", "1",
               "--output-dir", str(out), *overrides]
    env = {**os.environ, "CSELAB_HOME": str(home), "OMP_NUM_THREADS": "1", KILL_HOOK_ENV: "swap-installed:1"}
    killed = subprocess.run([sys.executable, "-m", "cselab.cli", *command], env=env, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    run = out / "run-seed1"
    assert (run / "best" / "model.safetensors").is_file() and not (run / "last").exists()
    monkeypatch.setenv("CSELAB_HOME", str(home))
    monkeypatch.delenv(KILL_HOOK_ENV, raising=False)
    rc, _, err = run_cli(command, capsys)
    assert rc == 0, err[-2000:]
    assert _outcome(out, (1,)) == uninterrupted["1"]


@pytest.mark.parametrize("seed", [7, 2**63 - 1])
def test_every_seed_reproduce_takes_orders_the_data(seed):
    """`--seeds` takes 0 to 2^63-1; the data order's seed (seed x 1,000,003 + epoch) is taken modulo 2^64 where it
    leaves the range torch's generators take (a small seed's order is the one it always was)."""
    import torch

    from cselab.training.trainer import epoch_order

    mixed = seed * 1_000_003 + 2
    expected = torch.randperm(50, generator=torch.Generator().manual_seed(mixed if mixed < 2**64 else mixed % 2**64))
    assert epoch_order(50, seed, 2).tolist() == expected.tolist()
