"""Provenance: the code version is cselab's own (its checkout's commit, or the installed version), read once per
process when first asked, never at import, and never the commit of a repository that merely contains cselab."""

from __future__ import annotations

import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np

from cselab import provenance
from tests.helpers import REPO_ROOT


def test_the_code_version_is_read_once_per_process(monkeypatch):
    head = {"commit": "a" * 40}

    def fake_run(cmd, **kwargs):
        out = head["commit"] + "\n" if "rev-parse" in cmd else ""  # `git status --porcelain`: a clean tree
        return SimpleNamespace(stdout=out, returncode=0)

    provenance.code_version.cache_clear()
    monkeypatch.setattr(provenance, "source_checkout", lambda: REPO_ROOT)
    monkeypatch.setattr(subprocess, "run", fake_run)
    try:
        assert provenance.code_version() == "a" * 40  # a run starts
        head["commit"] = "b" * 40  # a commit lands while it trains
        assert provenance.code_version() == "a" * 40
        assert provenance.provenance()["git"] == "a" * 40
    finally:
        provenance.code_version.cache_clear()


def test_this_checkout_is_named_by_its_own_commit():
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert provenance.source_checkout() == REPO_ROOT
    probe = "from cselab.provenance import code_version; print(code_version())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip().split("+")[0] == head


def test_importing_cselab_starts_no_subprocess():
    """`import cselab` asks no git (nor anything else) about anything."""
    probe = ("import subprocess\n"
             "calls = []\n"
             "real = subprocess.Popen.__init__\n"
             "def spy(self, *a, **k):\n"
             "    calls.append(a[0] if a else k.get('args'))\n"
             "    real(self, *a, **k)\n"
             "subprocess.Popen.__init__ = spy\n"
             "import cselab, cselab.cli, cselab.provenance as p\n"
             "print(len(calls), p.code_version.cache_info().currsize)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0 0", done.stdout + done.stderr


def test_an_installed_cselab_inside_a_users_repository_names_its_own_version(tmp_path):
    """A user's project under git, with cselab installed in a virtualenv inside it (site-packages/cselab): records
    name cselab's version, not the user's commit."""
    project = tmp_path / "project"
    site = project / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    shutil.copytree(REPO_ROOT / "src" / "cselab", site / "cselab", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "train.py").write_text("print('mine')\n")
    env = {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x",
           "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "train.py", ".venv"], ["commit", "-qm", "mine"]):
        subprocess.run(["git", "-C", str(project), *cmd], check=True, env=env, capture_output=True)
    theirs = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    probe = (f"import sys; sys.path.insert(0, {str(site)!r}); import cselab.provenance as p; "
             "print(p.__file__); print(p.source_checkout()); print(p.code_version())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=project)
    where, checkout, version = done.stdout.split()
    assert where.startswith(str(site)) and checkout == "None"
    assert version == f"cselab-{provenance.package_version()}" and theirs not in version


def test_the_machine_names_the_installed_libraries_and_leaves_out_missing_ones():
    """The versions come from the packages themselves (their ``__version__``); a distribution that is not installed
    is not named, rather than named with a placeholder."""
    import sklearn
    import transformers

    packages = provenance.machine()["packages"]
    assert packages["transformers"] == transformers.__version__
    assert packages["scikit-learn"] == sklearn.__version__
    assert provenance.package_versions(("numpy", "no-such-distribution-cselab")) == {"numpy": np.__version__}
