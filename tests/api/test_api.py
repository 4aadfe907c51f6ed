"""The public Python API (``import cselab``) and the quickstart example, on tiny random models."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import cselab
from cselab.errors import CselabError
from tests.helpers import REPO_ROOT

ROOT = REPO_ROOT
SENTENCES = ["a man plays the guitar .", "the dog runs in the park", "two women eat food"]


def _cls_by_hand(model_dir: Path, texts: list[str]) -> np.ndarray:
    """First-token state of the last layer, one sentence at a time, straight from transformers."""
    from transformers import AutoModel, AutoTokenizer

    tok, backbone = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    rows = []
    for text in texts:
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            rows.append(backbone(**ids).last_hidden_state[0, 0].numpy())
    return np.stack(rows)


def test_public_names_are_exported():
    assert {"load_model", "train", "evaluate", "SentenceEncoder"} <= set(cselab.__all__)


def test_encode_returns_numpy_like_sentence_transformers(tiny_bert_dir):
    model = cselab.load_model(tiny_bert_dir, pooler="cls")
    expected = _cls_by_hand(tiny_bert_dir, SENTENCES)
    out = model.encode(SENTENCES, batch_size=2)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, 32)
    assert np.abs(out - expected).max() <= 1e-5
    one = model.encode(SENTENCES[1])
    assert one.shape == (32,) and np.abs(one - expected[1]).max() <= 1e-5
    unit = model.encode(SENTENCES, normalize=True)
    assert np.abs(unit - expected / np.linalg.norm(expected, axis=1, keepdims=True)).max() <= 1e-5
    tensor = model.encode(SENTENCES, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and np.abs(tensor.numpy() - expected).max() <= 1e-5
    assert model.kind == "encoder" and model.embedding_dim == 32


def test_encode_rejects_non_strings(tiny_bert_dir):
    with pytest.raises(CselabError, match="string"):
        cselab.load_model(tiny_bert_dir).encode([1, 2])


def _stsb_test_by_hand(home: Path, model) -> float:
    """Spearman x 100 of the cosines of the STS-B test pairs, the file read line by line here."""
    pairs = [line.split("\t") for line in (home / "sts" / "stsb" / "sts-test.csv").read_text().splitlines() if line]
    a = model.encode([p[5] for p in pairs], normalize=True)
    b = model.encode([p[6] for p in pairs], normalize=True)
    return 100 * spearmanr((a * b).sum(1), [float(p[4]) for p in pairs]).statistic


def _distinct_sts_home(home: Path, monkeypatch) -> Path:
    from tests.helpers import write_distinct_sts_home

    monkeypatch.setenv("CSELAB_HOME", str(write_distinct_sts_home(home)))
    return home


def test_evaluate_scores_sts_like_scipy(tiny_bert_dir, tmp_path, monkeypatch):
    home = _distinct_sts_home(tmp_path / "home", monkeypatch)
    model = cselab.load_model(tiny_bert_dir, pooler="mean")
    scores = cselab.evaluate(model, ["stsb"])
    assert list(scores) == ["stsb"] and scores["stsb"]["test"] == pytest.approx(_stsb_test_by_hand(home, model),
                                                                                  abs=0.006)
    assert cselab.evaluate(str(tiny_bert_dir), ["stsb"], splits=("dev", "test"))["stsb"].keys() == {"dev", "test"}


def test_train_from_a_mapping_returns_the_saved_model(tiny_bert_dir, sts_home, tmp_path):
    from tests.helpers import write_corpus

    config = {"method": "simcse", "model": {"backbone": str(tiny_bert_dir), "pooler": "cls", "max_length": 16},
              "data": {"corpus": str(write_corpus(tmp_path / "corpus.txt"))},
              "train": {"output_dir": str(tmp_path / "run"), "batch_size": 8, "eval_every": 2}}
    best = cselab.train(config, "train.max_steps=2", "train.lr=1e-3", progress=False)
    assert best == tmp_path / "run" / "best" and (best / "modules.json").is_file()
    card = (best / "README.md").read_text()
    assert "method: simcse" in card and "| stsb |" in card  # the run's test scores reached the model card
    with pytest.raises(CselabError):
        cselab.train(config, "train.no_such_key=1", progress=False)


def test_quickstart_example_runs(tiny_bert_dir, tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers", reason="the example's last step uses sentence-transformers")
    from tests.helpers import write_corpus

    _distinct_sts_home(tmp_path / "home", monkeypatch)
    spec = importlib.util.spec_from_file_location("quickstart", ROOT / "examples" / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["quickstart"] = module
    spec.loader.exec_module(module)
    out = module.main(["--backbone", str(tiny_bert_dir), "--corpus", str(write_corpus(tmp_path / "c.txt")),
                       "--steps", "2", "--output", str(tmp_path / "qs")])
    assert out["model_dir"] == tmp_path / "qs" / "best"
    assert np.abs(out["st_embeddings"] - out["embeddings"]).max() <= 1e-5
    # the score the example prints is the saved model's (its accuracy against scipy: the test above; a
    # CLS-pooled random model has near-equal cosines, so here float noise may reorder ranks)
    assert out["scores"] == cselab.evaluate(out["model_dir"], ["stsb"])
