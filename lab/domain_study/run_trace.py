"""What an adaptation run logged while it trained, kept as a record: the selection criterion at each evaluated step
(``dev`` as ``metrics.jsonl`` logged it, higher better) and each loss term's first and last logged value. The run
directories are not kept in git; a figure the lab book reads off one is recorded here first. ``run_domains`` adds
the same trace to each cselab record it writes.

    python -m lab.domain_study.run_trace runs/domains/tweets/cselab-distill-simvec-nb3-guarded-mixed-s1
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "run_traces.jsonl"
NOT_LOSS_TERMS = frozenset({"step", "lr", "sent_per_s"})  # what the trainer logs beside the loss and its terms
RUN_NAME = re.compile(r"(?P<configuration>.+)-s(?P<seed>\d+)")  # run_domains' <domain>/<configuration>-s<seed>


def run_trace(run_dir: Path) -> dict[str, Any]:
    """``{"selection_logged": [[step, value], ...], "loss_terms": {name: {first_step, first, last_step, last}}}``
    of the run at ``run_dir`` (a step logged twice, by a resumed run: its last value)."""
    from cselab.adaptation.report import selection_curve
    from cselab.data.stores.jsonl import read_log

    selection = dict(selection_curve(run_dir, None))
    terms: dict[str, dict[str, Any]] = {}
    for record in read_log(run_dir / "metrics.jsonl"):
        if "loss" not in record:
            continue
        for name, value in record.items():
            if name in NOT_LOSS_TERMS or not isinstance(value, int | float):
                continue
            term = terms.setdefault(name, {"first_step": record["step"], "first": round(value, 6)})
            term.update(last_step=record["step"], last=round(value, 6))
    return {"selection_logged": [[step, round(value, 4)] for step, value in sorted(selection.items())],
            "loss_terms": terms}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run directories (each with its metrics.jsonl)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    for run in args.runs:
        if not (run / "metrics.jsonl").is_file():
            parser.error(f"{run}: no metrics.jsonl (not a run directory, or a run that never logged)")
    for run in args.runs:
        record: dict[str, Any] = {"run": str(run)}
        named = RUN_NAME.fullmatch(run.name)
        if named:
            record.update(domain=run.parent.name, configuration=named["configuration"], seed=int(named["seed"]))
        trace = run_trace(run)
        append_record(args.results, {**record, **trace}, __file__, argv)
        values = [value for _, value in trace["selection_logged"]]
        print(f"{run}: {len(values)} evaluations" + (f", logged {min(values):.4g} to {max(values):.4g}" if values
                                                      else "") + f"; terms {', '.join(trace['loss_terms'])}")


if __name__ == "__main__":
    main()
