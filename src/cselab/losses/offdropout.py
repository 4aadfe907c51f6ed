"""SimCSE++ off-dropout InfoNCE: negatives come from a third, dropout-free encoding of the batch."""

from __future__ import annotations

import math
from typing import Literal

import torch

from cselab.losses._checks import check_matrix, check_positive, check_same_shape
from cselab.losses.info_nce import cosine_similarity_matrix, rowwise_cosine

OFFDROPOUT_SCALES = ("negatives", "positive")


def offdropout_info_nce(
    z1: torch.Tensor,
    z2: torch.Tensor,
    z0: torch.Tensor,
    temperature: float = 0.05,
    m: float = 0.9,
    scale: Literal["negatives", "positive"] = "negatives",
) -> torch.Tensor:
    """Off-dropout InfoNCE of SimCSE++ (paper Eq. 3), with ``s = cos / tau``.

    ``scale="negatives"`` (the paper), per row i::

        L_i = -s(z1_i, z2_i) + log( exp(s(z1_i, z2_i)) + m * sum_{j != i} exp(s(z0_i, z0_j)) )

    ``scale="positive"`` (the reference code's variant: the positive logit is scaled by m)::

        L_i = -m*s(z1_i, z2_i) + log( exp(m*s(z1_i, z2_i)) + sum_{j != i} exp(s(z0_i, z0_j)) )

    Both coincide for m = 1. Computed with logsumexp (``log m`` is added to the negative logits in the
    paper variant). The result is the mean of ``L_i`` over rows. The positive pair is the two dropout
    views; the negatives are no-dropout vs no-dropout only.

    Args:
        z1: ``[B, d]`` first dropout view.
        z2: ``[B, d]`` second dropout view.
        z0: ``[B, d]`` the same batch encoded with dropout off.
        temperature: tau > 0.
        m: weight > 0 (0.9 in the paper).
        scale: ``"negatives"`` or ``"positive"``.

    Returns:
        float32 scalar.
    """
    check_matrix("z1", z1)
    check_same_shape(("z1", "z2", "z0"), (z1, z2, z0))
    check_positive("temperature", temperature)
    check_positive("m", m)
    if scale not in OFFDROPOUT_SCALES:
        raise ValueError(f"scale must be one of {OFFDROPOUT_SCALES}, got {scale!r}")
    pos = rowwise_cosine(z1, z2) / temperature  # [B]
    neg = cosine_similarity_matrix(z0, z0) / temperature  # [B, B]
    diagonal = torch.eye(neg.shape[0], dtype=torch.bool, device=neg.device)
    neg = neg.masked_fill(diagonal, float("-inf"))
    if scale == "negatives":
        neg = neg + math.log(m)
    else:
        pos = pos * m
    logits = torch.cat([pos.unsqueeze(1), neg], dim=1)  # [B, 1 + B]
    return (torch.logsumexp(logits, dim=1) - pos).mean()
