"""Cosine-similarity density by gold-score group on STS-B test (JTCSE Fig. 5, also SimCSE Fig. 3).

STS-B test pairs are split by their gold score (0-5) into five groups ``[0,1)``, ``[1,2)``,
``[2,3)``, ``[3,4)``, ``[4,5]`` (the last one closed so that gold = 5 is included). For each group
the distribution of the model's cosine similarities is estimated (Gaussian KDE, or histograms).
A good model shifts the distribution to higher cosine similarity as the gold group rises -- the
"sub-diagonal" pattern the papers describe.

Plot layout: one panel per model; inside a panel every group is a ridge (a density curve drawn on
its own baseline) with the group on the y axis and the cosine similarity on the x axis; the median
of each group is marked. Each panel has a legend naming the groups and their sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import gaussian_kde

__all__ = [
    "SCORE_GROUPS",
    "SimilarityDensity",
    "cosine_similarities",
    "group_by_gold",
    "similarity_density",
]

SCORE_GROUPS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 5.0))
"""Gold-score groups; each is ``[lo, hi)`` except the last, ``[4, 5]``."""


def _group_label(k: int) -> str:
    lo, hi = SCORE_GROUPS[k]
    closing = "]" if k == len(SCORE_GROUPS) - 1 else ")"
    return f"[{lo:g},{hi:g}{closing}"


def cosine_similarities(emb1: torch.Tensor | np.ndarray, emb2: torch.Tensor | np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two ``(N, D)`` embedding matrices -> ``(N,)`` float64 array."""
    a = (
        torch.as_tensor(np.asarray(emb1) if not isinstance(emb1, torch.Tensor) else emb1.detach())
        .double()
        .cpu()
    )
    b = (
        torch.as_tensor(np.asarray(emb2) if not isinstance(emb2, torch.Tensor) else emb2.detach())
        .double()
        .cpu()
    )
    if a.shape != b.shape or a.dim() != 2:
        raise ValueError(f"emb1 and emb2 must both be (N, D), got {tuple(a.shape)} and {tuple(b.shape)}")
    return torch.nn.functional.cosine_similarity(a, b, dim=1).numpy()


def group_by_gold(similarities: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
    """Split ``(N,)`` similarities by the ``(N,)`` gold scores into :data:`SCORE_GROUPS`.

    Returns ``{"[0,1)": array, ..., "[4,5]": array}`` (all five keys, in order, possibly empty
    arrays). Gold scores outside ``[0, 5]`` are dropped.
    """
    sims = np.asarray(similarities, dtype=float).reshape(-1)
    g = np.asarray(gold, dtype=float).reshape(-1)
    if sims.shape != g.shape:
        raise ValueError(f"similarities and gold must have the same length, got {sims.size} and {g.size}")
    out: dict[str, np.ndarray] = {}
    for k, (lo, hi) in enumerate(SCORE_GROUPS):
        upper = g <= hi if k == len(SCORE_GROUPS) - 1 else g < hi
        out[_group_label(k)] = sims[(g >= lo) & upper]
    return out


@dataclass
class SimilarityDensity:
    """Per-group cosine similarities of one model and their estimated densities.

    ``groups``: group label -> ``(n_k,)`` cosine similarities; ``grid``: ``(G,)`` x values;
    ``density``: group label -> ``(G,)`` density on ``grid`` (Gaussian KDE; a histogram density for
    groups with fewer than 2 distinct values; zeros for empty groups); ``medians``: group label ->
    median similarity (nan if empty).
    """

    groups: dict[str, np.ndarray]
    grid: np.ndarray
    density: dict[str, np.ndarray]
    medians: dict[str, float]


def _density(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return np.zeros_like(grid)
    if values.size >= 2 and np.ptp(values) > 0:
        try:
            return gaussian_kde(values)(grid)
        except np.linalg.LinAlgError:  # singular covariance; fall back to a histogram
            pass
    width = (grid[-1] - grid[0]) / 40
    hist, edges = np.histogram(values, bins=40, range=(grid[0], grid[-1] + 1e-12))
    dens = hist / (values.size * width)
    idx = np.clip(np.searchsorted(edges, grid, side="right") - 1, 0, hist.size - 1)
    return dens[idx]


def similarity_density(
    emb1: torch.Tensor | np.ndarray,
    emb2: torch.Tensor | np.ndarray,
    gold: np.ndarray,
    *,
    grid_points: int = 200,
) -> SimilarityDensity:
    """Cosine similarity of each STS pair, grouped by gold score, with a density per group.

    ``emb1``/``emb2``: ``(N, D)`` embeddings of the two sides of the pairs; ``gold``: ``(N,)`` gold
    scores in [0, 5]. The density grid spans ``[min(-0.1, min sim), 1]`` with ``grid_points`` points.
    JTCSE Fig. 5.
    """
    sims = cosine_similarities(emb1, emb2)
    groups = group_by_gold(sims, gold)
    lo = min(-0.1, float(sims.min())) if sims.size else -0.1
    grid = np.linspace(lo, 1.0, grid_points)
    density = {k: _density(v, grid) for k, v in groups.items()}
    medians = {k: float(np.median(v)) if v.size else float("nan") for k, v in groups.items()}
    return SimilarityDensity(groups=groups, grid=grid, density=density, medians=medians)


