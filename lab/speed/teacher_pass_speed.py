"""The teacher's pass over a text in fp32 and in bf16 (what ``train.precision: auto`` picks on a CPU with fast bf16),
side by side in one process: sentences per second of each, alternating, the faster of two tries.

    python -m lab.speed.teacher_pass_speed --domain bbc-news --sentences 1000 --threads 2

Appends one record (with the CPU, the code version and the date) to lab/results/teacher_pass.jsonl.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cselab.teacher.vectors import BATCH as TEACHER_BATCH
from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "teacher_pass.jsonl"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", default="bbc-news", help="a suite domain whose train.txt is the text")
    parser.add_argument("--teacher", default="all-mpnet-base-v2")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N sentences of the text")
    parser.add_argument("--batch-size", type=int, default=TEACHER_BATCH, help="the distillation's teacher batch")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch

    from cselab.data.evalsets.domains import TRAIN_FILE, domain_dir
    from cselab.data.text.corpus import read_corpus
    from cselab.models.sentence_model import load_model
    from cselab.runtime.precision import autocast_context

    torch.set_num_threads(args.threads)
    sentences = read_corpus(domain_dir(args.domain) / TRAIN_FILE).sentences[:args.sentences]
    teacher = load_model(args.teacher, device="cpu")
    teacher.encode(sentences[:args.batch_size], batch_size=args.batch_size)  # warm-up
    rates: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for precision in ("fp32", "bf16", "fp32", "bf16"):
        start = time.perf_counter()
        with autocast_context(precision, torch.device("cpu")):
            teacher.encode(sentences, batch_size=args.batch_size)
        rates[precision].append(len(sentences) / (time.perf_counter() - start))
    best = {p: round(max(r), 1) for p, r in rates.items()}
    record = {"benchmark": "teacher_pass", "domain": args.domain, "teacher": args.teacher,
              "sentences": len(sentences), "batch_size": args.batch_size, "threads": args.threads,
              "sentences_per_s": best, "tries": {p: [round(x, 1) for x in r] for p, r in rates.items()},
              "bf16_speedup": round(best["bf16"] / best["fp32"], 2)}
    append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)
    print(f"{args.teacher} over {len(sentences)} {args.domain} sentences, {args.threads} threads: fp32 {best['fp32']} "
          f"and bf16 {best['bf16']} sentences/s ({record['bf16_speedup']}x)")


if __name__ == "__main__":
    main()
