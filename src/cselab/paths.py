"""Where cselab keeps fetched data and models."""

from __future__ import annotations

import os
from pathlib import Path


def cselab_home() -> Path:
    """The cache directory: ``$CSELAB_HOME`` or ``~/.cache/cselab``."""
    env = os.environ.get("CSELAB_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cselab"
