"""Appending one benchmark record, with the command that made it and the provenance, to a JSON-lines file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ADAPT_RESULTS = RESULTS_DIR / "adapt.jsonl"  # the adaptation protocol's rows (adapt_checkpoint, adapt_uc, score_suite)


def append_record(results: Path, record: dict[str, Any], script: str, argv: list[str]) -> None:
    from cselab.provenance import provenance

    record = {**record, "command": " ".join(["python", f"benchmarks/{script}", *argv]), "provenance": provenance()}
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(results, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(f"appended to {results}")
