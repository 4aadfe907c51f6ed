"""One training step of `cselab adapt`'s default shape, side by side: the whole batch against micro-batches, glibc's
allocator as it starts against cselab's settings (cselab.runtime.allocator), each in a fresh process.

The step: all-MiniLM-L6-v2 (the fetched model), 64 passages of 256 tokens, dropout on, mean pooling, the cosine
loss onto fixed unit targets (the default recipe's loss is such a mean over examples), AdamW. A micro-batched step
accumulates the gradient over pieces of :func:`cselab.runtime.memory.choose_micro_batch`'s size. Each variant runs
in its own process (the allocator's settings and the peak memory are the process's), one warm-up step, then
``--steps`` timed steps; the kernel's counts over the timed steps give user and system seconds and minor page
faults, ``ru_maxrss`` the peak. The variants run in turn, ``--rounds`` times (ABCD ABCD), so a busy minute on
shared cores falls on all of them; each variant's row is recorded as it ends, with the load average, and the means
once all have run.

    python -m lab.speed.step_footprint                   # 4 variants x 2 rounds x 3 steps
    python -m lab.speed.step_footprint --steps 2 --rounds 1
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

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "step_footprint.jsonl"
VARIANTS = {  # name -> (micro-batches, cselab's allocator settings)
    "whole-batch, glibc as it starts": (False, False),
    "micro-batches, cselab's allocator": (True, True),
    "micro-batches, glibc as it starts": (True, False),
    "whole-batch, cselab's allocator": (False, True),
}
BATCH, LENGTH = 64, 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (OMP_NUM_THREADS; 0: torch's default)."
                        " One thread takes the threads' synchronisation out of a comparison on shared, busy cores")
    parser.add_argument("--worker", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--results", default=str(RESULTS))
    return parser.parse_args(argv)


def worker(variant: str, steps: int) -> dict:
    micro, tuned = VARIANTS[variant]
    settings = {}
    if tuned:
        from cselab.runtime.allocator import tune_allocator

        settings = tune_allocator()
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel

    from cselab.paths import resolve_model_path
    from cselab.runtime.memory import choose_micro_batch

    torch.manual_seed(0)
    model = AutoModel.from_pretrained(resolve_model_path("all-MiniLM-L6-v2")).train()
    size = choose_micro_batch(BATCH, LENGTH, model.config).size if micro else BATCH
    ids = torch.randint(1000, model.config.vocab_size, (BATCH, LENGTH))
    mask = torch.ones_like(ids)
    targets = F.normalize(torch.randn(BATCH, model.config.hidden_size), dim=-1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step() -> None:
        for start in range(0, BATCH, size):
            rows = slice(start, start + size)
            hidden = model(input_ids=ids[rows], attention_mask=mask[rows]).last_hidden_state
            pooled = (hidden * mask[rows, :, None]).sum(1) / mask[rows].sum(1, keepdim=True)
            loss = (1 - F.cosine_similarity(pooled, targets[rows])).mean() * (size / BATCH)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # warm-up: first allocations, kernel choices
    before, clock = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(steps):
        step()
    wall, after = time.perf_counter() - clock, resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"variant": variant, "micro_batch": size, "allocator": settings, "step_s": round(wall / steps, 3),
            "user_s": round(user, 2), "system_s": round(system, 2),
            "system_share": round(system / (user + system), 4) if user + system else None,
            "minor_faults_per_step": (after.ru_minflt - before.ru_minflt) // steps,
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps)))
        return
    from lab.speed.adapt_footprint import cpu_name

    load_start, rows = os.getloadavg(), []
    for round_ in range(args.rounds):
        for variant in VARIANTS:
            env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
            out = subprocess.run([sys.executable, "-m", "lab.speed.step_footprint", "--worker", variant,
                                  "--steps", str(args.steps)], capture_output=True, text=True, check=True,
                                 env=env).stdout
            row = {**json.loads(out.strip().splitlines()[-1]), "round": round_}
            rows.append(row)
            append_record(Path(args.results), {**row, "threads_asked": args.threads or None, "steps": args.steps,
                                               "loadavg": [round(x, 2) for x in os.getloadavg()]},
                          __file__, sys.argv[1:] if argv is None else argv)  # each variant kept as it ends
            print(f"{variant}: {row['step_s']:.2f} s a step, {row['minor_faults_per_step']:,} minor faults a step, "
                  f"{100 * (row['system_share'] or 0):.1f}% system, peak {row['peak_rss_mb']:,.0f} MB", flush=True)
    summary = {}
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        summary[variant] = {key: round(sum(r[key] for r in mine) / len(mine), 4)
                            for key in ("step_s", "system_share", "minor_faults_per_step", "peak_rss_mb")}
    record = {"batch": BATCH, "length": LENGTH, "steps": args.steps, "rounds": args.rounds, "mean": summary,
              "cpu_model": cpu_name(), "cpu_count": os.cpu_count(), "threads_asked": args.threads or None,
              "loadavg_start": [round(x, 2) for x in load_start],
              "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    append_record(Path(args.results), record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
