"""What describing a training text for its results record adds to a run's peak memory, on a generated corpus.

`cselab train` writes, beside its scores, the text's size, checksum and overlap with the test sets
(``cselab.data.text.training_data.training_text_summary``). Each measurement runs in a fresh child process: the STS test
sets are read first (the record needs them whatever the text), then the resident memory is taken, the summary is
made, and the peak's growth over it is what the text cost. ``streamed`` is the summary as it is; ``whole`` the
former way (every line read into a Python string, ``read_corpus``, and the keys of all of them in a set), for the
comparison. The corpus is the fetched default corpus numbered into ``--lines`` distinct lines
(lab.domain_study.time_adapt's text), written to a temporary file and deleted afterwards.

    python -m lab.speed.text_summary_memory --lines 5000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "text_summary_memory.jsonl"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker(way: str, path: str) -> dict:
    from cselab.data.evalsets.indomain import eval_task_sentences, sentence_key
    from cselab.data.text.training_data import training_text_summary

    tasks = eval_task_sentences()
    before = rss_mb()
    clock = time.perf_counter()
    if way == "streamed":
        summary = training_text_summary(path)
        sentences, overlap = summary["sentences"], summary["overlap"]
    else:
        from cselab.data.text.corpus import read_corpus

        lines = read_corpus(path).sentences
        text = {sentence_key(s) for s in lines}
        sentences, overlap = len(lines), {name: len(keys & text) for name, keys in tasks.items()}
    seconds = time.perf_counter() - clock
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"way": way, "sentences": sentences, "overlap": overlap, "rss_before_mb": round(before, 1),
            "peak_rss_mb": round(peak, 1), "added_mb": round(peak - before, 1), "seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--ways", nargs="+", default=["streamed", "whole"], choices=["streamed", "whole"])
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    from lab.domain_study.time_adapt import numbered_corpus
    from lab.speed.adapt_footprint import cpu_name

    rows = []
    with tempfile.TemporaryDirectory(prefix="summary-memory-") as tmp:
        path = numbered_corpus(args.lines, Path(tmp) / f"corpus-{args.lines}.txt")
        size_mb = path.stat().st_size / 2**20
        for way in args.ways:
            out = subprocess.run([sys.executable, "-m", "lab.speed.text_summary_memory", "--worker", way, str(path)],
                                 capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(f"{way}: {rows[-1]['sentences']:,} lines, +{rows[-1]['added_mb']:,.0f} MB over "
                  f"{rows[-1]['rss_before_mb']:,.0f} MB, {rows[-1]['seconds']:.0f} s", flush=True)
    if len({json.dumps(r["overlap"], sort_keys=True) for r in rows}) > 1 or len({r["sentences"] for r in rows}) > 1:
        sys.exit("error: the ways disagree on the count or the overlap; nothing recorded")
    append_record(args.results, {"lines": args.lines, "file_mb": round(size_mb, 1), "rows": rows,
                                 "cpu_model": cpu_name(), "cpu_count": os.cpu_count()},
                  __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
