"""A rough wall-time estimate of an adaptation before it trains: a timed inference pass over held-out sentences,
extrapolated per token to the plan's steps, evaluations and teacher pass."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cselab.adaptation.examples import UNIT_COPIES
from cselab.adaptation.plan import AdaptPlan

# A training step's seconds per second of timed inference over as many tokens, by the precision both run in: the
# backward pass and the optimizer cost more than the forward, and bf16 speeds the forward more than the rest. Fitted
# on timed adaptations of the domain suite (docs/adapt.md, "Time"); other precisions use fp32's.
TRAIN_STEP_PER_FORWARD = {"fp32": 2.2, "bf16": 2.9}


@dataclass(frozen=True)
class ForwardCost:
    """What one timed inference pass over held-out sentences measured: seconds per token and tokens per sentence,
    in ``precision``."""

    seconds_per_token: float
    tokens_per_sentence: float
    precision: str = "fp32"


def estimate_seconds(plan: AdaptPlan, student: Any = None, teacher: Any = None) -> float:
    """A rough wall-time estimate before training: a timed inference pass over up to 256 held-out sentences
    through the student (and the teacher), at the training length, in the precision the run will use (``auto``:
    bf16 where the probe says it pays; the training steps' choice for the student, the teacher pass's for the
    teacher), extrapolated by :func:`extrapolate_seconds`. The held-out sentences are a random 5% of the text, so
    their token lengths stand for the text's. ``student`` and ``teacher``: the models already loaded (else they are
    loaded here). With the teacher adapted first (the recipe's ``adapt_teacher``), its own adaptation is added
    (unless it is finished), and the pass through the model it will keep is timed on the untouched teacher, which
    has its shape."""
    from cselab.adaptation.plan import ADAPT_FILE, TEACHER_DIR
    from cselab.models.sentence_model import load_model
    from cselab.runtime.precision import autocast_context, inference_precision, planned_precision
    from cselab.teacher.vectors import BATCH, load_teacher, pass_is_kept

    sample = list(plan.held_out[:256])

    def forward_cost(model: Any, precision: str | None, batch_size: int, length: int | None = None) -> ForwardCost:
        device = next(model.parameters()).device
        precision = precision or inference_precision(plan.config.train.precision, model, batch_size).precision
        kept = getattr(model, "max_length", None)
        length = length or kept or 512  # a twin or an ensemble: its first member's tokens
        tokens = sum(len(ids) for ids in model.tokenizer(sample, truncation=True, max_length=length)["input_ids"])
        seconds = []
        if kept is not None:
            model.max_length = min(length, kept)  # timed at the training length, the model's own kept
        try:
            with autocast_context(precision, device):
                model.encode(sample[:batch_size], batch_size=batch_size)  # warm-up: a shape's first call is slower
                for _ in range(2):  # the faster of two: one pass of short sentences varies by a third between tries
                    start = time.perf_counter()
                    model.encode(sample, batch_size=batch_size)
                    seconds.append(time.perf_counter() - start)
        finally:
            if kept is not None:
                model.max_length = kept
        return ForwardCost(min(seconds) / max(1, tokens), tokens / max(1, len(sample)), precision)

    if student is None:
        student = load_model(plan.model, pooler="mean")
    cost = forward_cost(student, planned_precision(plan.config).precision, 64, plan.config.model.max_length)
    teacher_cost, first = None, 0.0
    inner = plan.teacher_plan
    if inner is not None and not (inner.output_dir / ADAPT_FILE).is_file():
        untouched = load_teacher(inner.model)  # once: the student of its own adaptation, and the pass's shape
        first = estimate_seconds(inner, untouched)
        teacher_cost = forward_cost(untouched, None, BATCH)
    elif plan.teacher is not None:
        teacher = teacher if teacher is not None else load_teacher(plan.teacher)
        if not pass_is_kept(plan.teacher, [*plan.train_units, *plan.held_out_units], plan.output_dir / TEACHER_DIR,
                            teacher):
            teacher_cost = forward_cost(teacher, None, BATCH)  # torch: an export the pass may pick runs faster
    return first + extrapolate_seconds(plan, cost, teacher_cost)


def extrapolate_seconds(plan: AdaptPlan, student: ForwardCost, teacher: ForwardCost | None = None) -> float:
    """The plan's wall time from what an inference pass costs per token through the student and the teacher: the
    steps, the evaluations and the teacher's pass over the text (``teacher`` ``None``: no pass to run, none or
    already kept).

    A distillation batch encodes each example once with its ``neighbours`` (``target: pairs``: with one neighbour
    and its ``random_pairs``), SimCSE twice (two dropout views), a distillation with SimCSE's term beside it
    (``contrastive``) twice too; an example of passages holds
    as many tokens as its lines; a training step of n tokens costs about ``TRAIN_STEP_PER_FORWARD[precision]``
    inference passes over n tokens. An evaluation encodes each held-out sentence once with a teacher (the
    distillation loss), twice with the guard (as lines and in passages) and twice without a teacher (the sentence and
    its deletion view). Time is counted per token, not per sentence, because training batches sentences of similar
    length and a text of short sentences trains several times faster per step than one of long ones."""
    rows = _rows_per_example(plan)
    per_sentence = student.seconds_per_token * student.tokens_per_sentence
    # the lines the training examples hold (a general sentence is one)
    unit_lines = plan.train_sentences * UNIT_COPIES[plan.units] + len(plan.general_units)
    lines_per_example = unit_lines / max(1, len(plan.train_units)) if plan.train_units else 1.0
    step = TRAIN_STEP_PER_FORWARD.get(student.precision, TRAIN_STEP_PER_FORWARD["fp32"])
    total = plan.steps * step * rows * plan.config.train.batch_size * lines_per_example * per_sentence
    evaluations = plan.steps // plan.config.train.eval_every + int(plan.config.train.eval_at_start)
    # the held-out passages hold the tokens of the held-out lines; the guard encodes them as lines and as passages
    views = 2 if plan.teacher is None or plan.guard_views else 1
    total += evaluations * views * len(plan.held_out) * per_sentence
    if teacher is not None:
        total += (teacher.seconds_per_token * teacher.tokens_per_sentence  # passages hold their lines' tokens
                  * (unit_lines + len(plan.held_out) * (UNIT_COPIES[plan.units] + len(plan.guard_views))))
    return total


def _rows_per_example(plan: AdaptPlan) -> int:
    if plan.config.method != "distill":
        return 2  # SimCSE: two dropout views
    from cselab.methods.distill import DistillOptions, sentences_per_example

    options = DistillOptions.model_validate(plan.config.method_options)
    return sentences_per_example(options) * (2 if options.contrastive else 1)  # SimCSE's term: two dropout views


MAX_ESTIMATE_DAYS = 30  # a budget estimated to train longer than this is refused as a mistake


def check_budget(plan: AdaptPlan, estimate_s: float) -> None:
    """Refuse a budget whose estimate is absurd (more than :data:`MAX_ESTIMATE_DAYS` days), naming the estimate."""
    days = estimate_s / 86400
    if days > MAX_ESTIMATE_DAYS:
        from cselab.errors import UsageError

        raise UsageError(f"--steps {plan.steps}: estimated {days:,.0f} days on this machine; give fewer steps (the "
                         "default for this text is the recipe's, without --steps)")
