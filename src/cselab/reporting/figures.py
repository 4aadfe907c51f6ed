"""Figures of the analysis reports that the analysis library does not draw itself.

* :func:`plot_cls_energy_per_layer` -- the CLS energy weight ``E_CLS`` of every layer, one line per
  encoder (JTCSE Eq. 6; the per-layer view behind the layer average of its Fig. 10).
* :func:`plot_ablation` -- one bar per loss-term subset (docs/methods.md#analyses, loss-term ablation).

Both use the headless Agg figures of :mod:`cselab.reporting.plots` and return the written PNG path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from cselab.reporting.plots import new_figure, save_figure

__all__ = ["plot_ablation", "plot_cls_energy_per_layer"]


def plot_cls_energy_per_layer(
    per_layer: Mapping[str, Sequence[float]],
    path: str | Path,
    *,
    title: str = "CLS energy weight per layer",
) -> Path:
    """Line plot of ``E_CLS`` against the layer (1-based), one line per encoder, its layer mean in the
    legend. ``per_layer`` maps an encoder name to its per-layer values (layer 1 first)."""
    if not per_layer:
        raise ValueError("plot_cls_energy_per_layer needs at least one encoder")
    fig = new_figure(6.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    longest = 0
    for name, values in per_layer.items():
        vals = np.asarray(values, dtype=float)
        layers = np.arange(1, vals.size + 1)
        longest = max(longest, vals.size)
        ax.plot(layers, vals, "o-", label=f"{name} (mean {np.nanmean(vals):.3f})")
    ax.set_xticks(np.arange(1, longest + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel(r"$E_{CLS} = \|h_{cls}\|_2 / \|H_-\|_F$ (mean over sentences)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save_figure(fig, path)


def plot_ablation(
    means: Mapping[str, float],
    path: str | Path,
    *,
    stds: Mapping[str, float] | None = None,
    ylabel: str = "score",
    title: str = "Loss-term ablation",
) -> Path:
    """Bar per variant (e.g. ``nce+ictn``) with its value printed on top and, when ``stds`` has the
    variant, a sample-std error bar. Bars keep the mapping's order."""
    if not means:
        raise ValueError("plot_ablation needs at least one variant")
    names = list(means)
    vals = np.array([means[n] for n in names], dtype=float)
    errs = np.array([(stds or {}).get(n, 0.0) for n in names], dtype=float)
    fig = new_figure(max(4.0, 1.1 * len(names) + 2.0), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(names)), vals, yerr=errs, capsize=6, color="tab:blue", alpha=0.8)
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.2f}", (i, v), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    lo, hi = float(np.nanmin(vals - errs)), float(np.nanmax(vals + errs))
    pad = max(0.5, 0.2 * (hi - lo))
    ax.set_ylim(lo - pad, hi + 2 * pad)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
