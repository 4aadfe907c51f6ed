"""The training steps of `make demo` at several activation budgets, side by side: the same batches, one process.

It reads the configuration `cselab adapt` wrote for the demo (``runs/adapt-footprint/demo/config.yaml``, which
``python -m lab.speed.adapt_footprint --case demo`` leaves), builds the trainer once, and times ``--steps`` of its
batches (their own widths, as the run draws them) at each budget in ``--budgets`` (MiB; each batch runs in pieces
sized at its width, :meth:`cselab.training.trainer.Trainer._piece_size`; a budget over the whole batch's activations
runs it whole, as before micro-batches), round after round, budgets interleaved so a busy minute slows all of them.
The record keeps each budget's seconds, system seconds and minor page faults per round and the piece sizes it ran.
Peak memory is not measured here (one process holds every budget's buffers): `lab.speed.adapt_footprint` measures
the command's.

    python -m lab.speed.demo_steps                                  # 512, 256 and whole (8192), 12 steps, 2 rounds
    python -m lab.speed.demo_steps --budgets 256 8192 --steps 24 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

from lab.record import RESULTS_DIR, RUNS_DIR, append_record

RESULTS = RESULTS_DIR / "demo_steps.jsonl"
DEMO_RUN = RUNS_DIR / "adapt-footprint" / "demo"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[512, 256, 8192], help="activation budgets, MiB")
    parser.add_argument("--steps", type=int, default=12, help="the demo's first N batches")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--run", type=Path, default=DEMO_RUN, help="a cselab adapt run directory (its config.yaml)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from cselab.config.run_config import load_config
    from cselab.runtime.allocator import bound_onednn_cache, tune_allocator
    from cselab.runtime.precision import cpu_model_name
    from cselab.training.trainer import Trainer

    config_file = args.run / "config.yaml"
    if not config_file.is_file():
        sys.exit(f"{config_file} is missing: run `python -m lab.speed.adapt_footprint --case demo` first")
    tune_allocator()
    bound_onednn_cache()  # the CLI's setting; ONEDNN_PRIMITIVE_CACHE_CAPACITY in the environment overrides it
    scratch = RUNS_DIR / "demo-steps"
    config = load_config(config_file, [f"train.output_dir={scratch}"])
    # built at the smallest budget, so that the batch is cut at all (its way is chosen at model.max_length)
    trainer = Trainer(config, activation_budget=min(args.budgets) * 2**20)
    batches = [trainer.batch_at(step) for step in range(args.steps)]
    widths = [trainer.method.batch_width(batch) for batch in batches]
    trainer.train_step(batches[0])  # warm-up: the first step allocates and picks kernels
    seconds: dict[int, list[float]] = {budget: [] for budget in args.budgets}
    system_s: dict[int, list[float]] = {budget: [] for budget in args.budgets}
    faults: dict[int, list[int]] = {budget: [] for budget in args.budgets}
    pieces: dict[int, dict[str, int]] = {}
    load_start = os.getloadavg()
    for _ in range(args.rounds):
        for budget in args.budgets:
            trainer.resize_pieces(budget * 2**20)
            start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            for batch in batches:
                trainer.train_step(batch)
            seconds[budget].append(round(time.perf_counter() - start, 2))
            now = resource.getrusage(resource.RUSAGE_SELF)
            system_s[budget].append(round(now.ru_stime - usage.ru_stime, 2))
            faults[budget].append(now.ru_minflt - usage.ru_minflt)
            pieces[budget] = {str(k): v for k, v in sorted(trainer.pieces_run.items())}
            print(f"budget {budget} MiB: {seconds[budget][-1]:.1f} s for {args.steps} steps "
                  f"({system_s[budget][-1]:.1f} s system, {faults[budget][-1]:,} minor faults), "
                  f"pieces {pieces[budget]}", flush=True)
    record = {"budgets_mib": args.budgets, "steps": args.steps, "rounds": args.rounds, "widths": widths,
              "seconds": {str(b): s for b, s in seconds.items()},
              "system_s": {str(b): s for b, s in system_s.items()},
              "minor_faults": {str(b): f for b, f in faults.items()},
              "pieces_run": {str(b): p for b, p in pieces.items()},
              "threads": trainer.config.train.threads, "precision": trainer.precision, "cpu_model": cpu_model_name(),
              "cpu_count": os.cpu_count(), "loadavg_start": list(load_start), "loadavg_end": list(os.getloadavg()),
              "config": str(config_file)}
    append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
