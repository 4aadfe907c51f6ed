"""A rough wall-time estimate of an adaptation before it trains: a timed inference pass over held-out sentences,
extrapolated per token to the plan's steps, evaluations and teacher pass."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cselab.adapt.plan import AdaptPlan

# A training step's seconds per second of timed inference over as many tokens, by the precision both run in
# (the domain study's timing records). fp32, on a 2-core AMD EPYC: 2.3 for the 10,000-sentence stsb run (1.57 s
# per step, 15.1 tokens per sentence, 0.355 ms per token in inference); with 2.2, `make demo` on linux-man (27
# tokens per sentence) was estimated at 5.7 min and took 6.4, and the whole linux-man text (402 steps, 3.07 s per
# step) at 16.2 and took 21.8. bf16, on a 2-core Intel Xeon with AMX, from two default-budget runs estimated with
# 2.2: bbc-news (839 steps of news sentences) trained 641 s against 411 estimated (3.4), tweets (1500 steps of
# tweets) 1289 s against 1168 (2.4); 2.9 puts both within a fifth. bf16 speeds inference more than a training step
# (its backward pass and fp32 optimizer gain less). Other precisions (fp16 on CUDA) are unmeasured: fp32's.
TRAIN_STEP_PER_FORWARD = {"fp32": 2.2, "bf16": 2.9}


@dataclass(frozen=True)
class ForwardCost:
    """What one timed inference pass over held-out sentences measured: seconds per token and tokens per sentence,
    in ``precision``."""

    seconds_per_token: float
    tokens_per_sentence: float
    precision: str = "fp32"


def estimate_seconds(plan: AdaptPlan) -> float:
    """A rough wall-time estimate before training: a timed inference pass over up to 256 held-out sentences
    through the student (and the teacher), in the precision the run will use (``auto``: bf16 where the probe says
    it pays; the training steps' choice for the student, the teacher pass's for the teacher), extrapolated by
    :func:`extrapolate_seconds`. The held-out sentences are a random 5% of the text, so their token lengths stand
    for the text's."""
    from cselab.methods.distill import teacher_pass_precision
    from cselab.models.sentence_model import load_model
    from cselab.runtime.precision import autocast_context, planned_precision

    sample = list(plan.held_out[:256])

    def forward_cost(name: str, precision: str | None, **kwargs: Any) -> ForwardCost:
        model = load_model(name, **kwargs)
        device = next(model.parameters()).device
        precision = precision or teacher_pass_precision(plan.config.train.precision, model)
        tokens = sum(len(row) for row in model.token_rows(sample))
        seconds = []
        with autocast_context(precision, device):
            model.encode(sample[:64], batch_size=64)  # warm-up: the first call of a shape is slower
            for _ in range(2):  # the faster of two: one pass of short sentences varies by a third between tries
                start = time.perf_counter()
                model.encode(sample, batch_size=64)
                seconds.append(time.perf_counter() - start)
        return ForwardCost(min(seconds) / max(1, tokens), tokens / max(1, len(sample)), precision)

    student = forward_cost(plan.model, planned_precision(plan.config).precision, pooler="mean",
                           max_length=plan.config.model.max_length)
    teacher = forward_cost(plan.teacher, None) if plan.teacher is not None else None
    return extrapolate_seconds(plan, student, teacher)


def extrapolate_seconds(plan: AdaptPlan, student: ForwardCost, teacher: ForwardCost | None = None) -> float:
    """The plan's wall time from what an inference pass costs per token through the student and the teacher: the
    steps, the evaluations and the teacher's pass over the text.

    A pairs batch encodes three rows per example, SimCSE two; a training step of n tokens costs about
    ``TRAIN_STEP_PER_FORWARD[precision]`` inference passes over n tokens. An evaluation encodes four rows per held-out
    sentence with a teacher (two pairs) and two without (the sentence and its deletion view). Time is counted
    per token, not per sentence, because training batches sentences of similar length and a text of short
    sentences trains several times faster per step than one of long ones."""
    with_teacher = plan.teacher is not None
    rows = 3 if with_teacher else 2
    per_sentence = student.seconds_per_token * student.tokens_per_sentence
    step = TRAIN_STEP_PER_FORWARD.get(student.precision, TRAIN_STEP_PER_FORWARD["fp32"])
    total = plan.steps * step * rows * plan.config.train.batch_size * per_sentence
    evaluations = plan.steps // plan.config.train.eval_every + int(plan.config.train.eval_at_start)
    total += evaluations * (4 if with_teacher else 2) * len(plan.held_out) * per_sentence
    if with_teacher:
        if teacher is None:
            raise ValueError("a plan with a teacher needs the teacher's forward cost")
        total += (teacher.seconds_per_token * teacher.tokens_per_sentence
                  * (plan.train_sentences + len(plan.held_out)))
    return total
