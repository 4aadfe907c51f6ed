"""The papers' published STS figures (``paper_figures.yaml`` beside this module), read for ``cselab reproduce``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from cselab.errors import CselabError

FIGURES_FILE = Path(__file__).with_name("paper_figures.yaml")


@dataclass(frozen=True)
class PaperRow:
    """One method on one backbone as its paper's table prints it."""

    method: str
    backbone: str
    paper: str
    source: str
    table: str
    section: str
    page: int | None
    scores: dict[str, float]  # task (cselab's name: sts12 .. sts16, stsb, sickr) -> Spearman x 100
    avg: float
    note: str = ""

    def citation(self) -> str:
        page = f", p. {self.page}" if self.page is not None else ""
        return f"{self.paper}, {self.table}{page} ({self.source})"


@lru_cache(maxsize=1)
def paper_tasks() -> tuple[str, ...]:
    return tuple(_load()["tasks"])


@lru_cache(maxsize=1)
def paper_rows() -> tuple[PaperRow, ...]:
    data = _load()
    rows = []
    for entry in data["rows"]:
        missing = [t for t in data["tasks"] if t not in entry.get("scores", {})]
        if missing:
            raise CselabError(f"{FIGURES_FILE}: {entry.get('method')} on {entry.get('backbone')} lacks {missing}")
        rows.append(PaperRow(**{**entry, "scores": {t: float(entry["scores"][t]) for t in data["tasks"]}}))
    return tuple(rows)


def paper_row(method: str, backbone: str) -> PaperRow | None:
    """The paper's figures of ``method`` on ``backbone`` (None: the paper reports no such row)."""
    return next((r for r in paper_rows() if r.method == method and r.backbone == backbone), None)


def paper_backbones(method: str) -> tuple[str, ...]:
    return tuple(r.backbone for r in paper_rows() if r.method == method)


def _load() -> dict:
    try:
        return yaml.safe_load(FIGURES_FILE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CselabError(f"cannot read the papers' figures {FIGURES_FILE}: {exc}") from None
