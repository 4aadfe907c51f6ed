"""Cost of one training step of several methods, measured in ONE process on the SAME batches.

Every method is built as the trainer builds it (``Trainer(config)``; nothing is written to disk), then
each gets ``--warmup`` untimed steps, then the timed steps are INTERLEAVED (step k of every method, then
step k+1 of every method, ...), so a shared or throttling CPU slows every method alike and the ratios
stay fair. A step is what the training loop does per step: collate the batch + forward + backward +
optimizer step (``Trainer.batch_at`` + ``Trainer.train_step``), under the configured precision (bf16
autocast in the CPU protocol). All methods see the same step indices, hence the same sentences.

A run is ``--run LABEL SOURCE [KEY=VALUE ...]`` where SOURCE is a config file or a method name (its
defaults), followed by overrides. ``--common`` overrides apply to every run (defaults: the CPU protocol's
MiniLM backbone, B 64, max_len 32, bf16). Examples::

    python -m lab.speed.step_cost --warmup 5 --steps 10 \\
        --run simcse configs/simcse/cpu-minilm.yaml \\
        --run simcse++ configs/simcse_pp/cpu-minilm.yaml \\
        --run cot-bert configs/cot_bert/cpu-minilm.yaml \\
        --run cot-bert-no-denoise configs/cot_bert/cpu-minilm.yaml method_options.denoise=false \\
        --ratio cot-bert/cot-bert-no-denoise

    python -m lab.speed.step_cost --run simcse simcse --run simcse++ simcse++ --batch 32

    # one speed lever against the tree without it, on a machine shared with other jobs
    python -m lab.speed.step_cost --threads 1 --clock cpu --statistic mean --warmup 2 --steps 16 \
        --common train.precision=bf16 model.dropout_masks=bits \
        --run base configs/simcse/cpu-minilm.yaml \
        --run grouped configs/simcse/cpu-minilm.yaml train.length_group_window=16

Prints ms/step (median and mean over the timed steps) and the ratio of medians to the baseline run
(``--baseline``, default the first run), and appends one JSON line with provenance to
``lab/results/step_cost.jsonl``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR

RESULTS = RESULTS_DIR / "step_cost.jsonl"
PROTOCOL = ["model.backbone=all-MiniLM-L6-v2", "model.max_length=32", "train.precision=bf16", "data.corpus=default"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs="+", action="append", metavar="LABEL SOURCE [KEY=VALUE]", required=True,
                        help="a method to time: label, config file or method name, overrides")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per method")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per method first")
    parser.add_argument("--batch", type=int, default=64, help="batch size (train.batch_size)")
    parser.add_argument("--common", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for every run, after the protocol defaults")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="cpu", help="train.device for every run")
    parser.add_argument("--baseline", help="label the ratios refer to (default: the first run)")
    parser.add_argument("--ratio", action="append", default=[], metavar="A/B",
                        help="also report median(A) / median(B) for two run labels (repeatable)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="what the medians and ratios compare: wall seconds, or CPU seconds of this process "
                             "(fairer on a machine shared with other jobs when --threads 1: time spent waiting "
                             "for a core is not counted)")
    parser.add_argument("--statistic", choices=["median", "mean"], default="median",
                        help="what the ratios compare; mean = total time, the fair one when batches differ in "
                             "cost by design (length-grouped batches)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON-lines file to append to")
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to --results")
    args = parser.parse_args(argv)
    for run in args.run:
        if len(run) < 2:
            parser.error(f"--run needs LABEL and SOURCE, got {run}")
    labels = [run[0] for run in args.run]
    if len(set(labels)) != len(labels):
        parser.error("--run labels must be unique")
    if args.baseline and args.baseline not in labels:
        parser.error(f"--baseline {args.baseline!r} is not one of the run labels {labels}")
    for ratio in args.ratio:
        if ratio.count("/") != 1 or any(part not in labels for part in ratio.split("/")):
            parser.error(f"--ratio {ratio!r} must be A/B with A and B run labels {labels}")
    return args


def build_config(source: str, overrides: list[str]) -> Any:
    from cselab.config.run_config import load_config

    if Path(source).is_file():
        return load_config(source, overrides)
    return load_config(None, overrides, method=source)


def build_trainer(source: str, overrides: list[str]) -> Any:
    from cselab.training.trainer import Trainer

    trainer = Trainer(build_config(source, overrides))
    trainer.method.train()
    return trainer


def timed_step(trainer: Any, step: int, clock: str = "wall") -> float:
    import torch

    now = time.process_time if clock == "cpu" else time.perf_counter
    start = now()
    trainer.train_step(trainer.batch_at(step))
    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)
    return now() - start


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    common = [*PROTOCOL, f"train.batch_size={args.batch}", f"train.device={args.device}",
              "train.output_dir=/nonexistent/step_cost", *args.common]
    runs = []
    for label, source, *overrides in args.run:
        effective = [*common, *overrides]
        trainer = build_trainer(source, effective)
        runs.append({"label": label, "source": source, "overrides": overrides, "trainer": trainer, "times": []})
        print(f"built {label}: method {trainer.config.method}", file=sys.stderr)
    for run in runs:
        for step in range(args.warmup):
            timed_step(run["trainer"], step)
    for step in range(args.warmup, args.warmup + args.steps):
        for run in runs:
            run["times"].append(timed_step(run["trainer"], step, args.clock))
    baseline_label = args.baseline or runs[0]["label"]
    summary = statistics.fmean if args.statistic == "mean" else statistics.median
    baseline = summary(next(r for r in runs if r["label"] == baseline_label)["times"])
    results = []
    for run in runs:
        config = run["trainer"].config
        median = statistics.median(run["times"])
        results.append({
            "label": run["label"], "method": config.method, "source": run["source"], "overrides": run["overrides"],
            "method_options": config.method_options, "ms_median": 1000 * median,
            "ms_mean": 1000 * statistics.fmean(run["times"]), "ms_all": [round(1000 * t, 2) for t in run["times"]],
            "ratio_to_baseline": summary(run["times"]) / baseline,
        })
    medians = {r["label"]: r["ms_mean" if args.statistic == "mean" else "ms_median"] for r in results}
    ratios = {ratio: medians[ratio.split("/")[0]] / medians[ratio.split("/")[1]] for ratio in args.ratio}
    first = runs[0]["trainer"].config
    return {
        "benchmark": "step_cost",
        "settings": {"batch_size": args.batch, "max_length": first.model.max_length, "backbone": first.model.backbone,
                     "precision": first.train.precision, "device": args.device, "warmup": args.warmup,
                     "steps": args.steps, "threads": torch.get_num_threads(), "common": args.common,
                     "baseline": baseline_label, "interleaved": True,
                     "clock": args.clock, "statistic": args.statistic},
        "results": results,
        "ratios": ratios,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    record = measure(args)
    s = record["settings"]
    print(f"step cost: {s['backbone']}, B {s['batch_size']}, max_len {s['max_length']}, {s['precision']}, "
          f"{s['threads']} threads, {s['clock']} clock, ratios of {s['statistic']}s, "
          f"{s['warmup']} warm-up + {s['steps']} timed steps each, interleaved")
    width = max(len(r["label"]) for r in record["results"])
    print(f"{'run':<{width}}  {'ms/step (median)':>16}  {'mean':>8}  {'x ' + s['baseline']:>10}")
    for r in record["results"]:
        print(f"{r['label']:<{width}}  {r['ms_median']:>16.1f}  {r['ms_mean']:>8.1f}  {r['ratio_to_baseline']:>10.2f}")
    for ratio, value in record["ratios"].items():
        print(f"{ratio}: {value:.2f}")
    if not args.no_record:
        from lab.record import append_record

        append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
