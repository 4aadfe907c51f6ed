"""Where a result came from: the code version, the machine (with its library versions) and the date (recorded with
every result).

The code version is cselab's own: the installed package's version, or, when cselab runs from its own source checkout
(an editable install, ``PYTHONPATH=src``), that checkout's git commit (``+dirty`` with uncommitted changes). It is
looked up the first time a process asks for it (a run asks when it starts, so a commit that lands while it trains
does not change what its record says), never at import, and a git repository that merely contains an installed
cselab (a user's project with its virtualenv inside) is never asked.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any


def source_checkout() -> Path | None:
    """The root of cselab's own source checkout this package runs from, or ``None`` for an installed package: the
    package must sit in ``ROOT/src/cselab`` with ``ROOT/pyproject.toml`` naming the project ``cselab`` and
    ``ROOT/.git`` present."""
    package = Path(__file__).resolve().parent
    if package.parent.name != "src":
        return None
    root = package.parents[1]
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    if not (root / ".git").exists() or not re.search(r'^name\s*=\s*"cselab"\s*$', pyproject, re.M):
        return None
    return root


def package_version() -> str:
    """The installed distribution's version (``importlib.metadata``), else the source's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cselab")
    except PackageNotFoundError:
        from cselab.version import __version__

        return __version__


@functools.cache
def code_version() -> str:
    """The commit of cselab's source checkout (``+dirty`` if it has uncommitted changes), or ``cselab-<version>``
    for an installed package (or a checkout git cannot read). Looked up once per process."""
    root = source_checkout()
    if root is not None:
        try:
            commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                    timeout=10, check=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return commit + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    return f"cselab-{package_version()}"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# the installed libraries a score depends on besides torch: the models' code, the peers, the evaluators, the numerics
RECORDED_PACKAGES = ("transformers", "tokenizers", "sentence-transformers", "mteb", "numpy", "scipy", "scikit-learn",
                     "onnxruntime", "openvino")


def package_versions(names: tuple[str, ...] = RECORDED_PACKAGES) -> dict[str, str]:
    """The installed versions of ``names`` (distribution metadata, nothing imported); one not installed is left out."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch": torch.__version__,
                            "python": platform.python_version(), "packages": package_versions()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = torch.cuda.device_count()
    return info


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def provenance() -> dict[str, Any]:
    """What every record carries: ``git`` (the code version, :func:`code_version`), ``machine`` and ``date``."""
    return {"git": code_version(), "machine": machine(), "date": now()}
