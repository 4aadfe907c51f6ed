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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "AlignUniformPoint",
    "new_figure",
    "plot_alignment_uniformity",
    "plot_metric_vs_score",
    "plot_seed_summary",
    "save_figure",
]


def new_figure(width: float = 6.4, height: float = 4.8, dpi: int = 120) -> Figure:
    """A fresh matplotlib :class:`Figure` (constrained layout) on an Agg canvas (no pyplot, no display)."""
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG to ``path`` (parent folders are created) and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", bbox_inches="tight")
    return out


@dataclass(frozen=True)
class AlignUniformPoint:
    """One model on the alignment/uniformity map.

    ``alignment`` and ``uniformity`` are the Wang & Isola metrics of
    :mod:`cselab.analysis.alignment_uniformity`; ``score`` is optional (e.g. STS-B Spearman x 100)
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


def plot_adaptation(before: Mapping[str, float], after: Mapping[str, float], curve: Sequence[tuple[int, float]],
                    selection: str, path: str | Path) -> Path:
    """``cselab adapt``'s picture: the user's scores before and after (left; absent when no labelled file was
    given) and the selection score at every evaluated step (right)."""
    keys = [k for k in before if k in after]
    panels = 2 if keys else 1
    fig = new_figure(5.2 * panels, 4.0)
    if keys:
        ax = fig.add_subplot(1, panels, 1)
        x = np.arange(len(keys))
        ax.bar(x - 0.2, [before[k] for k in keys], 0.4, label="before")
        ax.bar(x + 0.2, [after[k] for k in keys], 0.4, label="after")
        ax.set_xticks(x, keys, rotation=20, ha="right", fontsize=8)
        low = min(min(before[k], after[k]) for k in keys)
        ax.set_ylim(max(0.0, low - 5.0), None)
        ax.set_ylabel("score")
        ax.legend(fontsize=8)
        ax.set_title("your task")
    ax = fig.add_subplot(1, panels, panels)
    if curve:
        steps, scores = zip(*curve, strict=True)
        ax.plot(steps, scores, marker="o")
        best = int(np.argmax(scores))
        ax.scatter([steps[best]], [scores[best]], color="red", zorder=3, label="selected")
        ax.legend(fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(selection)
    ax.set_title("selection (no labels)")
    return save_figure(fig, path)
