"""What ``cselab adapt`` will do, decided before any model loads: the user's text, its held-out part, the budget and
the run configuration of the recipe (:func:`plan_adapt`, which checks every input and writes nothing)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cselab.adaptation.selection import (
    FIXED_BUDGET,
    GUARD_MAX_LENGTH,
    GUARDED_DISTILLATION_LOSS,
    SELECTIONS,
)
from cselab.config.run_config import RunConfig, validate
from cselab.data.corpus import read_corpus
from cselab.errors import CselabError
from cselab.fileio import write_atomic
from cselab.paths import MODEL_NAMES, resolve_model_path
from cselab.vocabulary import ADAPT_TASKS, ADAPT_UNITS, PASSAGE_GROUPINGS

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HELD_OUT_FRACTION, HELD_OUT_MAX, HELD_OUT_MIN = 0.05, 500, 20
MIN_SENTENCES = 200  # below this neither the held-out part nor the neighbours mean anything
TRAIN_FILE, HELD_OUT_FILE, ADAPT_FILE, REPORT_FILE, PLOT_FILE, PLAN_FILE = (
    "train.txt", "held-out.txt", "adapt.json", "adapt-report.md", "adapt-report.png", "adapt-plan.json")
WEIGHT_MIX_DIR = "weight-mix"  # the selected model's weights mixed with the untouched model's (--mix below 1)
SPLIT_SEED = 0
# The tasks for which `--task` adapts the teacher first (--adapt-teacher) when a teacher distils: the domain study
# measured it ahead of the default on search and similarity, and on a search domain kept outside the suite, and behind
# it on clustering and classification (docs/adapt.md, "Name your task"); the other tasks keep the default, which a
# classification domain kept outside the suite also kept against the teacher's cosines.
TASKS_ADAPTING_THE_TEACHER = frozenset({"similarity", "search"})


def handed_back_model_dir(output_dir: Path, mix: float) -> Path:
    """Where ``cselab adapt`` into ``output_dir`` saves the model the user takes: the selected model (``best``), or
    its mix with the untouched model (``weight-mix``) when ``mix`` is below 1."""
    from cselab.training.run_directory import BEST_DIR

    return output_dir / (WEIGHT_MIX_DIR if mix < 1.0 else BEST_DIR)


def mixed_phrase(mix: float) -> str:
    """The clause that says the model handed back is mixed (``--mix``): one wording for the plan, the report and the
    printed summary."""
    return "" if mix >= 1.0 else f"; its weights mixed with the untouched model's, {mix:g} of them its own"


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
    recipe: str = "simcse"  # a key of RECIPES
    units: str = "lines"  # one of UNITS
    train_units: list[str] = field(default_factory=list, repr=False)  # the training examples, as train.txt holds them
    # the held-out text as the training examples are made (its lines, or passages of them): what the selection scores
    held_out_units: list[str] = field(default_factory=list, repr=False)
    # the guarded selection's views of the held-out text ({"lines": ..., "passages": ...}; empty for the others)
    guard_views: dict[str, list[str]] = field(default_factory=dict, repr=False)
    passages: str = "shuffled"  # which lines a passage groups: one of PASSAGE_GROUPINGS
    general: str | None = None  # a file of general sentences trained on beside the user's text (--general)
    # the general sentences drawn from it: the last of train_units, never held out, never in the user's text
    general_units: list[str] = field(default_factory=list, repr=False)
    # the adapted model's share of the weights it hands back, mixed with the untouched model's (--mix; 1: unmixed)
    mix: float = 1.0
    # --adapt-teacher: the teacher's own SimCSE adaptation to the text, run first in the run directory; ``teacher`` is
    # then the model it keeps
    teacher_plan: AdaptPlan | None = field(default=None, repr=False)
    task: str | None = None  # what the model is for (--task, one of ADAPT_TASKS), when the user said

    @property
    def model_dir(self) -> Path:
        """Where the model the user takes is saved (:func:`handed_back_model_dir`)."""
        return handed_back_model_dir(self.output_dir, self.mix)

    @property
    def text_units(self) -> list[str]:
        """The training examples made of the user's text (train_units without the general sentences)."""
        return self.train_units[:len(self.train_units) - len(self.general_units)]

    def teacher_parts(self) -> dict[str, list[str]]:
        """The texts of the teacher's pass (the training examples, then the held-out text as they are made), by kind
        of unit: ``{"lines": ...}``, ``{"passages": ...}``, or for ``mixed`` both, each the text a run of that kind
        passes over (so its pass is found again where it was made before); the general sentences, when given, are a
        part of their own (``"general"``)."""
        own = self.text_units
        general = {"general": list(self.general_units)} if self.general_units else {}
        if self.units != "mixed":
            return {self.units: [*own, *self.held_out_units], **general}
        lines, held = self.train_sentences, len(self.held_out)
        return {"lines": [*own[:lines], *self.held_out_units[:held]],
                "passages": [*own[lines:], *self.held_out_units[held:]], **general}

    def describe(self) -> str:
        first = "" if self.teacher_plan is None else (
            f"{self.teacher_plan.describe()}, first, into {self.teacher_plan.output_dir}; then\n")
        what = RECIPES[self.recipe].description
        recipe = f"{what}, {self.teacher} into {self.model}" if self.teacher else f"{what} on {self.model}"
        grouped = "" if self.passages == "shuffled" else f" of {self.passages} lines"
        units = {"lines": "", "passages": f" in {len(self.text_units)} passages{grouped}",
                 "mixed": f" as lines and in {len(self.text_units) - self.train_sentences} passages{grouped}"
                 }[self.units]
        if self.general_units:
            units += f", and {len(self.general_units)} general sentences of {self.general}"
        task = f" for {self.task}" if self.task else ""
        return (f"{first}adapt{task}: {recipe}; {self.train_sentences} sentences to train on{units}, "
                f"{len(self.held_out)} held out; {self.steps} steps of {self.config.train.batch_size}; selection: "
                f"{self.selection}{mixed_phrase(self.mix)}")


def read_text(path: str | Path, max_sentences: int | None = None) -> list[str]:
    """The user's distinct sentences in file order (the first ``max_sentences`` of them when given)."""
    unique = list(dict.fromkeys(read_corpus(path).sentences))
    return unique if max_sentences is None else unique[:max_sentences]


def plan_facts(plan: AdaptPlan, sentences: Sequence[str]) -> dict[str, Any]:
    """What a run directory records of its plan (``adapt-plan.json``) so that ``--resume`` continues the same
    adaptation: the text's content (a hash of its distinct sentences in order), the options that choose it, and the
    recipe."""
    from cselab.data.vector_store import content_key

    return {"text_sha256": content_key("adapt-text/1", sentences), "sentences": len(sentences),
            "max_sentences": plan.max_sentences, "recipe": plan.recipe, "teacher": plan.teacher,
            "selection": plan.selection, "steps": plan.steps, "units": plan.units,
            "max_length": plan.config.model.max_length,
            **({} if plan.passages == "shuffled" else {"passages": plan.passages}),
            **({"general_sha256": content_key("adapt-general/1", plan.general_units)} if plan.general_units else {}),
            **({"mix": plan.mix} if plan.mix < 1.0 else {}),
            **({"adapted_teacher": plan.teacher_plan.model, "adapted_teacher_steps": plan.teacher_plan.steps}
               if plan.teacher_plan is not None else {})}


@dataclass(frozen=True)
class Recipe:
    """How ``cselab adapt`` trains: the method and its options, the learning rate and dropout, its default budget
    (``passes`` over the training text, at least ``min_steps`` and at most ``max_steps`` steps of ``batch_size``
    examples), what an example is, how the adapted model is chosen (``select``), whether general sentences are
    trained on beside the text (``general``) and how much of the adapted weights it hands back (``mix``)."""

    name: str
    description: str
    method: str
    method_options: dict[str, Any]
    lr: float
    dropout: float
    passes: float
    min_steps: int
    max_steps: int
    units: str = "lines"  # what a training example is: one of UNITS
    passages: str = "shuffled"  # which lines a passage groups: one of PASSAGE_GROUPINGS
    max_length: int = 64  # tokens of a training example
    batch_size: int = 64  # training examples per step
    select: str = FIXED_BUDGET  # one of SELECTIONS
    general: bool = False  # trains on as many general sentences beside the text (--general, else the fetched corpus)
    mix: float = 1.0  # the adapted model's share of the weights handed back, mixed with the untouched model's


_VECTOR_TARGET = {"target": "vectors", "projection": "pca-rotation", "vector_loss": "cosine", "neighbours": 0,
                  "length_groups": 1}
RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("simcse", "SimCSE (mean pooling, temperature 0.2)", "simcse", {"temperature": 0.2}, lr=1e-5, dropout=0.1,
           passes=3, min_steps=100, max_steps=450),
    Recipe("distill", "the teacher's cosines of each batch distilled (MSE; each line and each passage of lines with "
           "3 of its nearest neighbours by the teacher)", "distill",
           {"target": "similarities", "projection": "none", "vector_loss": "mse", "neighbours": 3,
            "length_groups": 4}, lr=1e-4, dropout=0.1, passes=1, min_steps=100, max_steps=450, units="mixed",
           max_length=256, batch_size=16, select=GUARDED_DISTILLATION_LOSS),
    # the teacher's whole vector, reduced to the student's width and rotated into its frame (orthogonal Procrustes),
    # regressed with a cosine loss; the last step kept (the guard reads cosines, which this target moves)
    Recipe("vectors", "the teacher's whole vector of each line distilled (its PCA rotated into the student, cosine "
           "loss)", "distill", _VECTOR_TARGET, lr=1e-4, dropout=0.1, passes=1, min_steps=100, max_steps=448,
           units="lines", max_length=64, batch_size=64, select=FIXED_BUDGET),
    Recipe("vectors-passages", "the teacher's whole vector of each passage of lines distilled (its PCA rotated into "
           "the student, cosine loss)", "distill", _VECTOR_TARGET, lr=1e-4, dropout=0.1, passes=1, min_steps=100,
           max_steps=100, units="passages", max_length=256, batch_size=64, select=FIXED_BUDGET),
    # the passages recipe with as many general sentences beside the passages, twice its steps so that each passage
    # is seen as often, a quarter of its weights mixed with the untouched model's (the domain study's quarter mix; the
    # default with a teacher before vectors-and-head)
    Recipe("vectors-general", "the teacher's whole vector of each passage of lines and of as many general sentences "
           "distilled (its PCA rotated into the student, cosine loss)", "distill", _VECTOR_TARGET, lr=1e-4,
           dropout=0.1, passes=1, min_steps=200, max_steps=200, units="passages", max_length=256, batch_size=64,
           select=FIXED_BUDGET, general=True, mix=0.25),
    # the default with a teacher: vectors-general with a linear head onto the teacher's whole vector (dropped at
    # inference) trained beside the rotation, three quarters of its weights mixed with a quarter of the untouched
    # model's (the domain study's composition and its mix; docs/adapt.md says why it is the default)
    Recipe("vectors-and-head", "the teacher's whole vector of each passage of lines and of as many general sentences "
           "distilled twice (its PCA rotated into the student, and through a linear head dropped at inference; cosine "
           "loss)", "distill", {**_VECTOR_TARGET, "projection": "pca-rotation+linear-head"}, lr=1e-4, dropout=0.1,
           passes=1, min_steps=200, max_steps=200, units="passages", max_length=256, batch_size=64,
           select=FIXED_BUDGET, general=True, mix=0.75),
)}
DEFAULT_RECIPE, DEFAULT_TEACHER_RECIPE = "simcse", "vectors-and-head"  # without a teacher, with one
TEACHER_RECIPES = tuple(name for name, recipe in RECIPES.items() if recipe.method == "distill")
# What a training example is: a line of the text, a passage of lines (lines grouped so that each passage holds up
# to a length drawn uniformly from 1 to the recipe's max_length tokens: every line once a pass, most examples several
# lines long), or both (mixed: every line once as itself and once in a passage). Passages teach a model inputs as long
# as the documents it may embed; a model trained on short lines alone can lose what it did with long inputs, and one
# trained on passages alone what it did with short ones. A passage groups lines drawn at random (shuffled) or a line
# and the lines most like it in words (similar): the first mixes topics as no document does, the second reads more
# like one.
UNITS = ADAPT_UNITS
UNIT_COPIES = {"lines": 1, "passages": 1, "mixed": 2}  # how many times the training examples hold each line
UNITS_SEED = 0
SIMILAR_CANDIDATES = 32  # the nearest lines in words a similar passage may take, for each line that starts one
NEIGHBOUR_BLOCK_CELLS = 50_000_000  # cosines held at once while finding them (400 MB)
DEFAULT_TEACHER = "all-mpnet-base-v2"  # used when fetched (`cselab data fetch models-mpnet`) unless --no-teacher
TEACHER_DIR = "teacher"  # the teacher's pass over the text, in the run directory
ADAPTED_TEACHER_DIR = "teacher-adapted"  # --adapt-teacher: the teacher's own adaptation, in the run directory
# --adapt-teacher: the adapted teacher's exports for its pass (ONNX, OpenVINO), kept with the run that made the teacher
ADAPTED_TEACHER_EXPORTS_DIR = "teacher-exports"
# --adapt-teacher's SimCSE budget for the teacher: the domain study's (docs/adapt.md, "The teacher adapted first")
ADAPTED_TEACHER_STEPS = 100
# the overrides the teacher's own adaptation takes from the student's: where and how it computes, not what it trains
RUNTIME_OVERRIDES = ("train.device", "train.threads", "train.precision")


def nearest_in_words(sentences: Sequence[str], k: int = SIMILAR_CANDIDATES) -> list[list[int]]:
    """For each sentence, the indices of the ``k`` other sentences nearest to it by the cosine of their TF-IDF
    vectors (sublinear term frequencies; scikit-learn's), nearest first; a sentence that shares no word with any
    other has none. No model is needed, so the plan can make similar passages before any model loads. Every pair is
    compared (the cost grows with the square of the text), a block of rows at a time, with a progress bar."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    from cselab.reporter import report

    n = len(sentences)
    if n < 2:
        return [[] for _ in sentences]
    try:
        vectors = TfidfVectorizer(sublinear_tf=True).fit_transform(sentences)
    except ValueError:  # no word at all in the text (only punctuation or stop characters)
        return [[] for _ in sentences]
    k = min(k, n - 1)
    chunk = max(1, min(1024, NEIGHBOUR_BLOCK_CELLS // n))  # rows whose cosines with every sentence are held at once
    nearest: list[list[int]] = []
    with report().bar(total=n, desc="passages: nearest lines in words", unit="line") as bar:
        for start in range(0, n, chunk):
            sims = (vectors[start:start + chunk] @ vectors.T).toarray()
            rows = np.arange(sims.shape[0])
            sims[rows, rows + start] = -1.0  # never a sentence's own neighbour
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            top_sims = np.take_along_axis(sims, top, axis=1)
            ranked = np.lexsort((top, -top_sims), axis=1)  # nearest first, the lower index first on a tie
            top, top_sims = np.take_along_axis(top, ranked, axis=1), np.take_along_axis(top_sims, ranked, axis=1)
            nearest.extend(row[row_sims > 0].tolist() for row, row_sims in zip(top, top_sims, strict=True))
            bar.update(len(rows))
    return nearest


def make_passages(sentences: Sequence[str], lengths: Sequence[int], max_tokens: int,
                  seed: int = UNITS_SEED, grouping: str = "shuffled") -> list[str]:
    """The sentences grouped into passages joined by a space; every sentence is in exactly one passage, each passage
    takes sentences while their token ``lengths`` sum to at most a target drawn uniformly from 1 to ``max_tokens``
    (always at least one sentence). ``shuffled``: the sentences shuffled (seeded), each passage the next ones.
    ``similar``: each passage starts at the next unused sentence of the shuffled order and takes its unused nearest
    sentences in words (:func:`nearest_in_words`), nearest first, while they fit."""
    if grouping not in PASSAGE_GROUPINGS:
        raise CselabError(f"passages must be one of {', '.join(PASSAGE_GROUPINGS)}, got {grouping!r}")
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    nearest = nearest_in_words(sentences) if grouping == "similar" else None
    used = [False] * len(sentences)
    passages, i = [], 0
    while i < len(order):
        if used[order[i]]:
            i += 1
            continue
        target = rng.randint(1, max_tokens)
        first = order[i]
        group, total = [first], lengths[first]
        used[first] = True
        following = (j for j in nearest[first] if not used[j]) if nearest is not None else (
            order[n] for n in range(i + 1, len(order)))
        for j in following:
            if total + lengths[j] > target:
                break
            group.append(j)
            total += lengths[j]
            used[j] = True
        i += 1
        passages.append(" ".join(sentences[j] for j in group))
    return passages


def training_units(model: str, train: Sequence[str], units: str, max_length: int,
                   passages: str = "shuffled") -> list[str]:
    """The training examples of ``train``: its lines, passages of them up to ``max_length`` of ``model``'s tokens
    grouped as ``passages`` says (:func:`make_passages`), or (``mixed``) its lines followed by those passages."""
    if units == "lines":
        return list(train)
    from transformers import AutoTokenizer

    from cselab.models.backbone import quiet_transformers

    quiet_transformers()
    path = Path(resolve_model_path(model))
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    special = len(tokenizer("")["input_ids"])  # [CLS] and [SEP] (or <s> and </s>), once per passage
    lengths = [len(ids) - special for ids in tokenizer(list(train), truncation=False)["input_ids"]]
    made = make_passages(train, lengths, max(1, max_length - special), grouping=passages)
    return [*train, *made] if units == "mixed" else made


def default_steps(train_sentences: int, batch_size: int, recipe: Recipe = RECIPES["simcse"]) -> int:
    """The recipe's passes over the sentences, at least its ``min_steps`` and at most its ``max_steps`` steps."""
    steps = math.ceil(recipe.passes * train_sentences / batch_size)
    return int(min(recipe.max_steps, max(recipe.min_steps, steps)))


def evaluation_every(steps: int) -> int:
    """How often a run that selects by a held-out score evaluates it: eight times over the budget."""
    return max(1, steps // 8)


def split_held_out(sentences: Sequence[str], seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(train, held out): distinct sentences, a seeded 5% (20 to 500) held out."""
    unique = list(dict.fromkeys(sentences))
    n_held = min(HELD_OUT_MAX, max(HELD_OUT_MIN, round(HELD_OUT_FRACTION * len(unique))))
    order = list(range(len(unique)))
    random.Random(seed).shuffle(order)
    held = set(order[:n_held])
    return [s for i, s in enumerate(unique) if i not in held], [s for i, s in enumerate(unique) if i in held]


def _check_model(model: str, what: str) -> str:
    """``model`` as a directory of one encoder (a fetched name, a sentence-transformers or HF directory, a saved
    cselab encoder); anything else is refused in one line that says what to give instead."""
    from cselab.models.sentence_model import read_description

    path = Path(resolve_model_path(model))
    if not path.exists():
        fetch = next((t for t, name in MODEL_NAMES.items() if name == model), None)
        if fetch is not None:
            raise CselabError(f"{what} {model} is not fetched: run `cselab data fetch {fetch}`")
        raise CselabError(f"{what} not found: {model} (a model directory or a fetched model's name)")
    if not path.is_dir():
        raise CselabError(f"{what} {model} is a file; give a model directory")
    if (path / "best").is_dir() and not (path / "config.json").exists() and not (path / "cselab.json").exists():
        raise CselabError(f"{what} {model} is a run directory; its model is {path / 'best'}")
    description = read_description(path)
    kind = description.get("kind") if description else None
    if kind is not None and kind != "encoder":
        raise CselabError(f"{what} {model} is a {kind}, not one encoder; adapt one encoder (e.g. a -D student, or "
                          "one member of the twin)")
    if description is None and not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        raise CselabError(f"{what} {model} holds no model (no config.json or modules.json)")
    return model


def _resolve_teacher(teacher: str | None, no_teacher: bool) -> str | None:
    """The teacher's directory or fetched name: ``teacher``, else :data:`DEFAULT_TEACHER` where it is fetched;
    ``None`` with ``--no-teacher`` or when no teacher is at hand (SimCSE then)."""
    if no_teacher and teacher is not None:
        raise CselabError("give --teacher or --no-teacher, not both")
    if no_teacher:
        return None
    if teacher is None:
        return DEFAULT_TEACHER if Path(resolve_model_path(DEFAULT_TEACHER)).is_dir() else None
    if Path(resolve_model_path(teacher)).is_dir():
        return teacher
    fetch = next((t for t, name in MODEL_NAMES.items() if name == teacher), None)
    if fetch is not None:
        raise CselabError(f"the teacher {teacher} is not fetched: run `cselab data fetch {fetch}`")
    raise CselabError(f"teacher not found: {teacher} (a saved model directory or a fetched model's name)")


def plan_adapt(text: str | Path, output_dir: str | Path, *, model: str = DEFAULT_MODEL, teacher: str | None = None,
               no_teacher: bool = False, steps: int | None = None, batch_size: int | None = None,
               max_length: int | None = None, seed: int = 1, max_sentences: int | None = None,
               select: str | None = None, units: str | None = None, passages: str | None = None,
               recipe: str | None = None, general: str | Path | None = None, mix: float | None = None,
               adapt_teacher: bool = False, adapted_teacher_steps: int = ADAPTED_TEACHER_STEPS,
               task: str | None = None, overrides: Sequence[str] = ()) -> AdaptPlan:
    """Validate the inputs and build the run configuration (nothing is written).

    With a teacher (``teacher``, or :data:`DEFAULT_TEACHER` when it is fetched, unless ``no_teacher``) the recipe is
    :data:`DEFAULT_TEACHER_RECIPE`, else :data:`DEFAULT_RECIPE` (:data:`RECIPES`). ``select`` (default: the
    recipe's): the last step (``fixed-budget``), or with a teacher the step whose held-out cosines agree best with
    the teacher's (``distillation-loss``, ``teacher-agreement``), or the step no further from the teacher than the
    untouched model on the held-out lines and on passages of them (``guarded-distillation-loss``); the untouched
    model is then a candidate. ``units``,
    ``max_length`` and ``batch_size`` (default: the recipe's): what a training example is (:data:`UNITS`), how many
    tokens it holds and how many make a step; ``passages`` (default: the recipe's): which lines a passage groups
    (:data:`PASSAGE_GROUPINGS`), in the training examples, the held-out text and the guard's view alike.
    ``recipe`` (a key of :data:`RECIPES`) chooses another recipe than the default; those of :data:`TEACHER_RECIPES`
    need a teacher, ``simcse`` trains without one. ``general`` (a text file) adds to the training examples as many
    of its sentences as the user's text gives examples (:func:`draw_general`), so that the model keeps general
    similarity while it learns the user's text; the budget's passes count them; a recipe that trains on general
    sentences reads cselab's default corpus when none is given (:func:`general_text`). ``mix`` (default: the
    recipe's, 1 but for ``vectors-and-head`` and ``vectors-general``) in (0, 1]: the model handed back is ``(1 - mix)
    * untouched + mix * selected`` of every weight (WiSE-FT, :func:`cselab.experiments.ensemble.mixed_weights`),
    saved in ``weight-mix`` beside ``best``; 1 hands back the selected model itself. ``adapt_teacher`` first adapts
    the teacher itself to the text with SimCSE (``adapted_teacher_steps`` steps, the same held-out part never trained
    on), in :data:`ADAPTED_TEACHER_DIR` inside ``output_dir``, and distils the model that keeps (``teacher_plan``).
    ``task`` (one of :data:`~cselab.vocabulary.ADAPT_TASKS`) says what the model is for: with the default recipe and
    a teacher, a task of :data:`TASKS_ADAPTING_THE_TEACHER` adapts the teacher first, as ``adapt_teacher`` does; the
    options given explicitly are never changed by it."""
    from cselab.config.run_config import apply_overrides

    if no_teacher and teacher is not None:
        raise CselabError("give --teacher or --no-teacher, not both")
    if steps is not None and steps < 1:
        raise CselabError(f"--steps must be at least 1, got {steps}")
    if batch_size is not None and batch_size < 2:
        raise CselabError(f"--batch-size must be at least 2 (in-batch negatives), got {batch_size}")
    if max_length is not None and max_length < 8:
        raise CselabError(f"--max-length must be at least 8 tokens, got {max_length}")
    if units is not None and units not in UNITS:
        raise CselabError(f"--units must be one of {', '.join(UNITS)}, got {units!r}")
    if passages is not None and passages not in PASSAGE_GROUPINGS:
        raise CselabError(f"--passages must be one of {', '.join(PASSAGE_GROUPINGS)}, got {passages!r}")
    if select is not None and select not in SELECTIONS:
        raise CselabError(f"--select must be one of {', '.join(SELECTIONS)}, got {select!r}")
    if mix is not None and not 0.0 < mix <= 1.0:
        raise CselabError(f"--mix must be above 0 and at most 1 (the adapted model's share), got {mix}")
    if task is not None and task not in ADAPT_TASKS:
        raise CselabError(f"--task must be one of {', '.join(ADAPT_TASKS)}, got {task!r}")
    if max_sentences is not None and max_sentences < MIN_SENTENCES:
        raise CselabError(f"--max-sentences must be at least {MIN_SENTENCES}, got {max_sentences}")
    for override in overrides:
        if override.split("=", 1)[0].strip() == "train.output_dir":
            raise CselabError("train.output_dir: cselab adapt trains in --output; give --output instead")
    _check_model(model, "--model")
    sentences = read_text(text, max_sentences)
    if len(set(sentences)) < MIN_SENTENCES:
        raise CselabError(f"{text}: {len(set(sentences))} distinct sentences; cselab adapt needs at least "
                          f"{MIN_SENTENCES} (one per line)")
    if recipe is not None and recipe not in RECIPES:
        raise CselabError(f"--recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    if recipe == "simcse" and teacher is not None:
        raise CselabError("--recipe simcse trains without a teacher: drop --teacher")
    teacher_name = _resolve_teacher(teacher, no_teacher or recipe == "simcse")
    fetch_teacher = f"give --teacher (or fetch {DEFAULT_TEACHER}: `cselab data fetch models-mpnet`)"
    if recipe in TEACHER_RECIPES and teacher_name is None:
        raise CselabError(f"--recipe {recipe} distils a teacher: " + ("drop --no-teacher" if no_teacher
                                                                       else fetch_teacher))
    if select not in (None, FIXED_BUDGET) and teacher_name is None:
        raise CselabError(f"--select {select} compares the model with a teacher: {fetch_teacher}")
    chosen = RECIPES[recipe or (DEFAULT_TEACHER_RECIPE if teacher_name is not None else DEFAULT_RECIPE)]
    output_dir = Path(output_dir)
    teacher_plan = None
    if task in TASKS_ADAPTING_THE_TEACHER and recipe is None and teacher_name is not None:
        adapt_teacher = True
    if adapt_teacher:
        if recipe == "simcse" or no_teacher:
            raise CselabError("--adapt-teacher distils the teacher it adapts: drop "
                              + ("--recipe simcse" if recipe == "simcse" else "--no-teacher"))
        if teacher_name is None:
            raise CselabError(f"--adapt-teacher adapts the teacher first: {fetch_teacher}")
        _check_model(teacher_name, "the teacher")
        runtime = [o for o in overrides if o.split("=", 1)[0].strip() in RUNTIME_OVERRIDES]
        teacher_plan = plan_adapt(text, output_dir / ADAPTED_TEACHER_DIR, model=teacher_name, no_teacher=True,
                                  steps=adapted_teacher_steps, seed=seed, max_sentences=max_sentences,
                                  overrides=runtime)
        teacher_name = str(teacher_plan.model_dir)
    if general is None and chosen.general:
        general = general_text(chosen)
    select = select or chosen.select
    units = units or chosen.units
    passages = passages or chosen.passages
    max_length = max_length or chosen.max_length
    batch_size = batch_size or chosen.batch_size
    train, held = split_held_out(sentences)
    examples = training_units(model, train, units, max_length, passages)
    general_units = draw_general(general, sentences, len(examples)) if general is not None else []
    own_examples, examples = len(examples), [*examples, *general_units]
    held_units = training_units(model, held, units, max_length, passages)
    guard_views = {}
    if select == GUARDED_DISTILLATION_LOSS:
        guard_views = {"lines": list(held),
                       "passages": training_units(model, held, "passages", GUARD_MAX_LENGTH, passages)}
    n_steps = steps if steps is not None else default_steps(len(examples), batch_size, chosen)
    raw: dict[str, Any] = {
        "protocol": "adapt-domain", "method": chosen.method,
        "model": {"backbone": model, "pooler": "mean", "max_length": max_length, "dropout": chosen.dropout},
        "data": {"corpus": str(output_dir / TRAIN_FILE)},
        "train": {"output_dir": str(output_dir), "seed": seed, "batch_size": batch_size, "max_steps": n_steps,
                  "scheduler": "linear", "precision": "auto", "lr": chosen.lr},
        "method_options": dict(chosen.method_options),
    }
    if teacher_name is not None:
        raw["method_options"].update(teacher=teacher_name, teacher_vectors=str(output_dir / TEACHER_DIR))
        # a line's nearest texts would be the passages that hold it: lines among lines; and the user's text among
        # itself, the general sentences among themselves
        blocks = [*([len(train)] if units == "mixed" else []), *([own_examples] if general_units else [])]
        if blocks:
            raw["method_options"]["neighbour_blocks"] = blocks
    if select == FIXED_BUDGET:  # one evaluation, at the last step, which is the result
        raw["train"].update(eval_every=n_steps, eval_at_start=False)
    else:  # step 0, the untouched model, is a candidate
        raw["train"].update(eval_every=evaluation_every(n_steps), eval_at_start=True)
    config = validate(RunConfig, apply_overrides(raw, list(overrides)))
    from cselab.methods import METHODS

    METHODS.get(config.method)  # an unknown method is refused here, before anything is written
    return AdaptPlan(str(text), model, teacher_name, output_dir, len(sentences), len(train), held, n_steps, select,
                     config, max_sentences, chosen.name, units, examples, held_units, guard_views, passages,
                     str(general) if general is not None else None, general_units,
                     chosen.mix if mix is None else float(mix), teacher_plan, task)


def general_text(recipe: Recipe) -> Path:
    """The general sentences a recipe that trains on them reads when ``--general`` is not given: cselab's default
    corpus (``cselab data fetch corpus``); refused in one line when it is not fetched."""
    from cselab.data.training_data import NAMED_CORPORA, corpus_path

    try:
        return corpus_path("default")
    except CselabError:
        raise CselabError(f"the {recipe.name} recipe trains on general sentences beside your text: fetch them with "
                          f"`{NAMED_CORPORA['default'][1]}`, give --general FILE, or choose another --recipe") from None


def draw_general(path: str | Path, own: Sequence[str], count: int, seed: int = UNITS_SEED) -> list[str]:
    """``count`` distinct sentences of the file ``path`` (all of them when it has fewer), drawn at random (seeded),
    none of them a sentence of the user's text ``own`` (so no held-out sentence is trained on through it)."""
    if not Path(path).is_file():
        raise CselabError(f"--general {path}: no such file (general sentences, one per line)")
    mine = set(own)
    pool = [s for s in read_text(path) if s not in mine]
    if not pool:
        raise CselabError(f"--general {path}: no sentence that is not also in the text to adapt to")
    random.Random(seed).shuffle(pool)
    return pool[:count]


def write_texts(plan: AdaptPlan) -> None:
    """The training examples and the held-out text inside the run directory (the run reads its text from there)."""
    write_atomic(plan.output_dir / TRAIN_FILE, "".join(f"{s}\n" for s in plan.train_units))
    write_atomic(plan.output_dir / HELD_OUT_FILE, "".join(f"{s}\n" for s in plan.held_out))
