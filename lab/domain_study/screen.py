"""Screening runs of ``cselab adapt``'s recipe: one domain, one seed, the settings given as overrides, scored once at
the end (the domain's task and STS-B test), without the study's observer. The screen narrows the settings the
domain study then compares on every domain (lab/books/domain_study.md, "Choosing the distillation recipe"); its
records are kept apart from the study's, in ``lab/results/distill_screen.jsonl``.

    python -m lab.domain_study.screen --domain stsb --name lr3e-5 --units lines --max-length 64 train.lr=3e-5
    python -m lab.domain_study.screen --domain bbc-news --name simcse --no-teacher
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR, RUNS_DIR, append_record

RESULTS = RESULTS_DIR / "distill_screen.jsonl"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", required=True)
    parser.add_argument("--name", required=True, help="what this setting is called in the records")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, help="the budget (default: the recipe's)")
    parser.add_argument("--units", choices=["lines", "passages", "mixed"])
    parser.add_argument("--max-length", type=int)
    parser.add_argument("--select", help="cselab adapt --select (default: the recipe's)")
    parser.add_argument("--no-teacher", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--eval-max-length", type=int, default=256)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--runs", type=Path, default=RUNS_DIR / "screen")
    parser.add_argument("overrides", nargs="*", help="cselab adapt KEY=VALUE overrides")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    import torch

    from cselab.adaptation import plan_adapt, recipe_for, run_adapt
    from cselab.data.evalsets.domains import get_domain, train_text
    from cselab.evaluation.domain import load_inputs
    from cselab.models.sentence_model import load_model
    from cselab.provenance import code_version
    from cselab.reporter import Reporter, reporting
    from lab.domain_study.recipes import with_arms
    from lab.domain_study.run_domains import model_path
    from lab.domain_study.scoring import study_scores

    code_version()
    torch.set_num_threads(args.threads)
    spec = get_domain(args.domain)
    run_dir = args.runs / args.domain / f"{args.name}-s{args.seed}"
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)  # a screening run is started again, never resumed
    recipe = with_arms(recipe_for(teacher=not args.no_teacher), overrides=[*args.overrides,
                       f"train.threads={args.threads}"], max_length=args.max_length, select=args.select,
                       units=args.units)
    plan = plan_adapt(train_text(args.domain), run_dir, recipe=recipe, model=model_path(args.model),
                      no_teacher=args.no_teacher, steps=args.steps, seed=args.seed, device="cpu")
    print(plan.describe(), flush=True)
    start = time.perf_counter()
    with reporting(Reporter(lines=lambda line: print(line, flush=True))):  # its lines, no bars
        result = run_adapt(plan)
    wall = time.perf_counter() - start
    summary = json.loads((run_dir / "adapt.json").read_text())
    model = load_model(result.model_dir, max_length=args.eval_max_length)
    record: dict[str, Any] = {
        "domain": args.domain, "name": args.name, "seed": args.seed, "main_task": spec.main_task,
        **study_scores(model, load_inputs(domain=args.domain), spec.main_task),
        "recipe": plan.recipe.name, "units": plan.units, "steps": plan.steps, "examples": len(plan.train_units),
        "selection": plan.selection, "best_step": result.best_step,
        "held_out_loss": summary.get("selection_score"), "wall_s": round(wall, 1),
        "teacher_s": summary.get("teacher_s"), "config": plan.config.model_dump(mode="json"),
    }
    append_record(args.results, record, __file__, argv)
    print(f"{args.domain} / {args.name}: {spec.main_task} {record['main_score']:.2f}, STS-B test "
          f"{record['stsb_test']:.2f} ({wall:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
