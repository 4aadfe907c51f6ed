"""The GPU check's records (``lab/results/gpu_check.jsonl``) as the tables of docs/results.md.

    python -m lab.gpu.gpu_check_table                                  # print the tables
    python -m lab.render                                                  # into the doc's gpu-check block

One row per preset: each precision's steps/s and peak GPU memory from its latest record (a check that ran twice
shows its last run), then one row per serving path of the latest export check. The GPU, the code version and the
date come from each record's provenance. The scores of these runs mean nothing (random weights, synthetic data).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR

RESULTS = RESULTS_DIR / "gpu_check.jsonl"
PRECISIONS = ("bf16", "fp16")


def read_records(path: Path) -> list[dict[str, Any]]:
    from cselab.data.stores.jsonl import Schema, number, read_jsonl, text

    schema = Schema("gpu check", {"benchmark": text(empty=False), "steps_per_s": number(0),
                                  "peak_gpu_mem_mb": number(0)}, required=("benchmark",))
    return read_jsonl(path, schema)


def _where(record: dict[str, Any]) -> tuple[str, str, str]:
    from cselab.research.reporting.markdown import short_commit

    return (str(record.get("machine", {}).get("gpu", "-")), short_commit(str(record.get("git", "-"))),
            str(record.get("date", "-"))[:10])


def render_tables(records: list[dict[str, Any]]) -> str:
    """The training table and, when an export check was recorded, the serving-paths table."""
    from cselab.research.reporting.markdown import markdown_table

    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r.get("benchmark") == "gpu_check":
            latest[(r["preset"], r["precision"])] = r  # later lines are later runs
    presets = list(dict.fromkeys(preset for preset, _ in latest))
    rows = []
    for preset in presets:
        runs = {p: latest.get((preset, p)) for p in PRECISIONS}
        first = next(r for r in runs.values() if r is not None)
        cells = [preset, str(first["batch_size"]), str(first["max_length"]), str(first["steps"])]
        for precision in PRECISIONS:
            r = runs[precision]
            cells += ["not run", "-"] if r is None else [f"{r['steps_per_s']:.2f}", f"{r['peak_gpu_mem_mb']:,}"]
        gpus, commits, dates = zip(*(_where(r) for r in runs.values() if r is not None), strict=True)
        cells += [", ".join(dict.fromkeys(x)) for x in (gpus, commits, dates)]
        rows.append(cells)
    header = ["preset", "batch", "max len", "steps", *(f"{p} {what}" for p in PRECISIONS
                                                     for what in ("steps/s", "peak MB")), "GPU", "commit", "date"]
    lines = markdown_table(header, rows)
    exports = [r for r in records if r.get("benchmark") == "gpu_export_check"]
    if exports:
        e = exports[-1]
        gpu, commit, date = _where(e)
        lines += ["", f"Serving paths of the saved SimCSE model against cselab's torch encoder on the GPU ({gpu}, "
                      f"{e['sentences']} sentences; {commit}, {date}; ONNX Runtime {e['onnxruntime']}, providers "
                      f"{', '.join(e['ort_providers'])}; failed: {', '.join(e['failed']) or 'none'}):", ""]
        lines += markdown_table(["path", "min cosine", "mean cosine", "seconds"],
                                [[path, f"{p['min_cosine']:.6f}", f"{p['mean_cosine']:.6f}", f"{p['seconds']:.2f}"]
                                 for path, p in e["paths"].items()])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    print(render_tables(read_records(args.results)))


if __name__ == "__main__":
    sys.exit(main())
