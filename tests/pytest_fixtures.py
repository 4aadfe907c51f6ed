"""The fixtures of the test suites (``tests/`` and ``lab/tests/``): an empty data home for every test that is not
marked ``network``, tiny model directories and a tiny STS home. Loaded as a pytest plugin by the repository's
``conftest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import build_tiny_model_dir, write_distinct_sts_home, write_sts_home


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-bert"), "bert")


@pytest.fixture(scope="session")
def long_bert_dir(tmp_path_factory):
    """A tiny BERT of tiny_bert_dir's shape (32 wide, its tokenizer) with 512 positions: a student that takes the
    256 tokens of ``cselab adapt``'s passage recipes, so that they are planned as they are shipped (tiny_bert_dir's
    128 positions refuse them)."""
    import torch
    from transformers import BertConfig, BertModel

    from tests.helpers import wordpiece_tokenizer

    path = tmp_path_factory.mktemp("long-bert")
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer()
    BertModel(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, pad_token_id=0, hidden_size=32,
                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def empty_data_home(request, tmp_path_factory, monkeypatch):
    """Every test that is not marked ``network`` sees an EMPTY ``$CSELAB_HOME``, as on a fresh machine, so a
    data home warmed by earlier fetches can never hide a test that silently needs fetched data. Tests that
    need STS data use ``sts_home``; network tests fetch into homes of their own."""
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("CSELAB_HOME", str(tmp_path_factory.mktemp("empty-home")))


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory) -> Path:
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-roberta"), "roberta")


@pytest.fixture(params=["bert", "roberta"])
def tiny_model_dir(request, tiny_bert_dir, tiny_roberta_dir) -> Path:
    return tiny_bert_dir if request.param == "bert" else tiny_roberta_dir


@pytest.fixture
def sts_home(tmp_path, monkeypatch) -> Path:
    home = write_sts_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    return home


@pytest.fixture
def members(tmp_path):
    """A 32-d and a 48-d tiny BERT (different widths, different weights), each saved as a model directory."""
    from cselab.models.encoder import Encoder
    from cselab.models.sentence_model import save_model

    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-a", "bert", seed=1), pooler="cls", max_length=16)
    b = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-b", "bert", seed=2, hidden_size=48), pooler="mean",
                                max_length=16)
    assert (a.hidden_size, b.hidden_size) == (32, 48)
    return a, b, save_model(a, tmp_path / "a"), save_model(b, tmp_path / "b")


@pytest.fixture
def dev_home(tmp_path, monkeypatch):
    """A data home with a tiny STS-B of distinct sentences; returns the rows of its dev CSV."""
    import csv

    home = write_distinct_sts_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    with open(home / "sts" / "stsb" / "sts-dev.csv", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
