"""The adapt tests' shared fixtures: a tiny teacher wider than the student, and a data home where it is fetched."""

from __future__ import annotations

import shutil

import pytest

from tests.adaptation.test_adapt_distill import write_general
from tests.helpers import build_tiny_model_dir


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    """A 48-wide teacher: wider than the 32-wide student, as all-mpnet-base-v2 is than all-MiniLM-L6-v2."""
    return build_tiny_model_dir(tmp_path_factory.mktemp("teacher"), "bert", seed=7, hidden_size=48)


@pytest.fixture(scope="session")
def long_bert_dir(tmp_path_factory):
    """A tiny BERT of tiny_bert_dir's shape (32 wide, its tokenizer) with 512 positions: a student that takes the
    256 tokens of the recipes' passages, so that they are planned as they are shipped (tiny_bert_dir's 128 positions
    refuse them)."""
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


@pytest.fixture
def home_with_teacher(tmp_path, monkeypatch, teacher_dir):
    """A data home where the default teacher (all-mpnet-base-v2) and the default corpus are 'fetched': the tiny
    teacher under its name, 300 general sentences as the corpus."""
    home = tmp_path / "home"
    shutil.copytree(teacher_dir, home / "models" / "all-mpnet-base-v2")
    write_general(home / "corpus" / "default.txt", 300)
    monkeypatch.setenv("CSELAB_HOME", str(home))
    return home
