"""``cselab adapt``: a better encoder for the user's own text in one command.

The recipe (what :func:`plan_adapt` builds):

* **By default**: SimCSE with the model's own mean pooling at temperature 0.2, lr 1e-5, on a fixed budget (the
  last step is the result). Why this default: on the domain suite (docs/adapt.md, "Your own domain") it had the
  larger mean gain of the two recipes over the domains where both ran, it needs no second model and it trains
  several times faster than the teacher recipe; on its runs the fixed budget picked the same steps as the best
  label-free criteria (STS-B dev, held-out InfoNCE and uniformity) and better ones than the teacher agreement,
  without evaluating anything. Neither recipe gains on every domain (both lost on news clustering), which is why
  the user is asked to check the result on a few labelled examples (``--labels`` and the like).
* **With a teacher** (``--teacher DIR``, e.g. all-mpnet-base-v2 after ``cselab data fetch models-mpnet``): the
  teacher's cosines of pairs of the user's sentences are distilled into the user's model (``distill`` with
  ``target: pairs``): each sentence with one of its nearest neighbours by the teacher and with a random
  sentence, the student's cosines regressing onto the teacher's. The teacher is untouched.

**Selection without labels.** A held-out part of the user's text (5%, at most 500 sentences) is never trained
on. With a teacher, every ``eval_every`` steps the student is scored by its agreement with the teacher on
held-out pairs (Spearman x 100 between the student's and the teacher's cosines of each held-out sentence with
its nearest held-out neighbour and with a random one); the best step is kept, and the untouched model (step 0)
is always a candidate. Without a teacher there is nothing to agree with, so the budget is fixed and the last
step is kept. The budget is set from the text's size (:func:`default_steps`: three passes, 100 to 450 steps).

Everything ``cselab train`` gives holds: progress, ``--resume`` after a kill, one writer per directory, a
directory holding files that cselab did not write is refused.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cselab.config.run_config import RunConfig, validate
from cselab.data.corpus import read_corpus
from cselab.data.sts import StsSubset, StsTask
from cselab.errors import CselabError
from cselab.fileio import write_atomic, write_json_atomic
from cselab.paths import MODEL_NAMES, resolve_model_path
from cselab.provenance import provenance

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HELD_OUT_FRACTION, HELD_OUT_MAX, HELD_OUT_MIN = 0.05, 500, 20
MIN_SENTENCES = 200  # below this neither the held-out part nor the neighbours mean anything
TRAIN_FILE, HELD_OUT_FILE, ADAPT_FILE, REPORT_FILE, PLOT_FILE = (
    "train.txt", "held-out.txt", "adapt.json", "adapt-report.md", "adapt-report.png")
SPLIT_SEED = 0
# A training step's seconds per second of timed inference over as many tokens, by the precision both run in
# (the domain study's timing records). fp32, on a 2-core AMD EPYC: 2.3 for the 10,000-sentence stsb run (1.57 s
# per step, 15.1 tokens per sentence, 0.355 ms per token in inference); with 2.2, `make demo` on linux-man (27
# tokens per sentence) was estimated at 5.7 min and took 6.4, and the whole linux-man text (402 steps, 3.07 s per
# step) at 16.2 and took 21.8. bf16, on a 2-core Intel Xeon with AMX, from two default-budget runs estimated with
# 2.2: bbc-news (839 steps of news sentences) trained 641 s against 411 estimated (3.4), tweets (1500 steps of
# tweets) 1289 s against 1168 (2.4); 2.9 puts both within a fifth. bf16 speeds inference more than a training step
# (its backward pass and fp32 optimizer gain less). Other precisions (fp16 on CUDA) are unmeasured: fp32's.
TRAIN_STEP_PER_FORWARD = {"fp32": 2.2, "bf16": 2.9}


@dataclass
class AdaptPlan:
    """What ``cselab adapt`` will do, decided before any model loads."""

    text: str
    model: str
    teacher: str | None
    output_dir: Path
    sentences: int
    train_sentences: int
    held_out: list[str]
    steps: int
    selection: str  # one of SELECTIONS
    config: RunConfig = field(repr=False)
    max_sentences: int | None = None  # only the first N distinct sentences of the text are used

    def describe(self) -> str:
        recipe = (f"distil {self.teacher}'s cosines of neighbour pairs into {self.model}" if self.teacher
                  else f"SimCSE on {self.model} (mean pooling, temperature 0.2)")
        return (f"adapt: {recipe}; {self.train_sentences} sentences to train on, {len(self.held_out)} held out; "
                f"{self.steps} steps of {self.config.train.batch_size}; selection: {self.selection}")


def read_text(path: str | Path, max_sentences: int | None = None) -> list[str]:
    """The user's distinct sentences in file order (the first ``max_sentences`` of them when given)."""
    unique = list(dict.fromkeys(read_corpus(path).sentences))
    return unique if max_sentences is None else unique[:max_sentences]


# How the adapted model is chosen. The fixed budget (the last step) is the default with or without a teacher: over
# the domain study's 24 held-out runs it had the best mean regret of the label-free criteria, and on the 12 runs
# with a teacher it was never worse than the teacher agreement (docs/adapt.md, "Selection").
FIXED_BUDGET, TEACHER_AGREEMENT = "fixed-budget", "teacher-agreement"
SELECTIONS = (FIXED_BUDGET, TEACHER_AGREEMENT)


# The default budget: three passes over the text, at least MIN_STEPS and at most MAX_STEPS. The cap is the largest
# budget at which every measured full-budget run of the default gained (stsb 446 steps, linux-man 402); uncapped,
# the default lost 5.3 accuracy on tweets (1,500 steps) and 3.5 V-measure on bbc-news (839). Checked afterwards on
# brown-genres, a domain kept outside the suite (seeds 1-2): accuracy 46.17/46.38 capped, 43.86/43.96 at the uncapped
# 1,207 steps, 45.16 untouched; STS-B test 81.87/81.89 against 81.03/80.95 (docs/adapt.md, "The cap, and the check
# that decides it").
MIN_STEPS, MAX_STEPS = 100, 450


def default_steps(train_sentences: int, batch_size: int) -> int:
    """Three passes over the sentences, at least :data:`MIN_STEPS` and at most :data:`MAX_STEPS` steps."""
    return int(min(MAX_STEPS, max(MIN_STEPS, math.ceil(3 * train_sentences / batch_size))))


def evaluation_every(steps: int) -> int:
    """How often a run that selects by the teacher agreement scores it (and how often the domain study observes its
    criteria): eight times over the budget."""
    return max(1, steps // 8)


def split_held_out(sentences: Sequence[str], seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(train, held out): distinct sentences, a seeded 5% (20 to 500) held out."""
    unique = list(dict.fromkeys(sentences))
    n_held = min(HELD_OUT_MAX, max(HELD_OUT_MIN, round(HELD_OUT_FRACTION * len(unique))))
    order = list(range(len(unique)))
    random.Random(seed).shuffle(order)
    held = set(order[:n_held])
    return [s for i, s in enumerate(unique) if i not in held], [s for i, s in enumerate(unique) if i in held]


def _resolve_teacher(teacher: str | None, no_teacher: bool) -> str | None:
    """The teacher's directory or fetched name; ``None`` (no option, or ``--no-teacher``): the default recipe."""
    if no_teacher and teacher is not None:
        raise CselabError("give --teacher or --no-teacher, not both")
    if teacher is None:
        return None
    if Path(resolve_model_path(teacher)).is_dir():
        return teacher
    fetch = next((t for t, name in MODEL_NAMES.items() if name == teacher), None)
    if fetch is not None:
        raise CselabError(f"the teacher {teacher} is not fetched: run `cselab data fetch {fetch}`")
    raise CselabError(f"teacher not found: {teacher} (a saved model directory or a fetched model's name)")


def plan_adapt(text: str | Path, output_dir: str | Path, *, model: str = DEFAULT_MODEL, teacher: str | None = None,
               no_teacher: bool = False, steps: int | None = None, batch_size: int = 64, max_length: int = 64,
               seed: int = 1, max_sentences: int | None = None, select: str = FIXED_BUDGET,
               overrides: Sequence[str] = ()) -> AdaptPlan:
    """Validate the inputs and build the run configuration (nothing is written). ``select``: the last step
    (``fixed-budget``) or, with a teacher, the step whose cosines of held-out pairs agree best with the teacher's
    (``teacher-agreement``; the untouched model is a candidate)."""
    from cselab.config.run_config import apply_overrides

    if steps is not None and steps < 1:
        raise CselabError(f"--steps must be at least 1, got {steps}")
    if batch_size < 2:
        raise CselabError(f"--batch-size must be at least 2 (in-batch negatives), got {batch_size}")
    if max_length < 8:
        raise CselabError(f"--max-length must be at least 8 tokens, got {max_length}")
    if select not in SELECTIONS:
        raise CselabError(f"--select must be one of {', '.join(SELECTIONS)}, got {select!r}")
    if select == TEACHER_AGREEMENT and teacher is None:
        raise CselabError("--select teacher-agreement needs a --teacher")
    if max_sentences is not None and max_sentences < MIN_SENTENCES:
        raise CselabError(f"--max-sentences must be at least {MIN_SENTENCES}, got {max_sentences}")
    sentences = read_text(text, max_sentences)
    if len(set(sentences)) < MIN_SENTENCES:
        raise CselabError(f"{text}: {len(set(sentences))} distinct sentences; cselab adapt needs at least "
                          f"{MIN_SENTENCES} (one per line)")
    teacher_name = _resolve_teacher(teacher, no_teacher)
    train, held = split_held_out(sentences)
    output_dir = Path(output_dir)
    n_steps = steps if steps is not None else default_steps(len(train), batch_size)
    every = evaluation_every(n_steps)
    raw: dict[str, Any] = {
        "protocol": "adapt-domain",
        "model": {"backbone": model, "pooler": "mean", "max_length": max_length},
        "data": {"corpus": str(output_dir / TRAIN_FILE)},
        "train": {"output_dir": str(output_dir), "seed": seed, "batch_size": batch_size, "max_steps": n_steps,
                  "scheduler": "linear", "precision": "auto", "eval_every": every, "eval_at_start": True},
    }
    if teacher_name is not None:
        raw["method"] = "distill"
        raw["model"]["dropout"] = 0.0
        raw["train"]["lr"] = 1e-4
        raw["method_options"] = {"teacher": teacher_name, "target": "pairs", "neighbours": 30, "random_pairs": 1}
    else:
        raw["method"] = "simcse"
        raw["model"]["dropout"] = 0.1
        raw["train"]["lr"] = 1e-5
        raw["method_options"] = {"temperature": 0.2}
    if select == FIXED_BUDGET:  # one evaluation, at the last step, which is the result
        raw["train"]["eval_every"] = n_steps
        raw["train"]["eval_at_start"] = False
    config = validate(RunConfig, apply_overrides(raw, list(overrides)))
    return AdaptPlan(str(text), model, teacher_name, output_dir, len(sentences), len(train), held, n_steps, select,
                     config, max_sentences)


def write_texts(plan: AdaptPlan, train: Sequence[str]) -> None:
    """The training and held-out texts inside the run directory (the run reads its text from there)."""
    write_atomic(plan.output_dir / TRAIN_FILE, "".join(f"{s}\n" for s in train))
    write_atomic(plan.output_dir / HELD_OUT_FILE, "".join(f"{s}\n" for s in plan.held_out))


# -- selection without labels --------------------------------------------------------------------------------
def held_out_pairs(held_out: Sequence[str], teacher_vectors: np.ndarray, seed: int = SPLIT_SEED
                   ) -> tuple[list[str], list[str], np.ndarray]:
    """Each held-out sentence with its nearest held-out neighbour by the teacher and with a random other one;
    returns (first sentences, second sentences, the teacher's cosines)."""
    unit = teacher_vectors / np.clip(np.linalg.norm(teacher_vectors, axis=1, keepdims=True), 1e-12, None)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    nearest = cos.argmax(axis=1)
    rng = np.random.default_rng(seed)
    n = len(held_out)
    partner = (np.arange(n) + rng.integers(1, n, size=n)) % n  # never the sentence itself
    firsts, seconds, targets = [], [], []
    for i in range(n):
        for j in (int(nearest[i]), int(partner[i])):
            firsts.append(held_out[i])
            seconds.append(held_out[j])
            targets.append(float(unit[i] @ unit[j]))
    return firsts, seconds, np.asarray(targets)


def teacher_agreement_task(held_out: Sequence[str], teacher: Any, batch_size: int = 64) -> StsTask:
    """The held-out pairs as an STS task whose gold scores are the teacher's cosines: the STS evaluator then
    scores a student by its agreement with the teacher (Spearman x 100)."""
    vectors = teacher.encode(list(held_out), batch_size=batch_size).float().numpy()
    firsts, seconds, targets = held_out_pairs(held_out, vectors)
    return StsTask("teacher-agreement", "dev", (StsSubset("held-out", firsts, seconds, targets),))


class HeldOutLoss:
    """What a fixed budget's single evaluation (the last step) records: the held-out text's InfoNCE loss
    (:class:`cselab.analysis.held_out.HeldOutScores`), negated so that higher is better. It selects nothing,
    since a fixed budget evaluates once, and it needs no labelled data (STS-B dev would need `cselab data fetch
    sts`); it has the trainer's selector interface (``__call__`` and ``primary_score``)."""

    primary = "held-out/-infonce"

    def __init__(self, held_out: Sequence[str]) -> None:
        from cselab.analysis.held_out import HeldOutScores

        self.scores = HeldOutScores(held_out)

    def __call__(self, model: Any) -> dict[str, float]:
        return self.scores(model)

    def primary_score(self, result: dict[str, float]) -> float:
        return -float(result["infonce"])


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


# -- the whole command ------------------------------------------------------------------------------------------
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
        _annotate_model(model_dir, summary)
        report = write_report(plan.output_dir, summary)
        write_json_atomic(plan.output_dir / ADAPT_FILE, summary)
    return AdaptResult(model_dir, result.best_step, plan.selection, before, after, wall, report)


def _annotate_model(model_dir: Path, summary: dict[str, Any]) -> None:
    """Put the adaptation (before/after figures) into the saved model's description and card."""
    from cselab.models.model_card import CARD_FILE, model_card

    file = model_dir / "cselab.json"
    description = json.loads(file.read_text())
    description["adaptation"] = {k: summary[k] for k in ("text", "sentences", "teacher", "selection", "best_step",
                                                        "before", "after")}
    write_json_atomic(file, description)
    write_atomic(model_dir / CARD_FILE, model_card(description))


def write_report(output_dir: Path, summary: dict[str, Any]) -> Path:
    """``adapt-report.md`` and ``adapt-report.png``: the scores before/after and the selection curve."""
    from cselab.reporting.plots import plot_adaptation

    curve = []
    metrics = output_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            record = json.loads(line)
            if "dev" in record:
                curve.append((int(record["step"]), float(record["dev"])))
    plot_adaptation(summary.get("before", {}), summary.get("after", {}), curve, summary["selection"],
                    output_dir / PLOT_FILE)
    lines = ["# cselab adapt", "", f"- text: `{summary['text']}` ({summary['sentences']} sentences, "
             f"{summary['held_out']} held out for selection)", f"- model: {summary['model']}",
             f"- teacher: {summary['teacher'] or 'none'}", f"- selection: {summary['selection']}, "
             f"best step {summary['best_step']} of {summary['steps']}",
             f"- wall time: {summary['wall_s']:.0f} s" + _time_split(summary), ""]
    if summary.get("before"):
        lines += ["| score | before | after | change |", "|---|---|---|---|"]
        for key, old in summary["before"].items():
            new = summary["after"].get(key)
            change = f"{new - old:+.2f}" if new is not None else ""
            lines.append(f"| {key} | {old:.2f} | {new:.2f} | {change} |" if new is not None else f"| {key} | {old:.2f} | | |")
        lines.append("")
    lines += [f"![before/after and selection]({PLOT_FILE})", ""]
    write_atomic(output_dir / REPORT_FILE, "\n".join(lines))
    return output_dir / REPORT_FILE


def _time_split(summary: dict[str, Any]) -> str:
    if "train_s" not in summary:  # written before the split was recorded
        return ""
    return f" ({summary['train_s']:.0f} s training, {summary['evaluate_s']:.0f} s scoring before/after)"


def summary_of(result: AdaptResult) -> str:
    lines = [f"model: {result.model_dir} (selected at step {result.best_step}; {result.selection})"]
    for key, old in result.before.items():
        new = result.after.get(key)
        if new is not None:
            lines.append(f"{key}: {old:.2f} -> {new:.2f} ({new - old:+.2f})")
    lines.append(f"report: {result.report} ({result.wall_s:.0f} s)")
    return "\n".join(lines)


def plan_as_dict(plan: AdaptPlan) -> dict[str, Any]:
    out = asdict(plan)
    out["config"] = plan.config.model_dump(mode="json")
    out["held_out"] = len(plan.held_out)
    out["output_dir"] = str(plan.output_dir)
    return out
