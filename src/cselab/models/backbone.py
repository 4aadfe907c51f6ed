"""Loading HF backbones and tokenizers: local directories, cselab's fetched models, or hub names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from ..errors import CselabError
from ..paths import cselab_home

# Config attribute names of the dropout probabilities across the families we support.
_DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def resolve_model_path(name_or_path: str | Path) -> str:
    """A local path if ``name_or_path`` is one (or a model fetched into ``$CSELAB_HOME/models``), else the name."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path)
    fetched = cselab_home() / "models" / str(name_or_path).split("/")[-1]
    short_name = "/" not in str(name_or_path) or str(name_or_path).startswith("sentence-transformers/")
    if short_name and fetched.is_dir():
        return str(fetched)
    return str(name_or_path)


def quiet_transformers() -> None:
    """Silence transformers' per-load progress bars and info logs (we print our own progress)."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def load_backbone(name_or_path: str | Path, *, dropout: float | None = None) -> tuple[nn.Module, Any]:
    """Load ``(model, tokenizer)``; weights only from safetensors so nothing is unpickled.

    Raises a one-line :class:`CselabError` when the path is not a readable model directory and the name
    cannot be loaded from a hub either.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    quiet_transformers()
    source = resolve_model_path(name_or_path)
    local = Path(source).exists()
    if local and not (Path(source) / "config.json").is_file():
        raise CselabError(f"{source} is not a model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(source)
        if dropout is not None:
            for key in _DROPOUT_KEYS:
                if hasattr(config, key):
                    setattr(config, key, float(dropout))
        model = AutoModel.from_pretrained(source, config=config, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except CselabError:
        raise
    except Exception as exc:  # transformers raises many types; the user needs one line
        where = "directory" if local else "name (not a local path; no hub reachable?)"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CselabError(f"cannot load model {name_or_path!s} as a {where}: {first}") from exc
    return model, tokenizer
