"""STS scoring as SentEval does it (docs/results.md#scoring): cosine, Spearman x 100.

For a task with several subsets (STS12-16) SentEval's ``all`` is ONE Spearman over the concatenation of
every subset; ``mean`` is the plain average of the per-subset Spearmans and ``wmean`` the size-weighted one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import spearmanr
from torch import Tensor


def pair_cosine(a: Tensor, b: Tensor) -> np.ndarray:
    """Row-wise cosine similarity of two [N, d] tensors, as float64 numpy."""
    sims = torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)
    return sims.numpy()


def spearman100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman correlation x 100 (NaN for constant inputs, like scipy)."""
    return float(spearmanr(predicted, gold).statistic) * 100.0


@dataclass(frozen=True)
class StsScore:
    """Scores of one task split: ``all`` (the papers' figure), ``mean``, ``wmean`` and per subset."""

    all: float
    mean: float
    wmean: float
    subsets: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return sum(self.sizes.values())


def score_subsets(predicted: Mapping[str, np.ndarray], gold: Mapping[str, np.ndarray]) -> StsScore:
    """Score per-subset predicted similarities against gold scores (same keys, same order)."""
    names = list(gold)
    per = {name: spearman100(predicted[name], gold[name]) for name in names}
    sizes = {name: len(gold[name]) for name in names}
    everything = spearman100(np.concatenate([predicted[n] for n in names]), np.concatenate([gold[n] for n in names]))
    weights = np.array([sizes[n] for n in names], dtype=float)
    values = np.array([per[n] for n in names])
    return StsScore(
        all=everything,
        mean=float(values.mean()),
        wmean=float((values * weights).sum() / weights.sum()),
        subsets=per,
        sizes=sizes,
    )


def rounded_average(scores: Sequence[float]) -> float:
    """The papers' average: the mean of the per-task scores each rounded to 2 decimals."""
    return float(np.mean([round(s, 2) for s in scores])) if scores else float("nan")
