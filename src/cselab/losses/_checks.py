"""Private helpers shared by the loss modules: argument validation and float32 casting."""

from __future__ import annotations

import math

import torch


def as_float32(x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` as float32 (a no-op for float32 inputs); gradients flow through the cast."""
    return x if x.dtype == torch.float32 else x.float()


def check_matrix(name: str, x: torch.Tensor, *, min_rows: int = 1) -> None:
    """Raise ``ValueError`` unless ``x`` is a 2-D floating tensor with at least ``min_rows`` rows."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor [rows, dim], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} row(s), got shape {tuple(x.shape)}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column, got shape {tuple(x.shape)}")


def check_same_shape(names: tuple[str, ...], tensors: tuple[torch.Tensor, ...]) -> None:
    """Raise ``ValueError`` unless every tensor has the shape of the first one."""
    first = tuple(tensors[0].shape)
    for name, t in zip(names[1:], tensors[1:], strict=True):
        if tuple(t.shape) != first:
            raise ValueError(f"{name} must have the same shape as {names[0]} {first}, got {tuple(t.shape)}")


def check_positive(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
