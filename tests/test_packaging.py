"""The package outside the repository: the built wheel carries the presets, and an installed cselab lists
them, explains its configuration and resolves a preset from any directory; `make` never installs into a
Python that is not a virtual environment (PEP 668)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

ROOT = REPO_ROOT


def clean_env() -> dict[str, str]:
    """The environment without what would put the source tree on the path instead of the installed package."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def copy_tracked_tree(dest: Path) -> Path:
    """The files git tracks (symbolic links kept as links), so the build never writes into the work tree."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src, dst = ROOT / name, dest / name
        if not src.exists() and not src.is_symlink():  # deleted in the work tree, not yet committed
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to copy the tracked files")
    tree = copy_tracked_tree(tmp_path_factory.mktemp("tree"))
    out = tmp_path_factory.mktemp("wheel")
    # without build isolation: the environment's setuptools (a dev extra) builds it, offline
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(tree),
                    "-w", str(out)], check=True, env=clean_env(), capture_output=True)
    (built,) = out.glob("cselab-*.whl")
    return built


def test_wheel_ships_every_preset_and_template(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for config in ROOT.glob("configs/*/*.yaml"):
            member = f"cselab/presets/{config.parent.name}/{config.name}"
            assert member in names, member
            assert z.read(member) == config.read_bytes()
        assert "cselab/templates/cot_bert.yaml" in names
        figures = "cselab/research/paper_figures.yaml"
        assert z.read(figures) == (ROOT / "src" / figures).read_bytes()
        requires = [line for line in z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
                    .splitlines() if line.startswith("Requires-Dist: torch")]
    # a range, so the torch build already installed (e.g. CUDA) is kept
    assert requires == ["Requires-Dist: torch<3,>=2.6"]


@pytest.mark.slow
def test_installed_wheel_works_from_another_directory(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # the dependencies come from the environment running this test, appended after the venv's own
    # site-packages (what --system-site-packages does, but also when this test itself runs in a venv)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    outer = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(purelib, "outer_environment.pth").write_text("\n".join(outer) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, env=clean_env(), capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def cselab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "cselab"), *args], cwd=elsewhere, env=clean_env(),
                              capture_output=True, text=True)

    where = subprocess.run([str(python), "-c", "import cselab; print(cselab.__file__)"], cwd=elsewhere,
                           env=clean_env(), capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where
    listed = cselab("presets")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(
        f"{p.parent.name}/{p.stem}" for p in ROOT.glob("configs/*/*.yaml"))
    shown = cselab("config", "show", "simcse")
    assert shown.returncode == 0, shown.stderr
    assert "\ntrain.lr=3.0e-05 " in shown.stdout and "method_options.temperature=0.05" in shown.stdout
    helped = cselab("train", "--preset", "simcse/cpu-minilm", "--help")
    assert helped.returncode == 0 and "--preset" in helped.stdout
    # the preset is found (the error is about the override, after the preset was read) and nothing is written
    bad = cselab("train", "--preset", "simcse/cpu-minilm", "model.pooler=nope")
    assert bad.returncode == 2 and bad.stderr.startswith("error: config: model.pooler") and "nope" in bad.stderr
    missing = cselab("train", "--preset", "simcse/no-such-preset")
    assert missing.returncode == 2 and "unknown preset" in missing.stderr
    assert list(elsewhere.iterdir()) == []


def make_dry_run(*args: str, env_extra: dict[str, str] | None = None) -> list[str]:
    env = {k: v for k, v in clean_env().items() if k != "CONDA_PREFIX"} | (env_extra or {})
    done = subprocess.run(["make", "-n", "-C", str(ROOT), *args, "test"], env=env, capture_output=True, text=True,
                          check=True)
    return [line.strip() for line in done.stdout.splitlines()]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_installs_only_into_a_virtual_environment(tmp_path):
    venv = tmp_path / "venv"
    lines = make_dry_run(f"VENV={venv}")
    assert any(line.startswith(f"python3 -m venv {venv}") for line in lines)
    pip_lines = [line for line in lines if " -m pip install" in line]
    assert pip_lines and all(line.startswith(f"{venv}/bin/python -m pip install") for line in pip_lines)
    assert any("[dev,bench,mteb,export]" in line for line in pip_lines)
    active = make_dry_run(env_extra={"VIRTUAL_ENV": str(tmp_path / "active")})
    assert not any("-m venv" in line for line in active)
    pip_lines = [line for line in active if " -m pip install" in line]
    assert pip_lines and all(line.startswith("python -m pip install") for line in pip_lines)
