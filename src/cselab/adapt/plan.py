"""What ``cselab adapt`` will do, decided before any model loads: the user's text, its held-out part, the budget and
the run configuration of the recipe (:func:`plan_adapt`, which checks every input and writes nothing)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cselab.adapt.selection import FIXED_BUDGET, SELECTIONS, TEACHER_AGREEMENT
from cselab.config.run_config import RunConfig, validate
from cselab.data.corpus import read_corpus
from cselab.errors import CselabError
from cselab.fileio import write_atomic
from cselab.paths import MODEL_NAMES, resolve_model_path

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HELD_OUT_FRACTION, HELD_OUT_MAX, HELD_OUT_MIN = 0.05, 500, 20
MIN_SENTENCES = 200  # below this neither the held-out part nor the neighbours mean anything
TRAIN_FILE, HELD_OUT_FILE, ADAPT_FILE, REPORT_FILE, PLOT_FILE = (
    "train.txt", "held-out.txt", "adapt.json", "adapt-report.md", "adapt-report.png")
SPLIT_SEED = 0


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
