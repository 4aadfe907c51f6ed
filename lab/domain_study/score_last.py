"""The last step of an adaptation run scored on its domain, when its selection kept another step: the trainer's
``last/`` state (the student's weights) loaded into the untouched model and scored on the domain's task, so a
screen that kept step 0 still says what the training did, with STS-B test beside (records made before it was added
lack it). Records go to ``lab/results/distill_screen.jsonl``.

    python -m lab.domain_study.score_last runs/screen/bbc-news/sim-nb3-passages256-100steps-s1 --domain bbc-news
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "distill_screen.jsonl"
STUDENT_PREFIX = "student."  # the distillation method's module holds the student under this name


def main(argv: list[str] | None = None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-max-length", type=int, default=256)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch
    from safetensors.torch import load_file

    from cselab.data.evalsets.domains import get_domain
    from cselab.evaluation.domain import load_inputs
    from cselab.models.sentence_model import load_model
    from lab.domain_study.scoring import study_scores

    torch.set_num_threads(args.threads)
    summary = json.loads((args.run / "adapt.json").read_text())
    trainer_state = json.loads((args.run / "last" / "trainer_state.json").read_text())
    model = load_model(summary["model"], pooler="mean", max_length=args.eval_max_length)
    weights = load_file(str(args.run / "last" / "method.safetensors"))
    model.load_state_dict({k.removeprefix(STUDENT_PREFIX): v for k, v in weights.items()}, strict=True)
    model.eval()
    spec = get_domain(args.domain)
    record = {"domain": args.domain, "run": str(args.run), "step": trainer_state.get("step"),
              "selected_step": summary.get("best_step"), "main_task": spec.main_task,
              **study_scores(model, load_inputs(domain=args.domain), spec.main_task)}
    append_record(args.results, record, __file__, argv)
    print(f"{args.domain}: the last step ({record['step']}) scores {spec.main_task} {record['main_score']:.2f}, "
          f"STS-B test {record['stsb_test']:.2f}")


if __name__ == "__main__":
    main()
