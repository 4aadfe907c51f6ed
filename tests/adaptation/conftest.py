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


@pytest.fixture
def home_with_teacher(tmp_path, monkeypatch, teacher_dir):
    """A data home where the default teacher (all-mpnet-base-v2) and the default corpus are 'fetched': the tiny
    teacher under its name, 300 general sentences as the corpus."""
    home = tmp_path / "home"
    shutil.copytree(teacher_dir, home / "models" / "all-mpnet-base-v2")
    write_general(home / "corpus" / "default.txt", 300)
    monkeypatch.setenv("CSELAB_HOME", str(home))
    return home
