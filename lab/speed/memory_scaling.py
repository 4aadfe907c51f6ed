"""Memory that must not grow: resident memory and step time against corpus size and batch size.

Every measurement runs in a FRESH child process (peak RSS only ever grows within a process), on the CPU
protocol's SimCSE (``configs/simcse/cpu-minilm.yaml``: all-MiniLM-L6-v2, max_len 32, bf16), one thread.

``corpus``: synthetic corpora of N lines (the default corpus repeated, then cut) for every ``--sizes`` N.
Per size, the on-disk index is built once in its own child (``build_s``); then a child starts the trainer
and reports RSS after start-up (trainer built, first batch collated), the data path's time per step
(``Trainer.batch_at``: permutation slice + reading + tokenizing 64 sentences; mean over 200 steps spread
over the epoch) and the time of ``--steps`` whole training steps. ``--list`` adds the previous storage
for comparison (every sentence a Python string, the epoch permutation redrawn at every step).

``grad-cache``: peak RSS and seconds per training sentence for each ``--batches`` B, plain and with
gradient caching in chunks of ``--chunk`` (1 untimed + ``--steps`` timed steps each).

    python -m lab.speed.memory_scaling corpus --sizes 110000 2000000 10000000 --list
    python -m lab.speed.memory_scaling grad-cache --batches 64 256 512 --chunk 64

Each result is appended as one JSON line (with provenance: commit, CPU model) to
``lab/results/memory_scaling.jsonl``. The synthetic corpora are deleted afterwards.
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
from typing import Any

from cselab.data.stores.jsonl import append_jsonl
from lab.record import RESULTS_DIR, ROOT

RESULTS = RESULTS_DIR / "memory_scaling.jsonl"
CONFIG = ROOT / "configs" / "simcse" / "cpu-minilm.yaml"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# -- children ------------------------------------------------------------------------------------------
def _trainer(overrides: list[str]) -> Any:
    from cselab.config.run_config import load_config
    from cselab.training.trainer import Trainer

    out = tempfile.mkdtemp(prefix="memory-scaling-")
    config = load_config(CONFIG, [*overrides, f"train.output_dir={out}/run", "train.threads=1",
                                  "train.eval_at_start=false"])
    return Trainer(config)


def child_build(corpus: str) -> dict[str, Any]:
    from cselab.data.stores.corpus_index import open_indexed_corpus

    started = time.perf_counter()
    n = len(open_indexed_corpus(corpus).sentences)
    return {"sentences": n, "build_s": round(time.perf_counter() - started, 2), "build_peak_rss_mb": peak_rss_mb()}


def child_corpus(corpus: str, storage: str, steps: int) -> dict[str, Any]:
    if storage == "list":  # the previous storage, for comparison
        from cselab.data.text import training_data
        from cselab.data.text.corpus import read_corpus

        training_data.open_indexed_corpus = (lambda path, max_words=None, home=None:
                                             read_corpus(path, max_words=max_words))
    started = time.perf_counter()
    trainer = _trainer([f"data.corpus={corpus}"])
    if storage == "list":
        from cselab.training.trainer import epoch_order

        trainer.epoch_permutation = lambda epoch: epoch_order(len(trainer.examples), trainer.config.train.seed, epoch)
    trainer.batch_at(0)
    startup_s = time.perf_counter() - started
    rss_start = rss_mb()
    positions = [int(k * (trainer.steps_per_epoch - 1) / 199) for k in range(200)]
    t0 = time.perf_counter()
    for step in positions:
        trainer.batch_at(step)
    data_ms = (time.perf_counter() - t0) / len(positions) * 1000
    trainer.method.train()
    trainer.train_step(trainer.batch_at(0))
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        trainer.train_step(trainer.batch_at(step))
    step_ms = (time.perf_counter() - t0) / steps * 1000
    return {"sentences": len(trainer.examples), "storage": storage, "startup_s": round(startup_s, 2),
            "rss_after_startup_mb": round(rss_start, 1), "data_ms_per_step": round(data_ms, 3),
            "train_ms_per_step": round(step_ms, 1), "peak_rss_mb": round(peak_rss_mb(), 1)}


def child_grad_cache(batch: int, chunk: int | None, steps: int) -> dict[str, Any]:
    overrides = [f"train.batch_size={batch}"] + ([f"train.chunk_size={chunk}"] if chunk else [])
    trainer = _trainer(overrides)
    trainer.method.train()
    rss_start = rss_mb()
    trainer.train_step(trainer.batch_at(0))
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        trainer.train_step(trainer.batch_at(step))
    seconds = (time.perf_counter() - t0) / steps
    return {"batch": batch, "chunk": chunk, "rss_before_steps_mb": round(rss_start, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1), "s_per_step": round(seconds, 2),
            "ms_per_sentence": round(seconds / batch * 1000, 2)}


# -- parent --------------------------------------------------------------------------------------------
def run_child(*args: str) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result), flush=True)
    return result


def synthetic_corpus(source: Path, lines: int, target: Path) -> Path:
    """``lines`` lines: ``source`` repeated as often as needed, then cut."""
    text = source.read_bytes()
    if not text.endswith(b"\n"):
        text += b"\n"
    per_copy = text.count(b"\n")
    with open(target, "wb") as f:
        for _ in range(lines // per_copy):
            f.write(text)
        rest = lines % per_copy
        if rest:
            f.write(b"\n".join(text.split(b"\n", rest)[:rest]) + b"\n")
    return target


def record(kind: str, settings: dict[str, Any], results: list[dict[str, Any]], path: Path) -> None:
    from cselab.provenance import provenance

    append_jsonl(path, {"benchmark": f"memory_scaling/{kind}", "settings": settings, "results": results,
                        **provenance()})


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        kind, *rest = argv[1:]
        if kind == "build":
            result = child_build(rest[0])
        elif kind == "corpus":
            result = child_corpus(rest[0], rest[1], int(rest[2]))
        else:
            result = child_grad_cache(int(rest[0]), int(rest[1]) or None, int(rest[2]))
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    corpus = sub.add_parser("corpus")
    corpus.add_argument("--sizes", nargs="+", type=int, default=[110_000, 2_000_000, 10_000_000])
    corpus.add_argument("--source", type=Path, help="corpus to repeat (default: the fetched default corpus)")
    corpus.add_argument("--list", action="store_true", help="also measure the previous in-memory storage")
    corpus.add_argument("--steps", type=int, default=3, help="timed training steps per size")
    grad = sub.add_parser("grad-cache")
    grad.add_argument("--batches", nargs="+", type=int, default=[64, 256, 512])
    grad.add_argument("--chunk", type=int, default=64)
    grad.add_argument("--steps", type=int, default=2, help="timed steps per row (after one untimed)")
    for p in (corpus, grad):
        p.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = []
    if args.kind == "corpus":
        from cselab.paths import cselab_home

        source = args.source or cselab_home() / "corpus" / "default.txt"
        from cselab.data.stores.corpus_index import index_files

        with tempfile.TemporaryDirectory(prefix="corpus-scale-") as tmp:
            for size in args.sizes:
                file = synthetic_corpus(source, size, Path(tmp) / f"corpus-{size}.txt")
                build = run_child("build", str(file))
                results.append({**run_child("corpus", str(file), "index", str(args.steps)), **build})
                if args.list:
                    results.append(run_child("corpus", str(file), "list", str(args.steps)))
                for leftover in (file, *index_files(file, None)):
                    leftover.unlink(missing_ok=True)
        settings = {"config": str(CONFIG.relative_to(ROOT)), "threads": 1, "source": str(source), "steps": args.steps}
    else:
        for batch in args.batches:
            results.append(run_child("grad-cache", str(batch), "0", str(args.steps)))
            if args.chunk < batch:
                results.append(run_child("grad-cache", str(batch), str(args.chunk), str(args.steps)))
        settings = {"config": str(CONFIG.relative_to(ROOT)), "threads": 1, "chunk": args.chunk, "steps": args.steps}
    record(args.kind, settings, results, args.results)


if __name__ == "__main__":
    main()
