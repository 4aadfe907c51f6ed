"""Where the lab keeps its records, and appending one record with the command that made it and its provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository: every command of a record runs from here
RESULTS_DIR = ROOT / "lab" / "results"
RUNS_DIR = ROOT / "runs"  # the lab's run directories (not kept in git)
ADAPT_RESULTS = RESULTS_DIR / "adapt.jsonl"  # the adaptation protocol's rows (adapt_checkpoint, adapt_uc, score_suite)


def module_of(script: str | Path) -> str:
    """``lab/domain_study/run_domains.py`` -> ``lab.domain_study.run_domains`` (what ``python -m`` runs)."""
    return ".".join(Path(script).resolve().relative_to(ROOT).with_suffix("").parts)


def append_record(results: Path, record: dict[str, Any], script: str | Path, argv: list[str]) -> None:
    """Append ``record`` with ``command`` (``python -m`` the module of ``script``, ``__file__`` of the caller, and
    ``argv``) and the provenance."""
    from cselab.provenance import provenance

    full = {**record, "command": " ".join(["python", "-m", module_of(script), *argv]), "provenance": provenance()}
    try:
        from cselab.data.stores.jsonl import append_jsonl
    except ImportError:  # an older checkout's package measured as the "before" (PYTHONPATH=/tmp/base/src:.)
        import json

        results.parent.mkdir(parents=True, exist_ok=True)
        with results.open("a", encoding="utf-8") as out:
            out.write(json.dumps(full) + "\n")
    else:
        append_jsonl(results, full)
    print(f"appended to {results}")
