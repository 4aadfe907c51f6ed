"""What the teacher pass's exports cost: the time to export the teacher to each format the first time (in a fresh,
temporary data home) and to find the kept export the next time, side by side in one process.

    python -m lab.speed.teacher_export_time --teacher all-mpnet-base-v2 --threads 2

Appends one record (with the CPU, the code version and the date) to lab/results/teacher_pass.jsonl.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "teacher_pass.jsonl"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="all-mpnet-base-v2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch

    from cselab.paths import resolve_model_path
    from cselab.teacher.vectors import teacher_export
    from cselab.vocabulary import FORMATS

    torch.set_num_threads(args.threads)
    teacher = str(resolve_model_path(args.teacher))  # resolved in the real data home, before it is swapped
    seconds: dict[str, dict[str, float]] = {}
    home = os.environ.get("CSELAB_HOME")
    with tempfile.TemporaryDirectory(prefix="cselab-export-time-") as scratch:
        os.environ["CSELAB_HOME"] = str(Path(scratch) / "home")  # a fresh home: no export kept from before
        try:
            for fmt in FORMATS:
                seconds[fmt] = {}
                for attempt in ("first", "kept"):
                    start = time.perf_counter()
                    teacher_export(teacher, fmt, Path(scratch))
                    seconds[fmt][attempt] = round(time.perf_counter() - start, 1)
        finally:
            if home is None:
                os.environ.pop("CSELAB_HOME", None)
            else:
                os.environ["CSELAB_HOME"] = home
    record = {"benchmark": "teacher_export", "teacher": args.teacher, "threads": args.threads,
              "seconds": seconds}
    append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)
    for fmt, s in seconds.items():
        print(f"{args.teacher} to {fmt}: {s['first']} s the first time, {s['kept']} s when kept")


if __name__ == "__main__":
    main()
