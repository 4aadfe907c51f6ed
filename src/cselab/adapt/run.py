"""``run_adapt``: the whole adaptation of a plan: the run directory, the texts, training with the plan's selection,
the scores before and after on the user's labelled data, the model card and the report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cselab.adapt.plan import ADAPT_FILE, AdaptPlan, evaluation_every, read_text, split_held_out, write_texts
from cselab.adapt.report import annotate_model, write_report
from cselab.adapt.selection import HeldOutLoss, teacher_agreement_task
from cselab.errors import CselabError
from cselab.fileio import write_json_atomic
from cselab.provenance import provenance


@dataclass
class AdaptResult:
    model_dir: Path
    best_step: int | None
    selection: str
    before: dict[str, float]
    after: dict[str, float]
    wall_s: float
    report: Path


def run_adapt(plan: AdaptPlan, *, resume: bool = False, evaluate: Callable[[Any], dict[str, float]] | None = None,
              progress: bool = True, echo: Callable[[str], None] = print,
              observe: Callable[[Any, int], dict[str, float]] | None = None,
              observe_every: int | None = None, estimate_s: float | None = None) -> AdaptResult:
    """Split the text, train with the plan's selection, score before/after with ``evaluate`` (the user's
    labelled files), and write the model card's figures and the report. ``estimate_s``, the time estimate shown
    before training, is recorded beside the measured times in ``adapt.json``.

    ``observe(model, step)`` (optional) only watches the training: the trainer calls it at step 0, every
    ``observe_every`` steps (default :func:`evaluation_every` of the budget, with or without a teacher) and at the
    last step, and logs what it returns in ``metrics.jsonl`` (``"observed"``); it never changes what is selected.
    The domain study records the candidate selection criteria and the domain's score this way."""
    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.models.sentence_model import load_model
    from cselab.training.run_directory import BEST_DIR, RunDirectory
    from cselab.training.trainer import Trainer

    start = time.perf_counter()
    train_text, _ = split_held_out(read_text(plan.text, plan.max_sentences))
    with RunDirectory(plan.output_dir) as run_dir:
        if not resume and (plan.output_dir / ADAPT_FILE).exists():
            raise CselabError(f"{plan.output_dir} holds a finished adaptation; choose another --output")
        run_dir.mark()
        write_texts(plan, train_text)
        selector: Any
        if plan.teacher is not None:
            echo(f"adapt: the teacher {plan.teacher} encodes the {len(plan.held_out)} held-out sentences")
            task = teacher_agreement_task(plan.held_out, load_model(plan.teacher),
                                          batch_size=plan.config.train.eval_batch_size)
            selector = StsEvaluator([task], batch_size=plan.config.train.eval_batch_size,
                                    primary="teacher-agreement/dev")
        else:
            selector = HeldOutLoss(plan.held_out)
        clock = time.perf_counter()
        before = evaluate(load_model(plan.model, pooler="mean")) if evaluate else {}
        evaluate_s = time.perf_counter() - clock
        trainer = Trainer(plan.config, progress=progress, selector=selector, observer=observe,
                          observe_every=observe_every or evaluation_every(plan.steps))
        clock = time.perf_counter()
        result = trainer.run(resume=resume)
        train_s = time.perf_counter() - clock  # with a teacher, its pass over the text is part of it
        model_dir = plan.output_dir / BEST_DIR
        clock = time.perf_counter()
        after = evaluate(load_model(model_dir)) if evaluate else {}
        evaluate_s += time.perf_counter() - clock
        wall = time.perf_counter() - start
        # times to the millisecond: rounded to 0.1 s, a short run's training time read 0.0
        summary = {"text": plan.text, "sentences": plan.sentences, "train_sentences": plan.train_sentences,
                   "held_out": len(plan.held_out), "model": plan.model, "teacher": plan.teacher,
                   "selection": plan.selection, "steps": plan.steps, "best_step": result.best_step,
                   "selection_score": result.best_dev, "selection_start": result.dev_at_start,
                   "before": before, "after": after, "wall_s": round(wall, 3), "train_s": round(train_s, 3),
                   "evaluate_s": round(evaluate_s, 3), "estimate_s": None if estimate_s is None else round(estimate_s, 1),
                   "provenance": provenance()}
        annotate_model(model_dir, summary)
        report = write_report(plan.output_dir, summary)
        write_json_atomic(plan.output_dir / ADAPT_FILE, summary)
    return AdaptResult(model_dir, result.best_step, plan.selection, before, after, wall, report)


def summary_of(result: AdaptResult) -> str:
    lines = [f"model: {result.model_dir} (selected at step {result.best_step}; {result.selection})"]
    for key, old in result.before.items():
        new = result.after.get(key)
        if new is not None:
            lines.append(f"{key}: {old:.2f} -> {new:.2f} ({new - old:+.2f})")
    lines.append(f"report: {result.report} ({result.wall_s:.0f} s)")
    return "\n".join(lines)
