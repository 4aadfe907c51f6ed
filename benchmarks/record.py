"""Appending one benchmark record, with the command that made it and the provenance, to a JSON-lines file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cselab.provenance import git_commit

git_commit()  # read when the script starts: its records name the code that ran, not the code at writing time


def append_record(results: Path, record: dict[str, Any], script: str, argv: list[str]) -> None:
    from cselab.provenance import provenance  # the machine part imports torch: only when writing

    record = {**record, "command": " ".join(["python", f"benchmarks/{script}", *argv]), "provenance": provenance()}
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(results, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(f"appended to {results}")
