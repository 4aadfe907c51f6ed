"""lab/adapt_protocol/adapt_checkpoint.py: the adaptation protocol's reference row, scored once and recorded once.

The expected scores are computed here from the model's own ``encode`` with numpy cosines and scipy's Spearman
over the STS-B CSVs, not with cselab's evaluator."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cselab.models.encoder import Encoder
from cselab.models.sentence_model import save_model
from lab.adapt_protocol import adapt_checkpoint
from tests.helpers import build_tiny_model_dir, write_distinct_sts_home


def _spearman_on(model, csv_path: Path) -> float:
    with open(csv_path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    x = model.encode([r[5] for r in rows]).numpy().astype(np.float64)
    y = model.encode([r[6] for r in rows]).numpy().astype(np.float64)
    cos = (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))
    return 100 * stats.spearmanr(cos, [float(r[4]) for r in rows]).statistic


def test_the_checkpoint_row_is_scored_once_with_its_own_pooling(tmp_path, monkeypatch, capsys):
    home = write_distinct_sts_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    monkeypatch.delenv("FORCE", raising=False)
    model = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf", "bert", seed=4), pooler="mean", max_length=32)
    path = save_model(model, tmp_path / "checkpoint")
    script = adapt_checkpoint
    results = tmp_path / "adapt.jsonl"

    assert script.main(["--model", str(path), "--results", str(results)]) == 0
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    dev = _spearman_on(model, home / "sts" / "stsb" / "sts-dev.csv")
    test = _spearman_on(model, home / "sts" / "stsb" / "sts-test.csv")
    assert record["scores"]["stsb_dev_start"] == record["scores"]["stsb_dev_best"] == pytest.approx(dev, abs=0.006)
    assert record["scores"]["stsb"] == pytest.approx(test, abs=0.006)
    assert (record["method"], record["row"], record["seed"], record["steps"]) == ("checkpoint", "checkpoint-checkpoint",
                                                                                None, 0)
    assert record["backbone"] == str(path)
    assert record["variant"] == "checkpoint, its own pooling, untouched" and "git" in record
    # recorded once: a second call scores nothing and adds nothing; FORCE=1 scores it again
    capsys.readouterr()
    assert script.main(["--model", str(path), "--results", str(results)]) == 0
    assert capsys.readouterr().out == f"== checkpoint {path}: already recorded\n"
    assert len(results.read_text().splitlines()) == 1
    monkeypatch.setenv("FORCE", "1")
    assert script.main(["--model", str(path), "--results", str(results)]) == 0
    assert f"STS-B dev {record['scores']['stsb_dev_best']}" in capsys.readouterr().out
    # another model is another row, recorded beside the first
    monkeypatch.delenv("FORCE")
    other = save_model(Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf2", "bert", seed=5), pooler="mean",
                                               max_length=32), tmp_path / "other")
    assert script.main(["--model", str(other), "--results", str(results)]) == 0
    rows = [json.loads(line)["row"] for line in results.read_text().splitlines()]
    assert rows[0] == "checkpoint-checkpoint" and rows[-1] == "checkpoint-other"
