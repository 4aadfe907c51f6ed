"""Where cselab keeps fetched data and models, and how a model name becomes a local directory."""

from __future__ import annotations

import os
from pathlib import Path

from cselab.errors import CselabError

# fetched models: `cselab data fetch TARGET` -> the directory under $CSELAB_HOME/models
MODEL_NAMES = {
    "models": "all-MiniLM-L6-v2",
    "models-mpnet": "all-mpnet-base-v2",
    "models-e5": "multilingual-e5-small-embeddings",  # an embedding layer + tokenizer, not a whole model
}

def cselab_home() -> Path:
    """The cache directory: ``$CSELAB_HOME`` or ``~/.cache/cselab``."""
    env = os.environ.get("CSELAB_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cselab"


def resolve_model_path(name_or_path: str | Path) -> str:
    """A local path if ``name_or_path`` is one (or a model fetched into ``$CSELAB_HOME/models``), else the name."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path)
    fetched = cselab_home() / "models" / str(name_or_path).split("/")[-1]
    short_name = "/" not in str(name_or_path) or str(name_or_path).startswith("sentence-transformers/")
    if short_name and fetched.is_dir():
        return str(fetched)
    text = str(name_or_path)
    if text.startswith(("/", "./", "../", "~")) or isinstance(name_or_path, Path):
        # written as a path, so never a hub name: say it is missing instead of asking a hub about it
        raise CselabError(f"cannot load model {text}: no such directory")
    return text
