"""Seed statistics and paired significance tests (JTCSE Fig. 6: seeds 1..5, mean and std).

* :func:`summarize_seeds` -- mean and *sample* standard deviation (ddof = 1) over seeds.
* :func:`paired_test` -- two configurations evaluated on the same seeds: paired t-test
  (``scipy.stats.ttest_rel``) on the per-seed differences, plus the Wilcoxon signed-rank test
  (``scipy.stats.wilcoxon``) when there are at least 6 pairs. With the papers' 5 seeds only the
  t-test is reported: the exact two-sided Wilcoxon p-value cannot go below 2 / 2^5 = 0.0625 with
  n = 5, so it could never reject at the 5% level and would only add noise to a report.

The paired t statistic is ``t = mean(d) / (std(d, ddof=1) / sqrt(n))`` with ``d = a - b`` and
``n - 1`` degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["WILCOXON_MIN_N", "PairedTest", "SeedSummary", "paired_test", "summarize_seeds"]

WILCOXON_MIN_N = 6
"""Smallest number of matched seeds for which the Wilcoxon signed-rank test is also run."""

Scores = Sequence[float] | Mapping[int, float] | np.ndarray


@dataclass(frozen=True)
class SeedSummary:
    """Mean and sample standard deviation (ddof = 1; 0 for one seed) of a score over ``n`` seeds."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...]


def summarize_seeds(scores: Scores) -> SeedSummary:
    """Mean and sample standard deviation of per-seed scores (a sequence, or a ``seed -> score``
    mapping, seeds in sorted order). JTCSE Fig. 6."""
    vals = np.asarray(
        [scores[k] for k in sorted(scores)] if isinstance(scores, Mapping) else scores, dtype=float
    )
    vals = vals.reshape(-1)
    if vals.size == 0:
        raise ValueError("summarize_seeds needs at least one score")
    std = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
    return SeedSummary(
        mean=float(vals.mean()), std=std, n=int(vals.size), values=tuple(float(v) for v in vals)
    )


@dataclass(frozen=True)
class PairedTest:
    """Result of comparing configuration A with configuration B over matched seeds.

    ``mean_diff``/``std_diff``: mean and sample std of ``d = a - b``; ``t_statistic``/``t_pvalue``:
    paired t-test (``df = n - 1``); ``wilcoxon_statistic``/``wilcoxon_pvalue``: Wilcoxon signed-rank
    test, ``None`` when ``n < 6``; ``tests``: the names of the tests run, e.g.
    ``("paired t-test",)``; ``alternative``: ``"two-sided"``, ``"greater"`` (A > B) or ``"less"``.
    """

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    std_diff: float
    t_statistic: float
    t_pvalue: float
    df: int
    wilcoxon_statistic: float | None
    wilcoxon_pvalue: float | None
    tests: tuple[str, ...]
    alternative: str

    def significant(self, level: float = 0.05) -> bool:
        """True if the paired t-test (and the Wilcoxon test, when run) reject at ``level``."""
        ok = math.isfinite(self.t_pvalue) and self.t_pvalue < level
        if self.wilcoxon_pvalue is not None:
            ok = ok and self.wilcoxon_pvalue < level
        return ok


def _matched(a: Scores, b: Scores) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise ValueError("pass both score sets as sequences or both as seed -> score mappings")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            raise ValueError(f"seed sets differ: {sorted(set(a) ^ set(b))} present on one side only")
        seeds = sorted(a)
        return (
            np.asarray([a[s] for s in seeds], dtype=float),
            np.asarray([b[s] for s in seeds], dtype=float),
        )
    x = np.asarray(a, dtype=float).reshape(-1)
    y = np.asarray(b, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"need the same number of seeds on both sides, got {x.size} and {y.size}")
    return x, y


def paired_test(a: Scores, b: Scores, *, alternative: str = "two-sided") -> PairedTest:
    """Paired comparison of two configurations over matched seeds.

    ``a``/``b``: per-seed scores, as equal-length sequences (position i = same seed) or as
    ``seed -> score`` mappings with identical seed sets. Runs ``scipy.stats.ttest_rel(a, b)`` and,
    when ``n >= 6``, ``scipy.stats.wilcoxon(a, b)`` (see the module docstring for why not at n = 5).
    ``alternative`` is passed to both ("greater" tests A > B). Needs ``n >= 2``; if all differences
    are equal the t statistic is undefined and scipy's nan/inf is returned as is.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    x, y = _matched(a, b)
    n = int(x.size)
    if n < 2:
        raise ValueError("a paired test needs at least two matched seeds")
    d = x - y
    t = stats.ttest_rel(x, y, alternative=alternative)
    w_stat: float | None = None
    w_p: float | None = None
    tests: tuple[str, ...] = ("paired t-test",)
    if n >= WILCOXON_MIN_N:
        try:
            w = stats.wilcoxon(x, y, alternative=alternative)
            w_stat, w_p = float(w.statistic), float(w.pvalue)
        except ValueError:  # e.g. all differences zero
            w_stat, w_p = math.nan, math.nan
        tests = ("paired t-test", "Wilcoxon signed-rank test")
    return PairedTest(
        n=n,
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        mean_diff=float(d.mean()),
        std_diff=float(d.std(ddof=1)),
        t_statistic=float(t.statistic),
        t_pvalue=float(t.pvalue),
        df=n - 1,
        wilcoxon_statistic=w_stat,
        wilcoxon_pvalue=w_p,
        tests=tests,
        alternative=alternative,
    )
