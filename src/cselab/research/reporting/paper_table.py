"""Our figure beside the paper's: the table ``cselab reproduce`` prints (rows from
:func:`cselab.research.experiments.reproduce.comparison_rows`, read by attribute)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cselab.research.reporting.markdown import fmt, markdown_table


def _ours(row: Any) -> str:
    if row.ours is None:
        return "-"
    return f"{row.ours:.2f}" + (f" ± {row.std:.2f}" if row.std is not None else "")


def paper_comparison_table(rows: Sequence[Any], *, paper_label: str, seeds: Sequence[int]) -> str:
    """A Markdown table: task, the paper's figure, ours (mean ± sample std over the seeds), the set we scored, and
    ours minus the paper's where both are the same set on the same backbone."""
    n = len(seeds)
    header = ["task", paper_label, f"ours ({'seed' if n == 1 else 'mean ± std over seeds'} "
                                   f"{','.join(str(s) for s in seeds)})", "our set", "ours - paper"]
    body = [[row.task, fmt(row.paper), _ours(row), row.our_set,
             "-" if row.difference is None else f"{row.difference:+.2f}"] for row in rows]
    return "\n".join(markdown_table(header, body))
