"""Figures without pyplot or a display: a fresh figure on an Agg canvas and its PNG on disk, for every report that
draws (``cselab adapt``'s report and the research wing's plots)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["new_figure", "save_figure"]


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
