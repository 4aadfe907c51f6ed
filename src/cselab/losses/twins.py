"""IFCL losses: InfoNCE with the hippocampus queue (identical twins) and the Twins loss."""

from __future__ import annotations

import torch

from cselab.losses._checks import as_float32, check_matrix, check_positive, check_same_shape
from cselab.losses.info_nce import cosine_similarity_matrix, rowwise_cosine


def hippocampus_info_nce(
    h: torch.Tensor,
    h_pos: torch.Tensor,
    queue: torch.Tensor,
    queue_weights: torch.Tensor,
    temperature: float = 0.05,
) -> torch.Tensor:
    """IFCL's identical-twins loss ``l_I`` with hippocampus-queue negatives (paper Eq. 6), ``s = cos/tau``.

    ``l_I = mean_i -log( exp(s(h_i, h+_i)) / ( sum_j exp(s(h_i, h+_j)) + sum_m p_m exp(s(h_i, H_m)) ) )``

    Computed as a cross-entropy over ``[s(h_i, h+_j)]_j ++ [s(h_i, H_m) + log p_m]_m`` with label i.
    The queue and its weights are treated as constants (detached). With an empty queue this equals
    :func:`cselab.losses.info_nce`.

    Args:
        h: ``[B, d]`` anchors.
        h_pos: ``[B, d]`` identical twins (second dropout pass).
        queue: ``[M, d]`` stored negatives ``H_m`` (M may be 0; an empty queue may have any width).
        queue_weights: ``[M]`` forgetting coefficients ``p_m``, all > 0 (see
            :meth:`cselab.models.memory_queue.HippocampusQueue.forgetting_coefficients`).
        temperature: tau > 0.

    Returns:
        float32 scalar.
    """
    check_matrix("h", h)
    check_same_shape(("h", "h_pos"), (h, h_pos))
    check_positive("temperature", temperature)
    if not isinstance(queue, torch.Tensor) or queue.dim() != 2:
        shape = tuple(queue.shape) if isinstance(queue, torch.Tensor) else type(queue).__name__
        raise ValueError(f"queue must be a 2-D tensor [M, d], got {shape}")
    if not isinstance(queue_weights, torch.Tensor) or queue_weights.dim() != 1:
        shape = tuple(queue_weights.shape) if isinstance(queue_weights, torch.Tensor) else None
        raise ValueError(f"queue_weights must be a 1-D tensor [M], got {shape}")
    if queue_weights.shape[0] != queue.shape[0]:
        raise ValueError(
            f"queue_weights must have one entry per queue row ({queue.shape[0]}), got {queue_weights.shape[0]}"
        )
    logits = cosine_similarity_matrix(h, h_pos) / temperature  # [B, B]
    if queue.shape[0] > 0:
        if queue.shape[1] != h.shape[1]:
            raise ValueError(f"queue width {queue.shape[1]} does not match embedding width {h.shape[1]}")
        weights = as_float32(queue_weights.detach()).to(logits.device)
        if not bool(torch.all(torch.isfinite(weights) & (weights > 0))):
            raise ValueError("queue_weights (forgetting coefficients p_m) must all be finite and > 0")
        queue_logits = cosine_similarity_matrix(h, queue.detach().to(h.device)) / temperature
        logits = torch.cat([logits, queue_logits + torch.log(weights)], dim=1)  # [B, B + M]
    labels = torch.arange(h.shape[0], device=logits.device)
    return torch.nn.functional.cross_entropy(logits, labels)


def twins_loss(
    h: torch.Tensor,
    h_pos: torch.Tensor,
    h_frat: torch.Tensor,
    e: torch.Tensor,
    e_pos: torch.Tensor,
    e_frat: torch.Tensor,
) -> torch.Tensor:
    """IFCL's Twins loss ``l_T`` (paper Eq. 8), no temperature.

    ``l_T = mean_i | exp(cos(h_i, h+_i)) - exp(cos(h_i, h-_i)) - M_i |`` with the innate margin
    ``M_i = exp(cos(e_i, e+_i)) - exp(cos(e_i, e-_i))`` computed from DETACHED ``e`` tensors (no
    gradient reaches them).

    Args:
        h: ``[B, d]`` anchors.
        h_pos: ``[B, d]`` identical twins.
        h_frat: ``[B, d]`` fraternal twins.
        e: ``[B, d_e]`` embedding-layer summaries of the anchor inputs.
        e_pos: ``[B, d_e]`` of the identical inputs.
        e_frat: ``[B, d_e]`` of the fraternal (fused) inputs.

    Returns:
        float32 scalar.
    """
    check_matrix("h", h)
    check_same_shape(("h", "h_pos", "h_frat"), (h, h_pos, h_frat))
    check_matrix("e", e)
    check_same_shape(("e", "e_pos", "e_frat"), (e, e_pos, e_frat))
    if e.shape[0] != h.shape[0]:
        raise ValueError(f"e, e_pos, e_frat must have {h.shape[0]} rows like h, got {e.shape[0]}")
    with torch.no_grad():
        margin = torch.exp(rowwise_cosine(e.detach(), e_pos.detach())) - torch.exp(
            rowwise_cosine(e.detach(), e_frat.detach())
        )
    gap = torch.exp(rowwise_cosine(h, h_pos)) - torch.exp(rowwise_cosine(h, h_frat))
    return (gap - margin).abs().mean()
