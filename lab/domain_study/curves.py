"""The observed curves of the domain study's runs (``--observe-every``), printed: for each run a row per observed
value, a column per evaluated step, and the change from step 0 to the step the run kept.

    python -m lab.domain_study.curves --results lab/results/domains_neighbourhoods.jsonl \
        --keys domain,distillation_loss,neighbour_overlap,partition_agreement_passages

A guard reads a criterion against the untouched model's value; the last column is that comparison.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cselab.research.reporting.markdown import markdown_table


def curve_table(record: dict[str, Any], keys: Sequence[str] | None = None) -> str:
    """One run's observed curve: a row per key (``None``: every key the curve has, in its order), a column per step,
    and the kept step's value minus step 0's (``-`` where either is missing)."""
    by_step: dict[int, dict[str, Any]] = {}
    for point in record["curve"]:
        by_step[int(point["step"])] = point  # a step observed twice (a resumed run): the last one
    steps = sorted(by_step)
    if keys is None:
        keys = list(dict.fromkeys(k for s in steps for k in by_step[s] if k != "step"))
    kept = record.get("best_step")
    rows = []
    for key in keys:
        values = [by_step[s].get(key) for s in steps]
        first, at_kept = by_step.get(0, {}).get(key), by_step.get(kept, {}).get(key)
        change = "-" if first is None or at_kept is None else f"{at_kept - first:+.4g}"
        rows.append([key, *("-" if v is None else f"{v:.4g}" for v in values), change])
    header = ["value", *(str(s) for s in steps), f"kept ({kept}) - step 0"]
    return "\n".join(markdown_table(header, rows))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a record file of the domain study")
    parser.add_argument("--keys", help="comma-separated observed values (default: all)")
    args = parser.parse_args(argv)
    from cselab.errors import CselabError
    from lab.domain_study.study import read_domain_records

    try:
        records = [r for r in read_domain_records(args.results) if r.get("curve")]
    except CselabError as exc:
        parser.error(str(exc))
    if not records:
        parser.error(f"{args.results}: no record with an observed curve")
    keys = None if args.keys is None else args.keys.split(",")
    for record in records:
        known = {k for p in record["curve"] for k in p}
        missing = sorted(set(keys or ()) - known)
        if missing:
            parser.error(f"--keys: {record['domain']} seed {record['seed']} observed no {', '.join(missing)}")
        print(f"\n{record['domain']} / {record['configuration']} / seed {record['seed']}: "
              f"main score {record['main_score']:.2f} at step {record.get('best_step')}\n")
        print(curve_table(record, keys))


if __name__ == "__main__":
    main()
