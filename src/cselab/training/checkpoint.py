"""Resumable training state: weights (safetensors), optimizer/scheduler tensors, RNG states, position.

Written to a temporary directory and renamed into place (:func:`cselab.fileio.replace_directory`), so a
killed process leaves either the previous state or the new one, never a half-written one. Only tensors and
JSON are read back (``weights_only``); a damaged or foreign file is refused with a one-line
:class:`CselabError` naming it, never a traceback.
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from cselab.errors import CselabError
from cselab.fileio import fresh_sibling, replace_directory

STATE_FILE = "trainer_state.json"


@dataclass
class TrainerState:
    step: int = 0
    best_score: float | None = None
    best_step: int | None = None
    sentences_seen: int = 0
    train_seconds: float = 0.0
    # wall time of the run up to this save, summed over the processes that ran it (kill + --resume)
    wall_seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


def _rng_state(generator: torch.Generator) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "generator": generator.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def save_state(
    directory: Path,
    *,
    method: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: TrainerState,
    generator: torch.Generator,
    extra: dict[str, torch.Tensor],
    rank: int = 0,
) -> None:
    """Save everything needed to continue exactly at ``state.step``."""
    tmp = fresh_sibling(directory)
    tmp.mkdir(parents=True)
    save_model(method, str(tmp / "method.safetensors"))
    if extra:
        save_file({k: v.detach().cpu().contiguous() for k, v in extra.items()}, str(tmp / "method_extra.safetensors"))
    torch.save(
        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": _rng_state(generator)},
        tmp / f"optim_rank{rank}.pt",
    )
    (tmp / "python_random.json").write_text(json.dumps(random.getstate(), default=list))
    (tmp / STATE_FILE).write_text(json.dumps(asdict(state), indent=1))
    replace_directory(tmp, directory)


def load_state(
    directory: Path,
    *,
    method: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator,
    rank: int = 0,
) -> tuple[TrainerState, dict[str, torch.Tensor]]:
    """Restore what :func:`save_state` wrote; returns the trainer state and the method's extra state.

    A damaged or incomplete state is refused with the file it concerns; nothing on disk is changed."""
    if not (directory / STATE_FILE).is_file():
        raise CselabError(f"nothing to resume: {directory} holds no saved training state")
    state = _read_trainer_state(directory / STATE_FILE)
    blob = _read(directory / f"optim_rank{rank}.pt", lambda f: torch.load(f, weights_only=True))
    if not isinstance(blob, dict) or not {"optimizer", "scheduler", "rng"} <= set(blob):
        raise CselabError(f"{directory / f'optim_rank{rank}.pt'}: not a cselab optimizer state; the save is damaged")
    py_state = _read(directory / "python_random.json", lambda f: json.loads(f.read_text()))
    extra_file = directory / "method_extra.safetensors"
    extra = _read(extra_file, load_file) if extra_file.is_file() else {}
    # safetensors' load_model (not load_state_dict) because save_model dropped tied duplicates by name
    missing, unexpected = _read(directory / "method.safetensors", lambda f: load_model(method, str(f), strict=False))
    try:
        optimizer.load_state_dict(blob["optimizer"])
        scheduler.load_state_dict(blob["scheduler"])
        torch.set_rng_state(blob["rng"]["torch"])
        generator.set_state(blob["rng"]["generator"])
        random.setstate((py_state[0], tuple(py_state[1]), py_state[2]))
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CselabError(f"{directory}: saved state does not fit this method/config ({_first_line(exc)}); "
                          "was it written by another configuration?") from exc
    if missing or unexpected:
        raise CselabError(f"{directory}: saved weights do not match this method/config ({len(missing)} missing, "
                          f"{len(unexpected)} unexpected)")
    if "cuda" in blob["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(blob["rng"]["cuda"])
    return state, extra


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _read(path: Path, reader: Any) -> Any:
    """``reader(path)`` with every way a damaged or missing file fails turned into one line."""
    if not path.is_file():
        raise CselabError(f"{path} is missing; the saved state is incomplete")
    try:
        return reader(path)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError, UnicodeDecodeError,
            SafetensorError) as exc:
        raise CselabError(f"{path} is damaged ({_first_line(exc)}); the saved state cannot be read") from exc


def _read_trainer_state(path: Path) -> TrainerState:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        state = TrainerState(**raw)
    except (OSError, ValueError, TypeError) as exc:
        raise CselabError(f"{path} is damaged ({_first_line(exc)}); the saved state cannot be read") from exc
    numbers = (state.step, state.sentences_seen)
    if not all(isinstance(n, int) and n >= 0 for n in numbers) or not isinstance(state.history, list):
        raise CselabError(f"{path} is damaged (step/sentences_seen/history of the wrong type)")
    return state
