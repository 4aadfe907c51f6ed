"""Data parallelism through torch.distributed (launched by ``torchrun`` or ``accelerate launch``).

Rule for in-batch negatives and loss scaling: every rank gathers the embeddings of all ranks (its own
slice keeps its gradient), so every rank computes the same GLOBAL loss. A rank's backward then yields the
part of the gradient that flows through its own slice; SUMMING gradients over ranks (not averaging)
gives exactly the single-process gradient of the global batch. With one process everything is identity.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass(frozen=True)
class DistributedContext:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def gather(self, local: Tensor) -> Tensor:
        """Concatenate ``local`` [b, ...] of every rank into [world*b, ...]; only the local slot has grad."""
        if not self.enabled:
            return local
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local.detach().contiguous())
        parts[self.rank] = local
        return torch.cat(parts, dim=0)

    def sum_gradients(self, module: nn.Module) -> None:
        """All-reduce (sum) the gradients of ``module`` in one flat buffer per dtype."""
        if not self.enabled:
            return
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        by_dtype: dict[torch.dtype, list[Tensor]] = {}
        for g in grads:
            by_dtype.setdefault(g.dtype, []).append(g)
        for group in by_dtype.values():
            flat = torch.cat([g.reshape(-1) for g in group])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            offset = 0
            for g in group:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()

    def broadcast_flag(self, value: bool) -> bool:
        """Rank 0's decision, known to every rank."""
        if not self.enabled:
            return value
        flag = torch.tensor([1 if value else 0])
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        """Leave the process group; without this a rank can abort at interpreter exit (gloo teardown race)."""
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def init_distributed(device: torch.device) -> DistributedContext:
    """Join the process group described by the launcher's environment (WORLD_SIZE, RANK, ...)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistributedContext()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistributedContext(rank=dist.get_rank(), world_size=dist.get_world_size())
