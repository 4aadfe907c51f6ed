"""Markdown tables rendered from results records, never typed by hand.

A README block between ``<!-- cselab:NAME -->`` and ``<!-- /cselab:NAME -->`` is replaced by the
rendered table, so the README's figures always come from the records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import CselabError

TASK_COLUMNS = (
    ("sts12-part", "STS12-part"), ("sts13-part", "STS13-part"), ("sts14-part", "STS14-part"),
    ("sts15-part", "STS15-part"), ("sts16-part", "STS16-part"), ("stsb", "STS-B"), ("sts17-en", "STS17-en"),
    ("avg-available", "avg"),
)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"results file not found: {path}")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CselabError(f"{path}:{lineno}: not a JSON record ({exc.msg})") from exc
    return records


def _fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, (int, float)) else str(value)


def protocol_table(records: Sequence[dict[str, Any]]) -> str:
    """Methods x tasks (test scores of the dev-selected checkpoint), plus dev, cost and provenance."""
    header = ["method", "variant", "seed", "steps", "prec.", "dev start", "dev best",
              *[name for _, name in TASK_COLUMNS], "wall s", "sent/s", "peak MB", "commit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        scores = r.get("scores", {})
        row = [r.get("method", "?"), r.get("variant") or "", str(r.get("seed", "")), str(r.get("steps", "")),
               r.get("precision", ""), _fmt(scores.get("stsb_dev_start")), _fmt(scores.get("stsb_dev_best")),
               *[_fmt(scores.get(key)) for key, _ in TASK_COLUMNS],
               _fmt(r.get("wall_s"), 0), _fmt(r.get("train_sentences_per_s"), 0), _fmt(r.get("peak_mem_mb"), 0),
               str(r.get("git", ""))[:9]]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def replace_block(text: str, name: str, content: str) -> str:
    """Replace the README block ``name`` with ``content``; error if the markers are missing."""
    pattern = re.compile(rf"(<!-- cselab:{re.escape(name)} -->\n).*?(\n<!-- /cselab:{re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise CselabError(f"README has no block <!-- cselab:{name} --> ... <!-- /cselab:{name} -->")
    return pattern.sub(lambda m: m.group(1) + content + m.group(2), text)
