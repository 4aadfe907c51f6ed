"""A large lookup table's gradient added into one tensor kept across steps, not made afresh by every backward pass.

The backward pass of an ``nn.Embedding`` makes a dense gradient of its whole table and adds it to the table's
``.grad``. For all-MiniLM-L6-v2's word embeddings (30,522 x 384 floats) that is 45 MiB, above glibc's largest mmap
threshold (:mod:`cselab.runtime.allocator`), so every one is mapped and zeroed afresh and given back at once: 11,446
minor page faults for each piece of a micro-batched step. In ``make demo``'s training (bf16, 2 AMD EPYC cores)
that was 5.27 million of the command's 6.74 million faults and 12.7 s in the kernel; with the table's gradient kept,
111 thousand and 3.3 s (``python -m lab.speed.adapt_footprint --case demo``, adapt.json's ``phase_usage``).
:func:`keep_lookup_gradients` makes each lookup of such a table (trainable, larger than
:data:`~cselab.runtime.memory.LARGEST_HEAP_TENSOR`) add the rows of its gradient that its tokens touch straight into
``.grad`` (``index_add_``: the same sums up to the order of float additions, and nothing spent on the rows no token
touched), and gives the table one kept tensor to be its ``.grad`` whenever a step starts with none, so no step maps
it again.

It holds only where autograd's own accumulation is not needed: on a CPU (CUDA's caching allocator reuses the
memory anyway) and in one process (DDP all-reduces a gradient from the hook of that accumulation, which this
bypasses). Outside a backward-recording forward (``torch.no_grad``, evaluation, an export's trace) the lookup is
the module's own.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cselab.runtime.memory import LARGEST_HEAP_TENSOR


class _LookupIntoKeptGradient(torch.autograd.Function):
    """``F.embedding(ids, weight, padding_idx)`` whose backward adds into ``weight.grad`` (``kept`` where none is
    set yet) and hands autograd no gradient for ``weight``."""

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, weight: torch.Tensor, padding_idx: int | None,
                kept: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx, ctx.kept = weight, padding_idx, kept
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[None, None, None, None]:
        (ids,) = ctx.saved_tensors
        weight = ctx.weight
        if weight.grad is None:
            weight.grad = ctx.kept.zero_()
        rows = ids.reshape(-1)
        grads = grad_output.reshape(rows.numel(), -1)
        if ctx.padding_idx is not None:  # the padding row's gradient is zero, as nn.Embedding's backward makes it
            touched = rows != ctx.padding_idx
            rows, grads = rows[touched], grads[touched]
        weight.grad.index_add_(0, rows, grads.to(weight.grad.dtype))
        return None, None, None, None


class KeptLookupGradients:
    """The hooks :func:`keep_lookup_gradients` put on a model's large lookup tables (:attr:`tables`), and the tensor
    kept for each table's gradient (:attr:`gradients`, in the same order); :meth:`remove` gives the tables their own
    lookups back."""

    def __init__(self) -> None:
        self.tables: list[nn.Embedding] = []
        self.gradients: list[torch.Tensor] = []
        self._handles: list[Any] = []

    def add(self, table: nn.Embedding) -> None:
        kept = torch.zeros_like(table.weight)

        def lookup(module: nn.Embedding, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
            if not (args and torch.is_grad_enabled() and module.weight.requires_grad):
                return None  # the module's own output
            return _LookupIntoKeptGradient.apply(args[0], module.weight, module.padding_idx, kept)

        self.tables.append(table)
        self.gradients.append(kept)
        self._handles.append(table.register_forward_hook(lookup))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self.tables, self.gradients, self._handles = [], [], []


def keep_lookup_gradients(model: nn.Module, min_bytes: int | None = None) -> KeptLookupGradients:
    """Hook every trainable ``nn.Embedding`` of ``model`` whose table is larger than ``min_bytes`` (default: too large
    for glibc's heap, :data:`~cselab.runtime.memory.LARGEST_HEAP_TENSOR`; a plain lookup: no ``max_norm``, no sparse
    or frequency-scaled gradient) so its gradient is added into one kept tensor."""
    min_bytes = LARGEST_HEAP_TENSOR if min_bytes is None else min_bytes
    kept = KeptLookupGradients()
    for module in model.modules():
        if (isinstance(module, nn.Embedding) and module.weight.requires_grad
                and module.weight.nelement() * module.weight.element_size() > min_bytes
                and module.max_norm is None and not module.sparse and not module.scale_grad_by_freq):
            kept.add(module)
    return kept
