"""Alignment and uniformity of sentence embeddings (Wang & Isola, ICML 2020).

Used by SimCSE (Sec. 5 / Fig. 2), JTCSE (Sec. V-A, Fig. 7, Eqs. for ``l_align``/``l_uniform``) and
TNCSE to compare embedding spaces:

* ``alignment  = E_{(x, x+) ~ p_pos} ||f(x) - f(x+)||_2^alpha``  (alpha = 2)
* ``uniformity = log E_{x, y ~ p_data, i.i.d.} exp(-t ||f(x) - f(y)||_2^2)``  (t = 2)

``f`` is the L2-normalised embedding: both functions normalise their inputs themselves, so raw
encoder outputs can be passed. Both are "lower is better".

Protocol (SimCSE appendix, docs/methods.md#analyses): positive pairs are the STS-B pairs whose gold
score is > 4 (see :func:`sts_positive_pairs`); ``p_data`` is every STS-B sentence, i.e. both sides
of every pair (see :func:`sts_alignment_uniformity`).

All computations run in float64 on CPU tensors; inputs may be torch tensors or numpy arrays of
shape ``(N, D)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "AlignUniform",
    "alignment",
    "sts_alignment_uniformity",
    "sts_positive_pairs",
    "uniformity",
]

ArrayLike = torch.Tensor | np.ndarray


def _as_matrix(x: ArrayLike, name: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x.detach())
    t = t.to(device="cpu", dtype=torch.float64)
    if t.dim() != 2:
        raise ValueError(f"{name} must have shape (N, D), got {tuple(t.shape)}")
    return t


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, p=2, dim=1)


def alignment(x: ArrayLike, y: ArrayLike, alpha: float = 2) -> float:
    """Alignment ``E ||f(x_i) - f(y_i)||_2^alpha`` over positive pairs ``(x_i, y_i)``.

    ``x`` and ``y`` have shape ``(N, D)``; row ``i`` of ``x`` and row ``i`` of ``y`` are a positive
    pair. Rows are L2-normalised first, so the value lies in ``[0, 2^alpha]``; identical (or
    positively parallel) pairs give 0. Wang & Isola (2020), Eq. 4; JTCSE Sec. V-A.
    """
    a = _normalise(_as_matrix(x, "x"))
    b = _normalise(_as_matrix(y, "y"))
    if a.shape != b.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] == 0:
        raise ValueError("alignment needs at least one positive pair")
    return float((a - b).norm(p=2, dim=1).pow(alpha).mean())


def uniformity(x: ArrayLike, t: float = 2) -> float:
    """Uniformity ``log E_{i<j} exp(-t ||f(x_i) - f(x_j)||_2^2)`` over all distinct pairs of rows.

    ``x`` has shape ``(N, D)`` with ``N >= 2``; rows are L2-normalised first. The expectation is
    over the ``N(N-1)/2`` unordered pairs ``i < j`` (``torch.pdist``), as in the reference code of
    Wang & Isola (2020), Eq. 5. Computed as ``logsumexp(-t d^2) - log(#pairs)`` for numerical
    stability. Values are ``<= 0``; lower means more uniform on the hypersphere.
    """
    a = _normalise(_as_matrix(x, "x"))
    n = a.shape[0]
    if n < 2:
        raise ValueError("uniformity needs at least two embeddings")
    sq = torch.pdist(a, p=2).pow(2)
    return float(torch.logsumexp(-t * sq, dim=0) - math.log(sq.numel()))


def sts_positive_pairs(
    emb1: ArrayLike, emb2: ArrayLike, scores: ArrayLike, threshold: float = 4.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Select the STS pairs used as positives for alignment: gold score strictly greater than
    ``threshold`` (4.0 on the 0-5 STS-B scale, SimCSE/JTCSE protocol).

    ``emb1``/``emb2``: ``(N, D)`` embeddings of the first/second sentence of each pair;
    ``scores``: ``(N,)`` gold scores. Returns the two ``(M, D)`` float64 tensors of the selected
    rows (``M`` = number of pairs with gold > threshold), in the original order.
    """
    a = _as_matrix(emb1, "emb1")
    b = _as_matrix(emb2, "emb2")
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64)).reshape(-1)
    if not (a.shape[0] == b.shape[0] == s.shape[0]):
        raise ValueError(
            f"emb1, emb2 and scores must have the same length, got {a.shape[0]}, {b.shape[0]}, {s.shape[0]}"
        )
    keep = s > threshold
    return a[keep], b[keep]


@dataclass(frozen=True)
class AlignUniform:
    """Alignment/uniformity of one model on STS pairs.

    ``n_positive_pairs``: pairs with gold > threshold used for alignment; ``n_sentences``: sentences
    used for uniformity (both sides of every pair).
    """

    alignment: float
    uniformity: float
    n_positive_pairs: int
    n_sentences: int


def sts_alignment_uniformity(
    emb1: ArrayLike,
    emb2: ArrayLike,
    scores: ArrayLike,
    *,
    threshold: float = 4.0,
    alpha: float = 2,
    t: float = 2,
) -> AlignUniform:
    """Alignment over STS pairs with gold > ``threshold`` and uniformity over all STS sentences.

    ``emb1``/``emb2``: ``(N, D)`` embeddings of the two sides of each pair, ``scores``: ``(N,)``
    gold scores. Uniformity is computed on the ``2N`` rows of ``concat(emb1, emb2)`` (sentences that
    occur in several pairs are counted once per occurrence). SimCSE appendix / JTCSE Fig. 7.
    """
    a, b = sts_positive_pairs(emb1, emb2, scores, threshold)
    if a.shape[0] == 0:
        raise ValueError(f"no STS pair has a gold score > {threshold}; cannot compute alignment")
    everything = torch.cat([_as_matrix(emb1, "emb1"), _as_matrix(emb2, "emb2")], dim=0)
    return AlignUniform(
        alignment=alignment(a, b, alpha=alpha),
        uniformity=uniformity(everything, t=t),
        n_positive_pairs=int(a.shape[0]),
        n_sentences=int(everything.shape[0]),
    )
