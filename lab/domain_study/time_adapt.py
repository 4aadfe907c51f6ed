"""`cselab adapt` timed as a user runs it: the whole command on a suite domain's text, one record per run.

The goal "under 30 minutes for 10,000 sentences on a 2-core machine" is a property of the command, not of a
training step, so this runs ``cselab adapt`` itself in a subprocess (models load, the estimate, training, the
before/after scoring of the domain's task) and records the command's wall time beside what ``adapt.json`` says:
the estimate printed before training, the teacher's pass, training and scoring seconds, the steps and the scores.
Whether the teacher's vectors of the text were already in the data home's cache changes the time by minutes, so the
record also counts the teacher passes the command added to the cache (0: every pass was read from it).

    python -m lab.domain_study.time_adapt --domain stsb --max-sentences 10000            # the 10k goal, default budget
    python -m lab.domain_study.time_adapt --domain stsb --max-sentences 10000 --task search  # the teacher first
    make demo-timed    # what `make demo` runs, with the Makefile's DEMO_* values
    # the cost against the size of the text: the fetched corpus numbered into N distinct lines, no scoring
    python -m lab.domain_study.time_adapt --corpus-lines 1000000 --steps 20

The record holds the plan's sizes (sentences read, trained on, training examples, general sentences) and the peak
memory of the command (its resident set, from the kernel's accounting of the finished child).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from lab.record import RESULTS_DIR, RUNS_DIR, append_record

RESULTS = RESULTS_DIR / "adapt_time.jsonl"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", help="a suite domain: its train.txt is the text, its task is scored")
    parser.add_argument("--corpus-lines", type=int, help="instead of a domain: the fetched corpus (`cselab data fetch "
                        "corpus`) repeated into this many distinct lines (each repeat numbered), not scored")
    parser.add_argument("--max-sentences", type=int, help="the first N distinct sentences of the text")
    parser.add_argument("--steps", type=int, help="the budget (default: cselab adapt's, from the text's size)")
    parser.add_argument("--model", help="cselab adapt --model (default: cselab adapt's)")
    parser.add_argument("--teacher", help="cselab adapt --teacher")
    parser.add_argument("--task", help="cselab adapt --task")
    parser.add_argument("--recipe", help="cselab adapt --recipe")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads, as OMP_NUM_THREADS (0: torch's default)")
    parser.add_argument("--output", type=Path, default=RUNS_DIR / "time-adapt", help="the run directory (replaced)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if (args.domain is None) == (args.corpus_lines is None):
        parser.error("give --domain or --corpus-lines")
    return args


def adapt_command(args: argparse.Namespace, text: Path) -> list[str]:
    command = [sys.executable, "-m", "cselab.cli", "adapt", str(text), "--output", str(args.output),
               "--seed", str(args.seed)]
    for option, value in (("--domain", args.domain), ("--max-sentences", args.max_sentences), ("--steps", args.steps),
                          ("--model", args.model), ("--teacher", args.teacher), ("--task", args.task),
                          ("--recipe", args.recipe)):
        if value is not None:
            command += [option, str(value)]
    return command


def numbered_corpus(lines: int, out: Path) -> Path:
    """The fetched corpus repeated into ``lines`` distinct lines, each ending in `` (k)`` for its k-th repeat: none is a
    line of the corpus itself, which the default also draws its general sentences from."""
    from cselab.data.text.training_data import corpus_path

    source = [s for s in corpus_path("default").read_text(encoding="utf-8").splitlines() if s.strip()]
    with out.open("w", encoding="utf-8") as f:
        for i in range(lines):
            repeat, line = divmod(i, len(source))
            f.write(f"{source[line]} ({repeat + 1})\n")
    return out


def main(argv: list[str] | None = None) -> None:
    import shutil

    from cselab.paths import cselab_home
    from cselab.teacher.vectors import CACHE_DIR as TEACHER_CACHE_DIR

    args = parse_args(argv)
    if args.output.exists():
        shutil.rmtree(args.output)
    if args.corpus_lines is not None:
        text = numbered_corpus(args.corpus_lines, args.output.parent / f"corpus-{args.corpus_lines}.txt")
    else:
        text = cselab_home() / "domains" / args.domain / "train.txt"
    if not text.is_file():
        sys.exit(f"error: {text} is missing; run `cselab data fetch domains`")
    command = adapt_command(args, text)
    cache = cselab_home() / TEACHER_CACHE_DIR
    cached_before = set(os.listdir(cache)) if cache.is_dir() else set()
    print("$ " + " ".join(command), flush=True)
    start = time.perf_counter()
    env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
    code = subprocess.run(command, env=env).returncode
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kilobytes on Linux
    if code:
        sys.exit(f"error: cselab adapt exited with {code} (its message is above); nothing recorded")
    command_s = time.perf_counter() - start
    summary = json.loads((args.output / "adapt.json").read_text(encoding="utf-8"))
    passes_made = len(set(os.listdir(cache)) - cached_before) if cache.is_dir() else 0
    record = {
        "domain": args.domain, "corpus_lines": args.corpus_lines, "sentences": summary["sentences"],
        "train_sentences": summary["train_sentences"], "text_train_sentences": summary.get("text_train_sentences"),
        "general_sentences": summary.get("general_sentences"), "recipe": summary.get("recipe"),
        "peak_rss_mb": round(peak_rss_mb, 1),
        "held_out": summary["held_out"], "teacher": summary["teacher"], "selection": summary["selection"],
        "model": summary["model"], "steps": summary["steps"], "seed": args.seed, "threads": args.threads or None,
        "cpu_count": os.cpu_count(),
        "command_s": round(command_s, 1), "adapt_wall_s": summary["wall_s"], "teacher_s": summary["teacher_s"],
        "teacher_passes_made": passes_made, "train_s": summary["train_s"], "evaluate_s": summary["evaluate_s"],
        "estimate_s": summary.get("estimate_s"), "adapted_teacher": summary.get("adapted_teacher"),
        "before": summary["before"], "after": summary["after"], "adapt_command": " ".join(command[1:]),
    }
    print(f"{args.domain or text.name}: {summary['sentences']} sentences, {summary['steps']} steps: the command took "
          f"{command_s / 60:.1f} min ({summary['teacher_s'] / 60:.1f} the teacher's pass, {passes_made} passes made, "
          f"{summary['train_s'] / 60:.1f} training, {summary['evaluate_s'] / 60:.1f} "
          f"scoring), estimated {(summary.get('estimate_s') or 0) / 60:.1f}; peak memory {peak_rss_mb:,.0f} MB")
    append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
