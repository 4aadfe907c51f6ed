"""The +UC script of the adaptation protocol (``lab/adapt_protocol/adapt_uc.py``) and the suite's scoring of a
protocol row's +UC ensemble (``lab/domain_study/score_suite.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cselab.errors import CselabError
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model, save_model
from lab.adapt_protocol import adapt_uc
from lab.domain_study import score_suite
from tests.helpers import build_tiny_model_dir, row_cosines


def test_adapt_uc_records_the_combine_and_combines_other_seeds(members, dev_home, tmp_path):
    _, _, path_a, path_b = members
    results = tmp_path / "adapt.jsonl"
    lines = []
    for seed in (1, 2):
        run = tmp_path / "runs" / ("row" if seed == 1 else "row-seed2")
        save_model(load_model(path_a, device="cpu"), run / "best")
        lines.append({"protocol": "adapt", "method": "simcse", "variant": "in-domain", "seed": seed,
                      "config": {"effective": {"train": {"output_dir": str(run)}}}, "scores": {"stsb_dev_best": 1.0},
                      **({"row": "row"} if seed == 1 else {})})
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    args = ["row", "--outside", str(path_b), "--combine", "concat", "--grid", "0,0.5", "--results", str(results)]
    assert adapt_uc.main(args) == 0
    record = json.loads(results.read_text().splitlines()[-1])
    assert record["row"] == "row+uc-b-concat" and record["ensemble"]["combine"] == "concat"
    assert record["variant"] == "in-domain; + b (concat), w chosen on dev", "w stays out: seeds share a variant"
    assert record["ensemble"]["weight"] in (0.0, 0.5)
    assert load_model(record["ensemble"]["saved"], device="cpu").combine == "concat"
    # --seed 2: the same configuration's seed-2 run, recorded as the same row with seed 2, saved beside that run
    assert adapt_uc.main([*args, "--seed", "2"]) == 0
    record = json.loads(results.read_text().splitlines()[-1])
    assert (record["row"], record["seed"]) == ("row+uc-b-concat", 2)
    assert record["ensemble"]["model"] == str(tmp_path / "runs" / "row-seed2" / "best")
    assert Path(record["ensemble"]["saved"]).parent == tmp_path / "runs"
    count = len(results.read_text().splitlines())
    assert adapt_uc.main([*args, "--seed", "2"]) == 0 and len(results.read_text().splitlines()) == count
    with pytest.raises(CselabError, match="no seed 3"):
        adapt_uc.main([*args, "--seed", "3"])


def test_score_suite_builds_a_protocol_rows_uc_ensemble_once(members, dev_home, tmp_path):
    """`score_suite.py --protocol-row ROW+uc-OUTSIDE`: the row's model summed with the outside checkpoint (a name in
    $CSELAB_HOME/models) at the w that STS-B dev prefers (scipy's Spearman over the grid, computed here), saved
    beside the row's run; the +UC record goes to a scratch file, the protocol's records are untouched, and a second
    call finds the saved ensemble instead of building it again."""
    import os

    a, _, path_a, _ = members
    c = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-c", "bert", seed=5), pooler="mean", max_length=16)
    save_model(c, Path(os.environ["CSELAB_HOME"]) / "models" / "tiny-c")
    runs = tmp_path / "runs"
    save_model(load_model(path_a, device="cpu"), runs / "row" / "best")
    (runs / "row" / "results.json").write_text(
        json.dumps({"config": {"effective": {"data": {"corpus": "parallel-de"}}}}))
    records = tmp_path / "adapt.jsonl"
    records.write_text(json.dumps({"protocol": "adapt", "row": "row", "method": "simcse", "seed": 1, "scores": {},
                                   "config": {"effective": {"train": {"output_dir": str(runs / "row")}}}}))  # no \n
    before = records.read_text()
    script = score_suite
    name, path, origin = script.protocol_model("row+uc-tiny-c", runs, print, (records,))
    assert (name, path) == ("protocol/row+uc-tiny-c", runs / "row-uc-tiny-c")
    assert origin == {"kind": "protocol-row", "row": "row+uc-tiny-c", "corpus": "parallel-de", "ensemble_of": "row",
                      "outside": "tiny-c"}
    first, second, gold = [r[5] for r in dev_home], [r[6] for r in dev_home], [float(r[4]) for r in dev_home]
    a1, a2, c1, c2 = (np.asarray(m.encode(t).numpy(), dtype=np.float64) for m in (a, c) for t in (first, second))
    grid = [round(0.1 * i, 1) for i in range(11)]
    dev = {w: stats.spearmanr(row_cosines((1 - w) * a1 + w * c1, (1 - w) * a2 + w * c2), gold).statistic for w in grid}
    ensemble_model = load_model(path, device="cpu")
    w = ensemble_model.weights[1]
    assert dev[round(w, 1)] == pytest.approx(max(dev.values()), abs=1e-9)
    np.testing.assert_allclose(ensemble_model.encode(first).numpy(), (1 - w) * a1 + w * c1, atol=1e-5)
    scratch = [json.loads(line) for line in (runs / "uc-scratch.jsonl").read_text().splitlines()]
    assert [r["row"] for r in scratch] == ["row", "row+uc-tiny-c"]
    assert records.read_text() == before
    stamp = (path / "cselab.json").stat().st_mtime_ns
    assert script.protocol_model("row+uc-tiny-c", runs, print, (records,))[1] == path
    assert (path / "cselab.json").stat().st_mtime_ns == stamp


def test_adapt_uc_names_a_trained_outside_model_by_its_run():
    assert adapt_uc._model_name("all-mpnet-base-v2") == "all-mpnet-base-v2"
    assert adapt_uc._model_name("runs/adapt/simcse-mpnet-b1/best") == "simcse-mpnet-b1"
    assert adapt_uc._model_name("runs/adapt/jtcse-indomain/stage2/best") == "jtcse-indomain"
    assert adapt_uc._model_name("/models/ckpt/") == "ckpt"
