"""A record names the code a process started with, not the code checked out when the record is written."""

from __future__ import annotations

import subprocess
import sys
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
        assert provenance.git_commit() == "a" * 40  # a run starts (cselab.cli.main, lab/record.py)
        head["commit"] = "b" * 40  # a commit lands while it trains
        assert provenance.git_commit() == "a" * 40
        assert provenance.provenance()["git"] == "a" * 40
    finally:
        provenance.git_commit.cache_clear()


def test_importing_cselab_pins_the_commit():
    """Every entry point (the CLI, the benchmark scripts, a notebook) imports the package before it can train, and
    the import reads the commit; a fresh interpreter shows it cached right after `import cselab`."""
    probe = "import cselab, cselab.provenance as p; print(p.git_commit.cache_info().currsize)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"
