"""Gradient caching: the gradient of a large in-batch-negative batch in the activation memory of one chunk.

The method of Gao et al. (2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"),
which sentence-transformers ships as ``CachedMultipleNegativesRankingLoss``. That class is bound to its own
loss and model types; here the loss is any method's :meth:`~cselab.methods.base.Method.loss_from_embeddings`
(SimCSE, SimCSE++, IFCL, TNCSE/JTCSE, distillation), so the three passes are written out (small) here:

1. every chunk through :meth:`Method.embed` WITHOUT a graph, the random-number state saved before each;
2. the full-batch loss on the concatenated embeddings (leaves with ``requires_grad``) and its backward,
   which leaves ``d loss / d embedding`` on the leaves. The losses see the whole batch, so losses built on
   batch statistics (SimCSE++'s DCL: per-dimension mean and variance) get their exact full-batch value and
   gradient; nothing is approximated;
3. every chunk again WITH a graph, the random-number state restored so dropout draws the same masks as in
   pass 1, and ``backward(embeddings, cached gradient)``: the parameters accumulate exactly the gradient of
   the plain full-batch step (same masks given), at the activation memory of one chunk.

Pass 3 runs through the data-parallel wrapper (``forward`` without a context = ``embed``); gradients are
all-reduced only with the last chunk (``no_sync`` before).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class RngState:
    """The random-number state that dropout draws from on ``device`` (the CPU generator, plus CUDA's)."""

    cpu: Tensor
    cuda: Tensor | None
    device: torch.device

    @classmethod
    def capture(cls, device: torch.device) -> RngState:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def cached_step(
    method: Any,
    engine: nn.Module,
    chunks: list[dict[str, Any]],
    loss_of: Callable[[dict[str, Tensor]], tuple[Tensor, dict[str, Tensor]]],
    backward: Callable[[Tensor], None],
    *,
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
) -> tuple[Tensor, dict[str, Tensor]]:
    """Accumulate the full-batch gradient into the parameters; return ``(loss, terms)`` (with graph-free values).

    ``engine`` is ``method`` or its data-parallel wrapper; ``loss_of`` turns the whole batch's embeddings into
    ``(weighted loss, terms)``; ``backward`` back-propagates a loss (with the trainer's scaling).
    """
    states, parts = [], []
    with torch.no_grad():
        for chunk in chunks:
            states.append(RngState.capture(device))
            with autocast():
                parts.append(method.embed(chunk))
    embeddings = {
        name: torch.cat([p[name] for p in parts]).requires_grad_(parts[0][name].is_floating_point())
        for name in parts[0]
    }
    with autocast():
        loss, terms = loss_of(embeddings)
    backward(loss)
    after = RngState.capture(device)
    offsets = [0]
    for part in parts:
        offsets.append(offsets[-1] + len(next(iter(part.values()))))
    for k, chunk in enumerate(chunks):
        last = k == len(chunks) - 1
        sync = contextlib.nullcontext() if last or not hasattr(engine, "no_sync") else engine.no_sync()
        states[k].restore()
        with sync:
            with autocast():
                outputs = engine(chunk)
            tensors, grads = [], []
            for name, value in outputs.items():
                if value.grad_fn is None:
                    continue  # returned detached by the method (e.g. IFCL's embedding means)
                grad = embeddings[name].grad
                # a zero gradient still marks the path as used, so data parallelism never waits for it
                tensors.append(value)
                grads.append(torch.zeros_like(value) if grad is None else grad[offsets[k] : offsets[k + 1]])
            if tensors:
                torch.autograd.backward(tensors, grads)
    after.restore()  # the run continues from the state after pass 1, as a plain step would
    return loss.detach(), {name: value.detach() for name, value in terms.items()}
