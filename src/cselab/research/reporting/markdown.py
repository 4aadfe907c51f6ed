"""How the reports write one cell and one table in Markdown: shared by every table module of ``reporting``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(value: Any, digits: int = 2) -> str:
    """A number to ``digits`` decimals, ``-`` for a missing value, anything else as text."""
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, (int, float)) else str(value)


def short_commit(commit: str) -> str:
    """First 9 hex digits; a trailing ``+dirty`` (uncommitted changes in the tree) shows as ``*``."""
    return commit[:9] + ("*" if commit.endswith("+dirty") else "")


def mean_std(values: Sequence[float]) -> str:
    """``mean ± sample std`` over seeds (the mean alone for one value, ``-`` for none)."""
    from cselab.research.reporting.significance import summarize_seeds

    if not values:
        return "-"
    s = summarize_seeds(values)
    return f"{s.mean:.2f}" if s.n == 1 else f"{s.mean:.2f} ± {s.std:.2f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]
