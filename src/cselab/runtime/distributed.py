"""Data parallelism on PyTorch's own engine (``torchrun``; one process per device, any number of nodes).

The trainable method is wrapped in :class:`torch.nn.parallel.DistributedDataParallel`, which all-reduces
the gradients in buckets while the backward pass is still running. Accelerate is not used: DDP is the
engine it would drive anyway, and the global in-batch negatives need our own gather (below) either way.

Rule for in-batch negatives and loss scaling: every rank gathers the embeddings of all ranks (its own
slice keeps its gradient, :meth:`DistributedContext.gather`), so every rank computes the same GLOBAL loss.
A rank's backward then yields the part of the gradient that flows through its own slice; the SUM over
ranks is exactly the single-process gradient of the global batch. DDP averages, so the trainer
back-propagates ``world_size * loss`` (:meth:`DistributedContext.gradient_scale`). With one process
everything is the identity and no process group exists.

Placement: every collective receives tensors on :attr:`DistributedContext.device`, the model's device
(NCCL only takes CUDA tensors; gloo CPU ones). On CUDA each process binds ``cuda:LOCAL_RANK``
(``torch.cuda.set_device``) before the process group starts. Multi-node: the same command on every node,
``--node_rank`` 0 on the node named by ``--master_addr``::

    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --master_addr HOST0 --master_port 29500 \\
        -m cselab.cli train --config configs/simcse/paper-bert-base.yaml train.batch_size=512
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor, nn

from cselab.errors import CselabError


@dataclass(frozen=True)
class DistributedContext:
    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def gradient_scale(self) -> float:
        """Factor on the loss before backward so that DDP's AVERAGE of the ranks' gradients is their SUM."""
        return float(self.world_size)

    def gather(self, local: Tensor) -> Tensor:
        """Concatenate ``local`` [b, ...] of every rank into [world*b, ...]; only the local slot has grad."""
        if not self.enabled:
            return local
        local = local.contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local.detach())
        parts[self.rank] = local
        return torch.cat(parts, dim=0)

    def broadcast_flag(self, value: bool) -> bool:
        """Rank 0's decision, known to every rank (the flag travels on the model's device: NCCL has no CPU)."""
        if not self.enabled:
            return value
        flag = torch.tensor([1 if value else 0], device=self.device)
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    def barrier(self) -> None:
        if not self.enabled:
            return
        if self.device.type == "cuda":
            # NCCL's barrier must know the device, or it guesses one from the rank (wrong across nodes)
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def wrap(self, module: nn.Module) -> nn.Module:
        """``module`` under DDP (bucketed all-reduce overlapped with backward); ``module`` itself alone."""
        if not self.enabled or not any(p.requires_grad for p in module.parameters()):
            return module
        from torch.nn.parallel import DistributedDataParallel

        # find_unused_parameters: a method may leave parameters out of its loss (the backbone's own pooler
        # under CLS+MLP, a switched-off term's head); DDP must not wait for their gradients
        return DistributedDataParallel(
            module, device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=True,
        )

    def close(self) -> None:
        """Leave the process group; without this a rank can abort at interpreter exit (gloo teardown race)."""
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def local_device(device: torch.device) -> torch.device:
    """``cuda`` without an index means this process's GPU, ``cuda:LOCAL_RANK`` (torchrun sets LOCAL_RANK)."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def init_distributed(device: torch.device) -> DistributedContext:
    """Join the process group described by the launcher's environment (WORLD_SIZE, RANK, LOCAL_RANK, ...)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistributedContext(device=device)
    if device.type == "cuda":
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise CselabError(f"LOCAL_RANK {device.index} has no GPU: this node has {torch.cuda.device_count()}; "
                              "start at most that many processes per node (--nproc_per_node)")
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistributedContext(rank=dist.get_rank(), world_size=dist.get_world_size(), device=device)
