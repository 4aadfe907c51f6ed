"""A record names the code a process started with, not the code checked out when the record is written."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from cselab import provenance


def test_git_commit_is_read_once_per_process(monkeypatch):
    head = {"commit": "a" * 40}

    def fake_run(cmd, **kwargs):
        out = head["commit"] + "\n" if "rev-parse" in cmd else ""  # `git status --porcelain`: a clean tree
        return SimpleNamespace(stdout=out, returncode=0)

    provenance.git_commit.cache_clear()
    monkeypatch.setattr(subprocess, "run", fake_run)
    try:
        assert provenance.git_commit() == "a" * 40  # a run starts (cselab.cli.main, benchmarks/record.py)
        head["commit"] = "b" * 40  # a commit lands while it trains
        assert provenance.git_commit() == "a" * 40
        assert provenance.provenance()["git"] == "a" * 40
    finally:
        provenance.git_commit.cache_clear()
