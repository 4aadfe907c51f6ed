"""Plots shared by the analyses (matplotlib, Agg canvas, PNG files; nothing is ever displayed).

Figures are built with :class:`matplotlib.figure.Figure` and an explicit Agg canvas instead of
``pyplot``: no global backend is switched, no figure is registered with a GUI manager and nothing
leaks between calls, so the functions are safe in headless CLIs and in tests.

Plots here:

* :func:`plot_alignment_uniformity` -- the alignment/uniformity map of Wang & Isola (2020) as
  drawn by SimCSE (Fig. 2), JTCSE (Fig. 7) and TNCSE: x = uniformity, y = alignment, one labelled
  point per model, optionally coloured by an STS score. Lower-left is better on both axes.
* :func:`plot_seed_summary` -- mean and sample standard deviation over seeds per configuration
  (JTCSE Fig. 6).
* :func:`plot_metric_vs_score` -- a per-model metric (e.g. the mean CLS energy weight) against the
  STS score with a least-squares trend line (JTCSE Fig. 10).
* :func:`plot_cls_energy_per_layer` -- the CLS energy weight of every layer, one line per encoder (JTCSE Eq. 6).
* :func:`plot_attention_heatmap`, :func:`plot_attention_sink` -- attention maps and attention-sink statistics
  (the attention analysis, :mod:`cselab.research.analysis.attention`).
* :func:`plot_similarity_density` -- densities of cosine similarity per gold-score group (TNCSE's figure).
* :func:`plot_ablation` -- one bar per loss-term subset.

This module is the one place that draws: the analyses compute, and hand their results here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cselab.figures import new_figure, save_figure

__all__ = [
    "AlignUniformPoint",
    "plot_ablation",
    "plot_attention_heatmap",
    "plot_attention_sink",
    "plot_cls_energy_per_layer",
    "plot_similarity_density",
    "plot_alignment_uniformity",
    "plot_metric_vs_score",
    "plot_seed_summary",
]


@dataclass(frozen=True)
class AlignUniformPoint:
    """One model on the alignment/uniformity map.

    ``alignment`` and ``uniformity`` are the Wang & Isola metrics of
    :mod:`cselab.evaluation.alignment_uniformity`; ``score`` is optional (e.g. STS-B Spearman x 100)
    and is used to colour the point.
    """

    label: str
    alignment: float
    uniformity: float
    score: float | None = None


def plot_alignment_uniformity(
    points: Sequence[AlignUniformPoint] | Mapping[str, tuple[float, float]],
    path: str | Path,
    *,
    scores: Mapping[str, float] | None = None,
    title: str = "Alignment vs. uniformity (lower-left is better)",
    score_label: str = "STS score",
) -> Path:
    """Scatter of (uniformity, alignment), one labelled point per model; PNG written to ``path``.

    The layout follows SimCSE Fig. 2 / JTCSE Fig. 7: x axis = uniformity
    ``log E exp(-2||f(x)-f(y)||^2)``, y axis = alignment ``E||f(x)-f(x+)||^2``; both are "lower is
    better". ``points`` is either a sequence of :class:`AlignUniformPoint` or a mapping
    ``label -> (alignment, uniformity)``. If any point has a score (from the point itself or from
    ``scores``, keyed by label), points are coloured by it and a colour bar is drawn; points without
    a score are then drawn in grey. Returns the written path.
    """
    if isinstance(points, Mapping):
        pts = [
            AlignUniformPoint(label=k, alignment=float(a), uniformity=float(u))
            for k, (a, u) in points.items()
        ]
    else:
        pts = list(points)
    if not pts:
        raise ValueError("plot_alignment_uniformity needs at least one point")
    score_of = {p.label: p.score for p in pts}
    if scores is not None:
        score_of.update({k: float(v) for k, v in scores.items() if k in score_of})

    fig = new_figure(6.4, 5.0)
    ax = fig.add_subplot(1, 1, 1)
    xs = np.array([p.uniformity for p in pts], dtype=float)
    ys = np.array([p.alignment for p in pts], dtype=float)
    scored = np.array([score_of[p.label] is not None for p in pts])
    if scored.any():
        if (~scored).any():
            ax.scatter(xs[~scored], ys[~scored], c="lightgrey", edgecolors="k", s=60, label="no score")
        vals = np.array([score_of[p.label] for p in pts if score_of[p.label] is not None], dtype=float)
        sc = ax.scatter(xs[scored], ys[scored], c=vals, cmap="viridis", edgecolors="k", s=60)
        fig.colorbar(sc, ax=ax, label=score_label)
    else:
        ax.scatter(xs, ys, c="tab:blue", edgecolors="k", s=60)
    for p in pts:
        text = p.label if score_of[p.label] is None else f"{p.label} ({score_of[p.label]:.2f})"
        ax.annotate(text, (p.uniformity, p.alignment), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel(r"uniformity  $\log\,\mathbb{E}\,e^{-2\|f(x)-f(y)\|^2}$  (lower is better)")
    ax.set_ylabel(r"alignment  $\mathbb{E}\,\|f(x)-f(x^+)\|^2$  (lower is better)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if scored.any() and (~scored).any():
        ax.legend(loc="best", fontsize=8)
    # a little room so labels are not clipped
    ax.margins(0.15)
    return save_figure(fig, path)


def plot_seed_summary(
    results: Mapping[str, Sequence[float]],
    path: str | Path,
    *,
    ylabel: str = "score",
    title: str = "Mean and standard deviation over seeds",
) -> Path:
    """Mean +/- sample standard deviation (ddof=1) per configuration as an error bar, with every seed
    drawn as a dot beside it (JTCSE Fig. 6). ``results`` maps a configuration name to its per-seed scores.
    Returns the written path."""
    if not results:
        raise ValueError("plot_seed_summary needs at least one configuration")
    names = list(results)
    fig = new_figure(max(4.0, 1.2 * len(names) + 2.0), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for i, name in enumerate(names):
        vals = np.asarray(results[name], dtype=float)
        mean = float(vals.mean())
        std = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
        ax.errorbar(
            i,
            mean,
            yerr=std,
            fmt="o",
            color="tab:blue",
            ms=9,
            capsize=8,
            lw=2,
            zorder=3,
            label="mean ± sample std" if i == 0 else None,
        )
        ax.scatter(
            np.full(vals.size, i + 0.18),
            vals,
            color="k",
            s=14,
            zorder=3,
            label="individual seeds" if i == 0 else None,
        )
        ax.annotate(
            f"{mean:.2f} ± {std:.2f}\n(n={vals.size})",
            (i - 0.1, mean),
            textcoords="offset points",
            xytext=(-4, 0),
            ha="right",
            va="center",
            fontsize=8,
        )
    ax.set_xlim(-0.8, len(names) - 0.4)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    lo = min(float(np.min(results[n])) for n in names)
    hi = max(float(np.max(results[n])) for n in names)
    pad = max(0.5, 0.25 * (hi - lo))
    ax.set_ylim(lo - pad, hi + 2 * pad)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)


def plot_metric_vs_score(
    metric: Mapping[str, float],
    score: Mapping[str, float],
    path: str | Path,
    *,
    xlabel: str = r"mean CLS energy weight $E_{CLS}$",
    ylabel: str = "STS score",
    title: str = "Metric vs. STS score",
) -> Path:
    """Scatter of a per-model metric (x) against its score (y), labelled points and a least-squares
    trend line when there are at least two models (JTCSE Fig. 10: mean E_CLS vs 7-STS average).
    Only models present in both mappings are drawn. Returns the written path."""
    labels = [k for k in metric if k in score]
    if not labels:
        raise ValueError("plot_metric_vs_score: no model appears in both mappings")
    xs = np.array([metric[k] for k in labels], dtype=float)
    ys = np.array([score[k] for k in labels], dtype=float)
    fig = new_figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(xs, ys, color="tab:red", edgecolors="k", s=50, zorder=3)
    for k, x, y in zip(labels, xs, ys, strict=True):
        ax.annotate(k, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    if len(labels) >= 2 and np.ptp(xs) > 0:
        slope, intercept = np.polyfit(xs, ys, 1)
        grid = np.linspace(xs.min(), xs.max(), 50)
        r = float(np.corrcoef(xs, ys)[0, 1])
        ax.plot(grid, slope * grid + intercept, "--", color="grey", label=f"trend (Pearson r = {r:.2f})")
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.margins(0.15)
    return save_figure(fig, path)


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


def plot_attention_heatmap(
    attention: Any,
    tokens: Sequence[str],
    path: str | Path,
    *,
    panel_titles: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Heat map(s) of a token-by-token attention matrix, token labels on both axes; PNG to ``path``.

    ``attention``: ``(T, T)`` or ``(P, T, T)`` (one panel per leading index, e.g. per layer), rows =
    queries ("attending token", y axis), columns = keys ("attended token", x axis); ``tokens``: the
    ``T`` token strings. All panels share one colour scale. JTCSE Fig. 9. Returns the written path.
    """
    arr = np.asarray(
        attention.detach().cpu().float() if hasattr(attention, "detach") else attention, dtype=float
    )
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"attention must have shape (T, T) or (P, T, T), got {arr.shape}")
    n_panels, length, _ = arr.shape
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} token labels for a {length}x{length} attention matrix")
    if panel_titles is not None and len(panel_titles) != n_panels:
        raise ValueError(f"{len(panel_titles)} panel titles for {n_panels} panels")
    ncols = min(n_panels, 4)
    nrows = math.ceil(n_panels / ncols)
    side = max(3.5, 0.32 * length + 1.5)
    fig = new_figure(side * ncols + 1.0, side * nrows + 0.6)
    vmax = float(arr.max()) if arr.size else 1.0
    image = None
    for k in range(n_panels):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        image = ax.imshow(arr[k], cmap="viridis", vmin=0.0, vmax=vmax, aspect="equal")
        ax.set_xticks(range(length), list(tokens), rotation=90, fontsize=7)
        ax.set_yticks(range(length), list(tokens), fontsize=7)
        ax.set_xlabel("attended token (key)")
        ax.set_ylabel("attending token (query)")
        if panel_titles is not None:
            ax.set_title(panel_titles[k], fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, shrink=0.8, label="attention probability")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_attention_sink(
    stats: Any, path: str | Path, *, title: str | None = None
) -> Path:
    """Line plot, per layer, of the attention received by [CLS], the final [SEP] and the final
    punctuation, with the uniform-attention level dashed; one panel per model when a mapping
    ``name -> stats`` is given. Returns the written path."""
    items = stats.items() if isinstance(stats, dict) else [("", stats)]
    items = list(items)
    fig = new_figure(5.5 * len(items), 4.2)
    for k, (name, s) in enumerate(items):
        ax = fig.add_subplot(1, len(items), k + 1)
        layers = np.arange(1, len(s.cls) + 1)
        ax.plot(layers, s.cls, "o-", label="[CLS]")
        ax.plot(layers, s.sep, "s-", label="final [SEP]")
        if s.n_with_punct:
            ax.plot(layers, s.punct, "^-", label=f"final punctuation (n={s.n_with_punct})")
        ax.axhline(s.uniform, ls="--", color="grey", label="uniform attention")
        ax.set_xlabel("layer")
        ax.set_ylabel("attention received\n(mean over heads, queries and sentences)")
        ax.set_xticks(layers)
        ax.set_title(f"{name} (N={s.n_sentences} sentences)" if name else f"N={s.n_sentences} sentences")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_similarity_density(
    results: Any,
    path: str | Path,
    *,
    title: str = "Cosine similarity of STS-B test pairs by gold-score group",
) -> Path:
    """Ridge plot of the per-group cosine-similarity densities, one panel per model; PNG to ``path``.

    x axis: cosine similarity predicted by the model; y axis: gold-score group (each group's density
    is scaled to the same peak height and drawn on its own baseline); a tick marks each group's
    median. ``results`` is one :class:`SimilarityDensity` or a mapping ``model name -> result``.
    Returns the written path.
    """
    items = list(results.items()) if isinstance(results, Mapping) else [("", results)]
    if not items:
        raise ValueError("plot_similarity_density needs at least one result")
    n = len(items)
    ncols = min(n, 4)
    nrows = -(-n // ncols)
    fig = new_figure(4.6 * ncols, 4.2 * nrows)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for p, (name, res) in enumerate(items):
        ax = fig.add_subplot(nrows, ncols, p + 1)
        labels = list(res.groups)
        for k, label in enumerate(labels):
            dens = res.density[label]
            peak = float(dens.max()) if dens.size else 0.0
            curve = k + 0.9 * (dens / peak if peak > 0 else dens)
            color = colors[k % len(colors)]
            ax.fill_between(
                res.grid,
                k,
                curve,
                color=color,
                alpha=0.45,
                label=f"gold {label} (n={res.groups[label].size})",
            )
            ax.plot(res.grid, curve, color=color, lw=1)
            med = res.medians[label]
            if np.isfinite(med):
                ax.plot([med, med], [k, k + 0.9], color="k", lw=1.2, ls=":")
        ax.set_yticks(range(len(labels)), [f"gold {lab}" for lab in labels])
        ax.set_ylim(-0.1, len(labels) + 0.1)
        ax.set_xlim(res.grid[0], res.grid[-1])
        ax.set_xlabel("cosine similarity (model)")
        if p % ncols == 0:
            ax.set_ylabel("gold-score group (density, peak-normalised)")
        ax.set_title(name if name else "model")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", title="dotted line = median", title_fontsize=7)
    fig.suptitle(title)
    return save_figure(fig, path)
