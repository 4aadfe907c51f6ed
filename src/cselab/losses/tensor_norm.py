"""TNCSE/JTCSE tensor-norm constraint: cosine of hidden states times a normalised pooler-output gap."""

from __future__ import annotations

import torch

from cselab.losses._checks import as_float32, check_matrix, check_positive, check_same_shape
from cselab.losses.info_nce import rowwise_cosine

_DENOM_FLOOR = 1e-12


def tensor_norm_loss(
    h_a: torch.Tensor,
    h_b: torch.Tensor,
    p_a: torch.Tensor,
    p_b: torch.Tensor,
    cos_floor: float = 1e-4,
) -> torch.Tensor:
    """Tensor-norm loss ``L_TN`` of TNCSE (Eq. 6; JTCSE Eq. 13), vectorised over the batch.

    ``L = mean_i -log( max(cos(h_a_i, h_b_i), cos_floor) ) * ||p_a_i - p_b_i|| / (||p_a_i|| + ||p_b_i||)``

    The clamp makes the log defined when ``cos <= 0`` (no gradient flows through the cosine there; the
    norm factor still gets one). The denominator is floored at 1e-12 so that two zero pooler outputs
    give a 0 factor instead of NaN.

    Args:
        h_a: ``[B, d]`` last-layer CLS states of one encoder (e.g. hI).
        h_b: ``[B, d]`` the positives from the other encoder (e.g. hII+).
        p_a: ``[B, d_p]`` pooler outputs of ``h_a`` (e.g. PI).
        p_b: ``[B, d_p]`` pooler outputs of ``h_b`` (e.g. PII+).
        cos_floor: > 0, lower clamp of the cosine.

    Returns:
        float32 scalar.
    """
    check_matrix("h_a", h_a)
    check_same_shape(("h_a", "h_b"), (h_a, h_b))
    check_matrix("p_a", p_a)
    check_same_shape(("p_a", "p_b"), (p_a, p_b))
    if p_a.shape[0] != h_a.shape[0]:
        raise ValueError(
            f"p_a/p_b must have one row per row of h_a/h_b ({h_a.shape[0]}), got {p_a.shape[0]} rows"
        )
    check_positive("cos_floor", cos_floor)
    if cos_floor > 1:
        raise ValueError(f"cos_floor must be <= 1, got {cos_floor}")
    cos = rowwise_cosine(h_a, h_b).clamp(min=cos_floor)
    pa, pb = as_float32(p_a), as_float32(p_b)
    gap = torch.linalg.vector_norm(pa - pb, dim=-1)
    denom = (torch.linalg.vector_norm(pa, dim=-1) + torch.linalg.vector_norm(pb, dim=-1)).clamp(
        min=_DENOM_FLOOR
    )
    return (-torch.log(cos) * gap / denom).mean()


def interaction_tensor_norm_loss(
    h_i: torch.Tensor,
    h_i_pos: torch.Tensor,
    h_ii: torch.Tensor,
    h_ii_pos: torch.Tensor,
    p_i: torch.Tensor,
    p_i_pos: torch.Tensor,
    p_ii: torch.Tensor,
    p_ii_pos: torch.Tensor,
    cos_floor: float = 1e-4,
) -> torch.Tensor:
    """Interaction tensor-norm loss ``L_ICTN`` of TNCSE (Eq. 7; JTCSE's ``L_ICTM``, Eq. 14).

    ``L_ICTN = tensor_norm_loss(hI, hII+, PI, PII+) + tensor_norm_loss(hII, hI+, PII, PI+)``.

    Args:
        h_i, h_i_pos: ``[B, d]`` encoder I's CLS states of the two dropout passes (hI, hI+).
        h_ii, h_ii_pos: ``[B, d]`` encoder II's (hII, hII+).
        p_i, p_i_pos, p_ii, p_ii_pos: ``[B, d_p]`` the corresponding pooler outputs.
        cos_floor: see :func:`tensor_norm_loss`.

    Returns:
        float32 scalar.
    """
    return tensor_norm_loss(h_i, h_ii_pos, p_i, p_ii_pos, cos_floor) + tensor_norm_loss(
        h_ii, h_i_pos, p_ii, p_i_pos, cos_floor
    )
