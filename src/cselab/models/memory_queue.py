"""IFCL's hippocampus queue: a FIFO of recent anchor embeddings reused as weighted negatives."""

from __future__ import annotations

import math
from typing import Any

import torch


class HippocampusQueue:
    """FIFO memory of the last ``capacity`` anchor embeddings (IFCL section 3.2; capacity ``k*N``).

    Entries are detached float32 copies, stored NEWEST FIRST: after ``enqueue(batch)`` row 0 of the
    queue is row 0 of ``batch``, row ``n-1`` is row ``n-1`` of ``batch`` (a batch keeps its own row
    order), followed by the previous contents; rows beyond ``capacity`` (the oldest) are dropped. Entry
    index ``m`` (1-based) in the paper's formulas is row ``m - 1`` of :attr:`embeddings`.

    The storage lives on the device of the last enqueued batch. Enqueue never modifies a tensor
    in place (it builds a new one), so a tensor returned by :attr:`embeddings` and used in the current
    step's loss stays valid after the queue is updated.

    Args:
        capacity: maximum number of entries, > 0 (IFCL: 416 = k * N).
        dim: embedding width, or ``None`` to take it from the first enqueued batch.
    """

    def __init__(self, capacity: int = 416, dim: int | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"HippocampusQueue capacity must be a positive integer, got {capacity!r}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0):
            raise ValueError(f"HippocampusQueue dim must be a positive integer or None, got {dim!r}")
        self.capacity = capacity
        self.dim = dim
        self._data = torch.zeros(0, dim or 0, dtype=torch.float32)

    def __len__(self) -> int:
        return int(self._data.shape[0])

    def __repr__(self) -> str:
        return f"HippocampusQueue(capacity={self.capacity}, dim={self.dim}, size={len(self)})"

    @property
    def embeddings(self) -> torch.Tensor:
        """The stored entries, ``[M, d]`` float32 without gradient, newest first (``M <= capacity``)."""
        return self._data

    def enqueue(self, batch_embeddings: torch.Tensor) -> None:
        """Push a batch ``[n, d]`` to the front (newest first, batch row order kept); drop the oldest.

        The batch is detached and copied as float32. If ``n > capacity`` only its first ``capacity``
        rows are kept.
        """
        if not isinstance(batch_embeddings, torch.Tensor) or batch_embeddings.dim() != 2:
            shape = tuple(batch_embeddings.shape) if isinstance(batch_embeddings, torch.Tensor) else None
            raise ValueError(f"enqueue expects a 2-D tensor [batch, dim], got shape {shape}")
        if not batch_embeddings.is_floating_point():
            raise ValueError(f"enqueue expects floating-point embeddings, got dtype {batch_embeddings.dtype}")
        width = int(batch_embeddings.shape[1])
        if self.dim is None:
            if width <= 0:
                raise ValueError("enqueue expects embeddings with at least one column")
            self.dim = width
            self._data = self._data.new_zeros(0, width)
        elif width != self.dim:
            raise ValueError(f"enqueue expects embeddings of width {self.dim}, got {width}")
        new = batch_embeddings.detach().to(dtype=torch.float32)
        old = self._data.to(new.device)
        # torch.cat always allocates a new tensor: the previous storage is never modified in place.
        self._data = torch.cat([new, old], dim=0)[: self.capacity]

    def forgetting_coefficients(self, batch_size: int, lam: float) -> torch.Tensor:
        """Forgetting coefficients ``p_m = 1 - lam * ceil(m / N)`` for m = 1..M (IFCL Eq. 4).

        Args:
            batch_size: N > 0, the training batch size.
            lam: forgetting rate lambda >= 0 (IFCL: 0.002).

        Returns:
            float32 tensor ``[M]`` (M = ``len(self)``) on the queue's device, aligned with
            :attr:`embeddings`.

        Raises:
            ValueError: on bad arguments, or if some ``p_m <= 0`` (lam * ceil(capacity / N) >= 1), which
                would make the weighted negatives meaningless (and log p_m undefined).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
            raise ValueError(f"forgetting rate lam must be a finite number >= 0, got {lam!r}")
        size = len(self)
        m = torch.arange(1, size + 1, dtype=torch.float64)
        coefficients = 1.0 - lam * torch.ceil(m / batch_size)
        if size > 0 and float(coefficients.min()) <= 0:
            raise ValueError(
                f"forgetting coefficients must stay > 0: lam={lam} * ceil({size}/{batch_size}) >= 1; "
                "use a smaller lam or a shorter queue"
            )
        return coefficients.to(dtype=torch.float32, device=self._data.device)

    def clear(self) -> None:
        """Remove every entry (capacity and width are kept)."""
        self._data = self._data.new_zeros(0, self._data.shape[1])

    def to(self, device: torch.device | str) -> HippocampusQueue:
        """Move the storage to ``device``; returns ``self``."""
        self._data = self._data.to(device)
        return self

    def state_dict(self) -> dict[str, Any]:
        """Resumable state: ``{"capacity": int, "dim": int (-1 if unknown), "embeddings": Tensor}``.

        The embeddings are a CPU float32 copy, newest first; only plain ints and tensors, so the dict
        loads with ``torch.load(..., weights_only=True)``.
        """
        return {
            "capacity": self.capacity,
            "dim": -1 if self.dim is None else self.dim,
            "embeddings": self._data.detach().to("cpu", copy=True),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`. The capacity must match; the width must match if already known.

        The entries are placed on the queue's current device.
        """
        missing = {"capacity", "dim", "embeddings"} - set(state)
        if missing:
            raise ValueError(f"HippocampusQueue state is missing keys: {sorted(missing)}")
        capacity = int(state["capacity"])
        if capacity != self.capacity:
            raise ValueError(
                f"HippocampusQueue state has capacity {capacity}, this queue has capacity {self.capacity}"
            )
        data = state["embeddings"]
        if not isinstance(data, torch.Tensor) or data.dim() != 2:
            raise ValueError("HippocampusQueue state 'embeddings' must be a 2-D tensor")
        if data.shape[0] > self.capacity:
            raise ValueError(
                f"HippocampusQueue state holds {data.shape[0]} entries, more than capacity {self.capacity}"
            )
        dim = int(state["dim"])
        dim = None if dim < 0 else dim
        if dim is not None and data.shape[1] != dim:
            raise ValueError(f"HippocampusQueue state: embeddings width {data.shape[1]} != dim {dim}")
        if self.dim is not None and dim is not None and dim != self.dim:
            raise ValueError(f"HippocampusQueue state has dim {dim}, this queue has dim {self.dim}")
        if dim is None:
            # A queue saved before its first enqueue: nothing to restore but emptiness.
            if data.shape[0] != 0:
                raise ValueError("HippocampusQueue state has entries but no dim")
            self.clear()
            return
        self.dim = dim
        self._data = data.detach().to(dtype=torch.float32, device=self._data.device).clone()
