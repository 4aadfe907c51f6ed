"""InfoNCE with in-batch negatives, and TNCSE/JTCSE's cross-encoder variant (ICNCE).

Convention used by the whole library: ``temperature`` is tau and logits are ``cos / tau``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab.losses._checks import as_float32, check_matrix, check_positive, check_same_shape

_NORM_EPS = 1e-8


def cosine_similarity_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise cosine similarities ``C[i, j] = cos(a_i, b_j)``, computed in float32.

    Args:
        a: ``[N, d]``.
        b: ``[M, d]``.

    Returns:
        float32 tensor ``[N, M]``. Rows with zero norm give cosine 0 (norms are floored at 1e-8).
    """
    check_matrix("a", a)
    check_matrix("b", b, min_rows=0)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same width, got {tuple(a.shape)} and {tuple(b.shape)}")
    a_n = F.normalize(as_float32(a), dim=-1, eps=_NORM_EPS)
    b_n = F.normalize(as_float32(b), dim=-1, eps=_NORM_EPS)
    return a_n @ b_n.T


def rowwise_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-by-row cosine similarities ``c[i] = cos(a_i, b_i)`` in float32; ``a``, ``b``: ``[N, d]`` -> ``[N]``."""
    check_matrix("a", a)
    check_same_shape(("a", "b"), (a, b))
    a_n = F.normalize(as_float32(a), dim=-1, eps=_NORM_EPS)
    b_n = F.normalize(as_float32(b), dim=-1, eps=_NORM_EPS)
    return (a_n * b_n).sum(dim=-1)


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float = 0.05,
             negatives: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE with in-batch negatives (SimCSE; TNCSE Eq. 4; JTCSE Eq. 11; IFCL Eq. 7).

    ``L = mean_i -log( exp(cos(a_i, b_i)/tau) / sum_j exp(cos(a_i, b_j)/tau) )``, i.e. cross-entropy
    over the logits ``cos(a_i, b_j) / tau`` with label ``i``.

    Args:
        anchors: ``[B, d]`` (any float dtype; computed in float32).
        positives: ``[B, d]``; row ``i`` is the positive of anchor ``i``, the other rows its negatives.
        temperature: tau > 0.
        negatives: optional boolean ``[B, B]``: ``negatives[i, j]`` says whether ``b_j`` counts as a negative of
            ``a_i`` (the sum over ``j`` keeps only those and ``i`` itself; ours, to leave out pairs known to be
            related). None: every other row is a negative.

    Returns:
        float32 scalar.
    """
    check_matrix("anchors", anchors)
    check_same_shape(("anchors", "positives"), (anchors, positives))
    check_positive("temperature", temperature)
    logits = cosine_similarity_matrix(anchors, positives) / temperature
    if negatives is not None:
        if negatives.shape != logits.shape or negatives.dtype != torch.bool:
            raise ValueError(f"negatives must be a boolean matrix of shape {tuple(logits.shape)}, got "
                             f"{negatives.dtype} {tuple(negatives.shape)}")
        kept = negatives | torch.eye(logits.shape[0], dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(~kept.to(logits.device), float("-inf"))
    labels = torch.arange(logits.shape[0], device=logits.device)
    return F.cross_entropy(logits, labels)


def cross_encoder_info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Cross-encoder InfoNCE ``X(a, b)`` of TNCSE's ICNCE (TNCSE Eq. 5, JTCSE Eq. 12).

    ``a`` (query side, e.g. encoder I) and ``b`` (key side, e.g. encoder II) are ``[2B, d]`` stacks of
    two dropout copies of the same B sentences: rows ``0..B-1`` are copy 1, rows ``B..2B-1`` copy 2.
    Logits are ``cos(a_k, b_l) / tau`` over the 2B rows of ``b``. Row ``k`` of ``a`` has as positive
    row ``(k + B) mod 2B`` of ``b`` (the OTHER dropout copy of the same sentence in the other encoder);
    its same-copy partner, row ``k`` of ``b``, is masked out of the logits (-inf). The loss is the
    mean over the 2B rows. With B = 1 the only remaining logit is the positive and the loss is 0.

    Args:
        a: ``[2B, d]``.
        b: ``[2B, d]``.
        temperature: tau > 0.

    Returns:
        float32 scalar.
    """
    check_matrix("a", a, min_rows=2)
    check_same_shape(("a", "b"), (a, b))
    check_positive("temperature", temperature)
    n = a.shape[0]
    if n % 2 != 0:
        raise ValueError(f"a and b must stack two copies of the batch (even number of rows), got {n} rows")
    half = n // 2
    logits = cosine_similarity_matrix(a, b) / temperature
    same_copy = torch.eye(n, dtype=torch.bool, device=logits.device)
    logits = logits.masked_fill(same_copy, float("-inf"))
    labels = (torch.arange(n, device=logits.device) + half) % n
    return F.cross_entropy(logits, labels)
