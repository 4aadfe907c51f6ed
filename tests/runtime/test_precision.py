"""precision: auto — the decision from a (faked) matmul probe, its per-machine cache, and its record in a run."""

import json

import pytest
import torch

from cselab.config.run_config import load_config
from cselab.runtime import precision as precision_module
from cselab.runtime.precision import BF16_MIN_SPEEDUP, MatmulShape, probe_matmul, resolve_precision
from cselab.training.trainer import Trainer
from tests.helpers import write_corpus

SHAPE = MatmulShape(tokens=64, hidden=32, intermediate=128)
CPU = torch.device("cpu")


class FakeProbe:
    """Returns fixed GFLOP/s and counts its calls (so the cache can be seen to spare them)."""

    def __init__(self, fp32: float, bf16: float) -> None:
        self.rates, self.calls = {"fp32": fp32, "bf16": bf16}, 0

    def __call__(self, shape: MatmulShape) -> dict[str, float]:
        self.calls += 1
        return dict(self.rates)


@pytest.mark.parametrize(("fp32", "bf16", "expected"), [
    (100.0, 500.0, "bf16"),   # an EPYC-like chip: bf16 5x faster
    (328.0, 167.0, "fp32"),   # issue 15's Xeon without AMX: bf16 slower
    (100.0, 115.0, "fp32"),   # a 1.15x matmul gain is eaten by the casts
    (100.0, 120.0, "bf16"),   # exactly the threshold
])
def test_auto_on_cpu_follows_the_probe(tmp_path, fp32, bf16, expected):
    probe = FakeProbe(fp32, bf16)
    choice = resolve_precision("auto", CPU, SHAPE, probe=probe, cache_path=tmp_path / "cache.json")
    assert choice.precision == expected and probe.calls == 1
    assert choice.probe["bf16_speedup"] == pytest.approx(bf16 / fp32)
    assert f"{bf16 / fp32:.2f}x" in choice.reason and "measured now" in choice.reason
    assert BF16_MIN_SPEEDUP == 1.2


def test_probe_result_is_cached_per_machine(tmp_path, monkeypatch):
    cache = tmp_path / "cache.json"
    first = FakeProbe(100.0, 500.0)
    assert resolve_precision("auto", CPU, SHAPE, probe=first, cache_path=cache).precision == "bf16"
    # same machine: the cache answers, the probe is not run again (even a probe that would now say fp32)
    second = FakeProbe(500.0, 100.0)
    again = resolve_precision("auto", CPU, SHAPE, probe=second, cache_path=cache)
    assert (again.precision, second.calls) == ("bf16", 0) and "cached" in again.reason
    # another CPU model, thread count or shape is another machine: probed again, both kept
    monkeypatch.setattr(precision_module, "cpu_model_name", lambda: "Other CPU")
    assert resolve_precision("auto", CPU, SHAPE, probe=second, cache_path=cache).precision == "fp32"
    assert second.calls == 1
    assert len(json.loads(cache.read_text())) == 2
    other_shape = MatmulShape(tokens=128, hidden=32, intermediate=128)
    resolve_precision("auto", CPU, other_shape, probe=second, cache_path=cache)
    assert second.calls == 2


def test_unreadable_cache_means_probe_again(tmp_path):
    cache = tmp_path / "cache.json"
    cache.write_text("{not json")
    probe = FakeProbe(100.0, 500.0)
    assert resolve_precision("auto", CPU, SHAPE, probe=probe, cache_path=cache).precision == "bf16"
    assert probe.calls == 1 and json.loads(cache.read_text())


def test_explicit_precision_and_gpu_need_no_probe(tmp_path):
    probe = FakeProbe(1.0, 1.0)
    for name in ("fp32", "bf16", "fp16"):
        assert resolve_precision(name, CPU, SHAPE, probe=probe).precision == name
    gpu = torch.device("cuda", 0)
    assert resolve_precision("auto", gpu, SHAPE, probe=probe, gpu_bf16=lambda: True).precision == "bf16"
    assert resolve_precision("auto", gpu, SHAPE, probe=probe, gpu_bf16=lambda: False).precision == "fp32"
    assert probe.calls == 0 and not (tmp_path / "cache.json").exists()


def test_real_probe_measures_both_precisions():
    rates = probe_matmul(MatmulShape(tokens=16, hidden=8, intermediate=32), seconds=0.0)
    assert set(rates) == {"fp32", "bf16"} and all(r > 0 for r in rates.values())


def test_run_records_what_auto_chose_and_why(tiny_bert_dir, sts_home, tmp_path, monkeypatch):
    probe = FakeProbe(100.0, 80.0)
    real = precision_module.resolve_precision
    monkeypatch.setattr("cselab.training.trainer.resolve_precision",
                        lambda *a, **k: real(*a, **k, probe=probe))
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = load_config(None, [
        f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", f"train.output_dir={tmp_path / 'run'}",
        "train.batch_size=8", "train.max_steps=2", "train.eval_every=2", "model.max_length=16",
        "train.precision=auto",
    ])
    trainer = Trainer(config)
    assert trainer.precision == "fp32" and probe.calls == 1
    # the probe ran at this run's shapes: 2 views x 8 sentences x 16 tokens through the tiny BERT's FFN
    key = trainer.precision_choice.probe["key"]
    assert key.endswith("|256x32x64")
    result = trainer.run()
    recorded = json.loads((tmp_path / "run" / "precision.json").read_text())
    assert recorded["requested"] == "auto" and recorded["precision"] == "fp32"
    assert "0.80x" in recorded["reason"]
    assert result.precision == "fp32"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["precision"] == "fp32"
    # the cache went to the (empty, per-test) data home
    assert (sts_home / precision_module.CACHE_FILE).is_file()


def test_encode_and_eval_with_precision_auto(tiny_bert_dir, sts_home, tmp_path, monkeypatch):
    import numpy as np

    from cselab.evaluation.model_eval import encode_file, evaluate_model
    from cselab.models.encoder import Encoder

    probe = FakeProbe(100.0, 400.0)
    monkeypatch.setattr(precision_module, "probe_matmul", probe)
    sentences = ["a man plays the guitar .", "the dog", "two women walk in the park with a big red dog ."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    encode_file(str(tiny_bert_dir), tmp_path / "in.txt", tmp_path / "auto.npy", pooler="mean", precision="auto")
    encode_file(str(tiny_bert_dir), tmp_path / "in.txt", tmp_path / "fp32.npy", pooler="mean")
    assert probe.calls == 1
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = torch.cat([encoder.encode([s]) for s in sentences]).numpy()
    fp32 = torch.cat([encoder.encode([s]) for s in sentences]).numpy()
    # auto chose bf16 (the fake probe says 4x): the rows are the bf16 autocast embeddings, not the fp32 ones
    np.testing.assert_allclose(np.load(tmp_path / "auto.npy"), bf16, atol=1e-2)
    np.testing.assert_allclose(np.load(tmp_path / "fp32.npy"), fp32, atol=1e-5)
    assert np.abs(np.load(tmp_path / "auto.npy") - fp32).max() > 1e-4
    # the same batch size is the same probe shape: the cached answer serves eval too
    report = evaluate_model(str(tiny_bert_dir), pooler="mean", tasks=["stsb"], splits=["dev"], precision="auto",
                            batch_size=64, output=tmp_path / "eval.json")
    assert report["precision"]["precision"] == "bf16" and "cached" in report["precision"]["reason"]
    assert probe.calls == 1


def test_unknown_inference_precision_is_one_line(tiny_bert_dir):
    from cselab.errors import CselabError
    from cselab.models.encoder import Encoder
    from cselab.runtime.precision import inference_precision

    with pytest.raises(CselabError, match="unknown precision 'fp8'"):
        inference_precision("fp8", Encoder.from_pretrained(tiny_bert_dir, pooler="mean"), 8)


# -- presets moved from bf16 to auto: what ran is compared, not the word ---------------------------------
def _auto_config(tiny_bert_dir, tmp_path, precision="auto"):
    return load_config(None, [f"model.backbone={tiny_bert_dir}", f"train.output_dir={tmp_path / 'run'}",
                              "train.batch_size=8", "model.max_length=16", f"train.precision={precision}"])


@pytest.mark.parametrize(("fp32", "bf16", "recorded_request", "recorded_ran", "agrees"), [
    (100.0, 500.0, "bf16", "bf16", True),    # preset bf16 -> auto on a chip where auto picks bf16
    (328.0, 167.0, "bf16", "bf16", False),   # ... on a chip where auto picks fp32: not the same computation
    (328.0, 167.0, "fp32", None, True),      # an old record without precision.json: the request is what ran
    (100.0, 500.0, "auto", "fp32", False),   # made where auto meant fp32, here it means bf16
    (100.0, 500.0, "auto", "bf16", True),
    (100.0, 500.0, "auto", None, False),     # auto whose outcome was not kept: cannot be shown to agree
])
def test_auto_agrees_with_a_record_by_what_ran(tiny_bert_dir, tmp_path, monkeypatch, fp32, bf16,
                                                recorded_request, recorded_ran, agrees):
    monkeypatch.setattr(precision_module, "probe_matmul", FakeProbe(fp32, bf16))
    config = _auto_config(tiny_bert_dir, tmp_path)
    assert precision_module.precision_agrees(recorded_request, recorded_ran, config) is agrees


def test_explicit_precisions_agree_without_a_probe(tiny_bert_dir, tmp_path, monkeypatch):
    def no_probe(shape):
        raise AssertionError("an explicit precision needs no probe")

    monkeypatch.setattr(precision_module, "probe_matmul", no_probe)
    config = _auto_config(tiny_bert_dir, tmp_path, "bf16")
    assert precision_module.precision_agrees("bf16", "bf16", config)
    assert not precision_module.precision_agrees("fp32", None, config)
    assert precision_module.precision_agrees(None, None, config)  # a record from before the key existed


def test_resume_accepts_bf16_to_auto_only_where_auto_picks_bf16(tiny_bert_dir, tmp_path, monkeypatch):
    from cselab.training.run_directory import check_resume_config

    run = tmp_path / "run"
    run.mkdir()
    saved = _auto_config(tiny_bert_dir, tmp_path, "bf16")
    (run / "config.yaml").write_text(__import__("yaml").safe_dump(saved.model_dump(mode="json")))
    (run / precision_module.PRECISION_FILE).write_text(json.dumps({"requested": "bf16", "precision": "bf16"}))
    resumed = _auto_config(tiny_bert_dir, tmp_path)
    monkeypatch.setattr(precision_module, "probe_matmul", FakeProbe(100.0, 500.0))
    assert check_resume_config(run, resumed) == {}
    (tmp_path / "home_fp32").mkdir()
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home_fp32"))  # a fresh probe cache: another machine
    monkeypatch.setattr(precision_module, "probe_matmul", FakeProbe(328.0, 167.0))
    with pytest.raises(Exception, match="train.precision: 'bf16' -> 'auto'"):
        check_resume_config(run, resumed)
