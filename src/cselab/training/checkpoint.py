"""Resumable training state: weights (safetensors), optimizer/scheduler tensors, RNG states, position.

Written to a temporary directory and renamed into place, so a killed process leaves either the previous
state or the new one, never a half-written one. Only tensors and JSON are read back (``weights_only``).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from ..errors import CselabError
from ..fileio import fresh_sibling, replace_directory

STATE_FILE = "trainer_state.json"


@dataclass
class TrainerState:
    step: int = 0
    best_score: float | None = None
    best_step: int | None = None
    sentences_seen: int = 0
    train_seconds: float = 0.0
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
    """Restore what :func:`save_state` wrote; returns the trainer state and the method's extra state."""
    if not (directory / STATE_FILE).is_file():
        raise CselabError(f"nothing to resume: {directory} holds no saved training state")
    missing, unexpected = load_model(method, str(directory / "method.safetensors"), strict=False)
    if missing or unexpected:
        raise CselabError(f"{directory}: saved weights do not match this method/config ({len(missing)} missing)")
    blob = torch.load(directory / f"optim_rank{rank}.pt", weights_only=True)
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    torch.set_rng_state(blob["rng"]["torch"])
    generator.set_state(blob["rng"]["generator"])
    if "cuda" in blob["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(blob["rng"]["cuda"])
    py_state = json.loads((directory / "python_random.json").read_text())
    random.setstate((py_state[0], tuple(py_state[1]), py_state[2]))
    extra_file = directory / "method_extra.safetensors"
    extra = load_file(str(extra_file)) if extra_file.is_file() else {}
    state = TrainerState(**json.loads((directory / STATE_FILE).read_text()))
    return state, extra
