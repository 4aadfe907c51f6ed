"""The STS-B adaptation protocol's tables (``lab/adapt_protocol/tables.py``), their rendering into documents
(``lab/render.py``) and the rows of ``lab/adapt_protocol/run_adapt.sh``."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from cselab.config.run_config import load_config
from lab.adapt_protocol.tables import adapt_seeds_table, adapt_table

REPO = Path(__file__).resolve().parents[2]


def _record(corpus, not_held_out, scores, *, method="simcse", seed=1, sentences=100):
    text = {"corpus": corpus, "sentences": sentences, "not_held_out": not_held_out} if not_held_out is not None else {}
    return {"protocol": "adapt", "method": method, "variant": "", "seed": seed, "steps": 200, "best_step": 25,
            "precision": "bf16",
            "training_text": text, "scores": {**scores, "stsb_dev_start": 86.72, "stsb_dev_best": 87.5},
            "config": {"effective": {"train": {"lr": 1e-5}, "data": {"corpus": corpus},
                                     "method_options": {"temperature": 0.2}}},
            "wall_s": 100.0, "git": "0123456789abc"}


def _cells(table_lines: list[str]) -> list[dict[str, str]]:
    header = [c.strip() for c in table_lines[0].strip("|").split("|")]
    return [dict(zip(header, [c.strip() for c in line.strip("|").split("|")], strict=True)) for line in table_lines[2:]]


def test_adapt_table_never_averages_seen_and_held_out_columns():
    rng = random.Random(0)
    tasks = ["sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part", "stsb", "sts17-en"]
    seen = ["sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part"]
    b1 = {t: round(rng.uniform(70, 90), 2) for t in tasks}
    b2 = {t: round(rng.uniform(70, 90), 2) for t in tasks}
    records = [_record("stsb-train-minus-stsb-eval", seen, b1),
               _record("stsb-train-minus-all-eval", [], b2, method="simcse++"),
               _record("mine.txt", None, b2)]
    parts = re.split(r"\n\n(?=\*\*Training text)", adapt_table(records))
    assert len(parts) == 3, "one table per training text"
    heading, _, *lines = parts[0].splitlines()
    assert "`stsb-train-minus-stsb-eval`" in heading and "STS12-part" in heading and "100 sentences" in heading
    row = _cells(lines)[0]
    assert list(row)[10] == "STS-B", "STS-B test is the first score column"
    assert row["prec."] == "bf16", "what ran (the record's resolved precision)"
    assert row["STS12-part †"] == f"{b1['sts12-part']:.2f}" and row["STS-B"] == f"{b1['stsb']:.2f}"
    assert row["avg held-out (2)"] == f"{(b1['stsb'] + b1['sts17-en']) / 2:.2f}"
    assert (row["lr"], row["τ"], row["best step"], row["dev start"]) == ("1e-05", "0.2", "25", "86.72")
    heading, _, *lines = parts[1].splitlines()
    row = _cells(lines)[0]
    assert "every column held out" in heading and "STS12-part" in row and row["method"] == "simcse++"
    assert row["avg held-out (7)"] == f"{sum(b2.values()) / 7:.2f}"
    heading, _, *lines = parts[2].splitlines()
    row = _cells(lines)[0]
    assert "not recorded" in heading and row["avg held-out (0)"] == "-" and "STS-B †" in row


def test_render_fills_the_adapt_blocks_across_documents(tmp_path):
    """lab.render writes each table into every document that has its block; a table without a block anywhere is
    refused before anything is written."""
    from lab.adapt_protocol.tables import adapt_seeds_table as seeds
    from lab.render import RenderError, render

    records = [_record("stsb-train-minus-all-eval", [], {"stsb": s}, seed=i) for i, s in ((1, 83.3), (2, 83.5))]
    makers = {"adapt": lambda: adapt_table(records), "adapt-seeds": lambda: seeds(records)}
    readme, docs = tmp_path / "README.md", tmp_path / "adapt.md"
    readme.write_text("<!-- cselab:adapt-seeds -->\nold\n<!-- /cselab:adapt-seeds -->\n")
    docs.write_text("<!-- cselab:adapt -->\nold\n<!-- /cselab:adapt -->\n"
                    "<!-- cselab:adapt-seeds -->\n<!-- /cselab:adapt-seeds -->\n")
    with pytest.raises(RenderError, match="no document has the block <!-- cselab:adapt -->"):
        render(tmp_path, [readme], makers)
    assert "old" in readme.read_text()
    changed = render(tmp_path, [readme, docs], makers)
    assert set(changed) == {readme, docs} and "old" in readme.read_text(), "render itself writes nothing"
    readme_text, docs_text = changed[readme][1], changed[docs][1]
    assert "old" not in readme_text and "old" not in docs_text
    assert "| 83.30 |" in docs_text.split("<!-- cselab:adapt -->")[1].split("<!-- /cselab:adapt -->")[0]
    assert "83.40 ± 0.14" in readme_text.split("<!-- cselab:adapt-seeds -->")[1], "mean ± sample std of 83.3, 83.5"
    assert "| 83.30 |" not in readme_text, "the README holds the seed summary only"


def test_every_run_adapt_row_is_a_valid_adapt_run(tmp_path):
    """The rows of lab/adapt_protocol/run_adapt.sh, captured through a stand-in `python`, load as adapt configs."""
    import os
    import subprocess
    import sys

    calls = tmp_path / "calls.jsonl"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\n"
                    f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "RESULTS": str(tmp_path / "none.jsonl")}
    # a copy of the scripts, run in an empty tree: each row clears its run directory (rm -rf runs/adapt/ROW), which
    # must never touch the checkout's own runs
    tree = tmp_path / "tree"
    for name in ("adapt_protocol/run_adapt.sh", "protocol/rows.sh"):
        (tree / "lab" / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / "lab" / name).write_text((REPO / "lab" / name).read_text())
    (tmp_path / "tree" / "runs" / "adapt" / "keep").mkdir(parents=True)
    subprocess.run(["bash", str(tree / "lab" / "adapt_protocol" / "run_adapt.sh")], env=env, check=True,
                   capture_output=True)
    assert (tmp_path / "tree" / "runs" / "adapt" / "keep").is_dir(), "only the rows' own directories are cleared"
    runs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert runs[0] == ["-m", "cselab.cli", "data", "indomain"]
    # rows record (--row); the -D rows' teachers are rebuilt first where their directories are missing (no --row)
    trains = [r for r in runs[1:] if r[:3] == ["-m", "cselab.cli", "train"] and "--row" in r]
    rebuilt = [r for r in runs[1:] if "--row" not in r]
    assert len(trains) >= 10 and all(r[2] in ("seeds", "ensemble", "train") for r in rebuilt)
    assert all("runs/adapt/rebuilt.jsonl" in r for r in rebuilt if r[2] != "ensemble"), "rebuilds record elsewhere"
    names = []
    for args in trains:
        config_file = args[args.index("--config") + 1]
        names.append(args[args.index("--row") + 1])
        overrides = [a for a in args[3:] if "=" in a and not a.startswith("--")]
        config = load_config(REPO / config_file, overrides)
        assert config.protocol == "adapt" and config.train.output_dir == f"runs/adapt/{names[-1]}"
    assert len(set(names)) == len(names)


def _tables_after(text: str, caption: str) -> list[dict[str, str]]:
    """The rows of the Markdown table that follows ``caption``."""
    lines = text.split(caption, 1)[1].strip("\n").splitlines()
    table = []
    for line in lines[1:] if not lines[0].startswith("|") else lines:
        if not line.startswith("|"):
            break
        table.append(line)
    return _cells(table)


def test_adapt_seed_summary_pairs_against_the_baseline_and_the_checkpoint():
    from scipy import stats

    tasks = ["sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part", "stsb", "sts17-en"]
    rng = random.Random(3)
    checkpoint = {"protocol": "adapt", "row": "checkpoint", "method": "checkpoint", "variant": "untouched",
                  "seed": None, "scores": {**{t: round(rng.uniform(70, 90), 2) for t in tasks}, "stsb_dev_best": 86.72}}
    runs = {(m, s): {t: round(rng.uniform(70, 90), 2) for t in tasks} for m in ("simcse", "tncse") for s in (1, 2, 3)}
    records = [checkpoint, *(_record("stsb-train-minus-all-eval", [], sc, method=m, seed=s)
                             for (m, s), sc in runs.items())]
    records.append(_record("default", [], runs[("simcse", 1)], method="simcse++"))  # one seed: no summary
    own = {s: {t: round(rng.uniform(70, 90), 2) for t in tasks} for s in (1, 2, 3)}  # a method with its own text
    records += [_record("parallel-de", [], own[s], method="ifcl", seed=s) for s in (1, 2, 3)]
    records.append(_record("parallel-de", [], runs[("simcse", 1)], seed=1))  # one baseline seed there: too few to pair
    b2_rows, general, _ = re.split(r"\n\n(?=\*\*Training text)", adapt_table(records))
    assert _cells(b2_rows.split("\n\n")[1].splitlines())[0]["method"] == "checkpoint", "the reference row comes first"
    assert "checkpoint" in general and "Over seeds" not in b2_rows
    b2 = adapt_seeds_table(records, baseline="simcse")
    assert "`default`" not in b2, "a training text without several seeds has no summary"
    b2, own_text = re.split(r"\n\n(?=\*\*Training text)", b2)
    row = next(r for r in _tables_after(own_text, "Paired t-tests over matched seeds (two-sided):")
               if r["B"].startswith("simcse") and r["score"] == "STS-B")
    want = stats.ttest_rel([own[s]["stsb"] for s in (1, 2, 3)], [runs[("simcse", s)]["stsb"] for s in (1, 2, 3)])
    assert row["B"] == "simcse (on `stsb-train-minus-all-eval`)", "paired with the baseline on the text it ran on"
    assert row["t"] == f"{want.statistic:.2f}" and row["p"] == f"{want.pvalue:.4f}"

    summary = {row["configuration"]: row for row in _tables_after(b2, "Over seeds (mean ± sample std):")}
    tn = [runs[("tncse", s)]["stsb"] for s in (1, 2, 3)]
    mean, sd = sum(tn) / 3, (sum((v - sum(tn) / 3) ** 2 for v in tn) / 2) ** 0.5
    assert summary["tncse"]["STS-B"] == f"{mean:.2f} ± {sd:.2f}" and summary["tncse"]["seeds"] == "1, 2, 3"

    tests = {(r["A"], r["B"].split(" ")[0], r["score"]): r
             for r in _tables_after(b2, "Paired t-tests over matched seeds (two-sided):")}
    si = [runs[("simcse", s)]["stsb"] for s in (1, 2, 3)]
    want = stats.ttest_rel(tn, si)
    row = tests[("tncse", "simcse", "STS-B")]
    assert row["t"] == f"{want.statistic:.2f}" and row["p"] == f"{want.pvalue:.4f}" and row["df"] == "2"
    assert ("simcse", "simcse", "STS-B") not in tests, "the baseline is not paired with itself"
    # against the checkpoint: a one-sample t-test of the differences
    avg = [sum(runs[("simcse", s)].values()) / 7 for s in (1, 2, 3)]
    want = stats.ttest_1samp([a - sum(checkpoint["scores"][t] for t in tasks) / 7 for a in avg], 0.0)
    row = tests[("simcse", "checkpoint", "avg held-out (7)")]
    assert abs(float(row["t"]) - want.statistic) < 0.02 and abs(float(row["p"]) - want.pvalue) < 2e-3


def test_adapt_seed_summary_pairs_each_configuration_with_its_own_checkpoint():
    from scipy import stats

    tasks = ["sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part", "stsb", "sts17-en"]
    rng = random.Random(5)

    def checkpoint(backbone):
        return {"protocol": "adapt", "row": "checkpoint", "method": "checkpoint", "variant": backbone, "seed": None,
                "backbone": backbone,
                "scores": {**{t: round(rng.uniform(70, 90), 2) for t in tasks}, "stsb_dev_best": 86.0}}

    minilm, mpnet = checkpoint("all-MiniLM-L6-v2"), checkpoint("all-mpnet-base-v2")
    records = [minilm, mpnet]
    stsb = {}
    for method, backbone in [("simcse", "all-mpnet-base-v2"), ("distill", "runs/adapt/x-seed2/best"),
                             ("ifcl", "some-other-model")]:
        for seed in (1, 2, 3):
            scores = {t: round(rng.uniform(70, 90), 2) for t in tasks}
            stsb.setdefault(method, []).append(scores["stsb"])
            records.append({**_record("default", [], scores, method=method, seed=seed), "backbone": backbone})
    table = adapt_seeds_table(records)
    tests = {(r["A"], r["B"], r["score"]): r
             for r in _tables_after(table, "Paired t-tests over matched seeds (two-sided):")}
    # the mpnet run against the mpnet checkpoint, named; a student started from a trained run against the protocol's
    for method, ref, label in [("simcse", mpnet, "checkpoint all-mpnet-base-v2 (one model: one-sample t-test)"),
                               ("distill", minilm, "checkpoint (one model: one-sample t-test)")]:
        want = stats.ttest_1samp([v - ref["scores"]["stsb"] for v in stsb[method]], 0.0)
        row = tests[(method, label, "STS-B")]
        assert row["t"] == f"{want.statistic:.2f}" and row["p"] == f"{want.pvalue:.4f}"
    # a backbone without a checkpoint row is paired with no other model's checkpoint
    assert not [key for key in tests if key[0] == "ifcl"]
    assert len([k for k in tests if k[0] == "simcse"]) == 2  # STS-B and the average, against its checkpoint only
    # both checkpoints head the per-run table
    rows = _tables_after(adapt_table(records), "every column held out)")
    assert [r["method"] for r in rows[:3]] == ["checkpoint", "checkpoint", "simcse"]
