"""Where a result came from: code version, machine, date (recorded with every result)."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


@functools.cache
def git_commit() -> str:
    """The commit of the source tree cselab runs from ('+dirty' if it has uncommitted changes), or cselab's version
    outside a git checkout. Read once per process, when ``cselab`` is first imported (``cselab/__init__.py``): a
    long run records the code it ran, even if a commit lands before it writes its record."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from cselab.version import __version__

        return f"cselab-{__version__}"
    return commit + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch": torch.__version__,
                            "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = torch.cuda.device_count()
    return info


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def provenance() -> dict[str, Any]:
    return {"git": git_commit(), "machine": machine(), "date": now()}
