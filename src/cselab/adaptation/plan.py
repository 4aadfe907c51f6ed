"""What ``cselab adapt`` will do, decided before any model loads (:func:`plan_adapt`): the user's text read once and
split, the recipe (:mod:`.recipe`), the models checked, the training examples the budget trains on (:mod:`.examples`)
and the run configuration. It checks every input and writes nothing."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cselab.adaptation.examples import (
    draw_general,
    drawn_units,
    read_text,
    split_held_out,
    training_units,
)
from cselab.adaptation.recipe import Recipe, load_recipe, recipe_for
from cselab.adaptation.selection import FIXED_BUDGET, GUARD_MAX_LENGTH, GUARDED_DISTILLATION_LOSS
from cselab.config.run_config import RunConfig, apply_overrides, validate
from cselab.errors import CselabError
from cselab.fileio import write_atomic
from cselab.paths import MODEL_NAMES, resolve_model_path

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_TEACHER = "all-mpnet-base-v2"  # used when fetched (`cselab data fetch models-mpnet`) unless --no-teacher
MIN_SENTENCES = 200  # below this neither the held-out part nor the neighbours mean anything
TRAIN_FILE, HELD_OUT_FILE, ADAPT_FILE, REPORT_FILE, PLOT_FILE, PLAN_FILE = (
    "train.txt", "held-out.txt", "adapt.json", "adapt-report.md", "adapt-report.png", "adapt-plan.json")
# the model cselab adapt hands back, whatever the recipe; the rest of the run directory belongs to the run
MODEL_DIR = "model"
TEACHER_DIR = "teacher"  # the teacher's pass over the text, in the run directory
ADAPTED_TEACHER_DIR = "teacher-adapted"  # a recipe's adapt_teacher: the teacher's own adaptation, in the run directory
# the adapted teacher's exports for its pass (ONNX, OpenVINO), kept with the run that made the teacher
ADAPTED_TEACHER_EXPORTS_DIR = "teacher-exports"
# the overrides the teacher's own adaptation takes from the student's recipe: how it computes, not what it trains
RUNTIME_OVERRIDES = ("train.threads", "train.precision")
# tokenizer files of which a model directory holds at least one (a directory without any cannot tokenise)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")


def mixed_phrase(mix: float) -> str:
    """The clause that says the model handed back is mixed: one wording for the plan, the report and the summary."""
    return "" if mix >= 1.0 else f"; its weights mixed with the untouched model's, {mix:g} of them its own"


@dataclass
class AdaptPlan:
    """What ``cselab adapt`` will do, decided before any model loads."""

    text: str
    output_dir: Path
    recipe: Recipe
    model: str
    teacher: str | None  # the teacher's directory or fetched name (the adapted teacher's model with adapt_teacher)
    seed: int
    steps: int
    config: RunConfig = field(repr=False)
    sentences: int  # distinct sentences of the text used (the first max_sentences when given)
    text_sha256: str  # of those sentences, in order: a resume continues the same text
    text_train_sentences: int  # the text's sentences outside the held-out part
    train_sentences: int  # those the budget trains on (all of them, or a seeded draw)
    held_out: list[str] = field(repr=False)
    train_units: list[str] = field(repr=False)  # the training examples, as train.txt holds them
    held_out_units: list[str] = field(repr=False)  # the held-out text as the training examples are made
    # the guarded selection's views of the held-out text ({"lines": ..., "passages": ...}; empty for the others)
    guard_views: dict[str, list[str]] = field(default_factory=dict, repr=False)
    general: str | None = None  # the file of general sentences trained on beside the text
    general_units: list[str] = field(default_factory=list, repr=False)  # the last of train_units
    max_sentences: int | None = None
    task: str | None = None
    teacher_plan: AdaptPlan | None = field(default=None, repr=False)  # the teacher's own adaptation, first

    @property
    def model_dir(self) -> Path:
        """The model ``cselab adapt`` hands back: ``OUTPUT/model``."""
        return self.output_dir / MODEL_DIR

    @property
    def selection(self) -> str:
        return self.recipe.select

    @property
    def units(self) -> str:
        return self.recipe.units

    @property
    def passages(self) -> str:
        return self.recipe.passages

    @property
    def mix(self) -> float:
        return self.recipe.mix

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
        what = self.recipe.description
        recipe = f"{what}, {self.teacher} into {self.model}" if self.teacher else f"{what} on {self.model}"
        grouped = "" if self.passages == "shuffled" else f" of {self.passages} lines"
        units = {"lines": "", "passages": f" in {len(self.text_units)} passages{grouped}",
                 "mixed": f" as lines and in {len(self.text_units) - self.train_sentences} passages{grouped}"
                 }[self.units]
        if self.general_units:
            units += f", and {len(self.general_units)} general sentences of {self.general}"
        used = (f"{self.train_sentences} sentences to train on" if self.train_sentences == self.text_train_sentences
                else f"{self.train_sentences} of its {self.text_train_sentences} sentences to train on (what "
                "{steps} steps use; --steps trains on more)")
        task = f" for {self.task}" if self.task else ""
        return (f"{first}adapt{task} ({self.recipe.name}): {recipe}; {used.format(steps=self.steps)}{units}, "
                f"{len(self.held_out)} held out; {self.steps} steps of {self.config.train.batch_size}; selection: "
                f"{self.selection}{mixed_phrase(self.mix)}")

    def facts(self) -> dict[str, Any]:
        """What a run directory records of its plan (``adapt-plan.json``) so that ``--resume`` continues the same
        adaptation: the text's content, the options that choose it, and the recipe whole."""
        from cselab.data.stores.vector_store import content_key

        return {"text_sha256": self.text_sha256, "sentences": self.sentences, "max_sentences": self.max_sentences,
                "recipe": self.recipe.name, "teacher": self.teacher, "selection": self.selection,
                "steps": self.steps, "units": self.units, "max_length": self.config.model.max_length,
                **({} if self.passages == "shuffled" else {"passages": self.passages}),
                **({"general_sha256": content_key("adapt-general/1", self.general_units)}
                   if self.general_units else {}),
                **({"mix": self.mix} if self.mix < 1.0 else {}),
                "seed": self.seed, "recipe_sha256": content_key("adapt-recipe/1", [json.dumps(
                    self.recipe.model_dump(mode="json"), sort_keys=True)]),
                **({"adapted_teacher": self.teacher_plan.model, "adapted_teacher_steps": self.teacher_plan.steps}
                   if self.teacher_plan is not None else {})}


def default_steps(examples: int, recipe: Recipe) -> int:
    """The recipe's passes over the examples, at least its ``min`` and at most its ``max`` steps."""
    budget = recipe.steps
    steps = math.ceil(budget.passes * examples / recipe.batch_size)
    return int(min(budget.max_steps, max(budget.min_steps, steps)))


def evaluation_every(steps: int) -> int:
    """How often a run that selects by a held-out score evaluates it: eight times over the budget."""
    return max(1, steps // 8)


def budget_examples(recipe: Recipe, steps: int | None) -> int | None:
    """How many distinct training examples the budget can train on (``steps``, else the recipe's most, of its
    batch), ``None`` when the recipe takes every example the text gives (``examples: all``)."""
    if recipe.examples == "all":
        return None
    return (steps if steps is not None else recipe.steps.max_steps) * recipe.batch_size


def _model_dir(model: str, what: str) -> Path:
    path = Path(resolve_model_path(model))
    if not path.exists():
        fetch = next((t for t, name in MODEL_NAMES.items() if name == model), None)
        if fetch is not None:
            raise CselabError(f"{what} {model} is not fetched: run `cselab data fetch {fetch}`")
        raise CselabError(f"{what} not found: {model} (a model directory or a fetched model's name)")
    return path


def check_model(model: str, what: str, *, one_encoder: bool = True) -> str:
    """``model`` as a directory of one encoder (a fetched name, a sentence-transformers or HF directory, a saved
    cselab encoder) that can tokenise; anything else is refused in one line that says what to give instead.
    ``one_encoder=False`` (a teacher that is not adapted) also takes a twin or an ensemble, which encode as one."""
    from cselab.models.sentence_model import read_description

    path = _model_dir(model, what)
    if not path.is_dir():
        raise CselabError(f"{what} {model} is a file; give a model directory")
    if (path / "best").is_dir() and not (path / "config.json").exists() and not (path / "cselab.json").exists():
        raise CselabError(f"{what} {model} is a run directory; its model is {path / 'best'}")
    description = read_description(path)
    kind = description.get("kind") if description else None
    if one_encoder and kind is not None and kind != "encoder":
        raise CselabError(f"{what} {model} is a {kind}, not one encoder; adapt one encoder (e.g. a -D student, or "
                          "one member of the twin)")
    if description is None and not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        raise CselabError(f"{what} {model} holds no model (no config.json or modules.json)")
    holders = [path, *(p for p in path.iterdir() if p.is_dir())]  # a sentence-transformers module keeps its own
    if not any((d / name).is_file() for d in holders for name in TOKENIZER_FILES):
        raise CselabError(f"{what} {model} holds no tokenizer ({', '.join(TOKENIZER_FILES[:2])}, ...); give the "
                          "whole model directory")
    return model


# model types whose position embeddings start after the padding index (as the encoder counts its positions)
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer")


def check_length(model: str, max_length: int) -> None:
    """Refuse a recipe's ``max_length`` that ``model`` has no positions for, before anything runs (training would
    refuse it after the teacher's pass)."""
    try:
        config = json.loads((_model_dir(model, "--model") / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # a sentence-transformers module directory: the encoder checks when it loads
    positions, pad = config.get("max_position_embeddings"), config.get("pad_token_id")
    if not isinstance(positions, int):
        return
    if config.get("model_type") in OFFSET_POSITIONS and isinstance(pad, int):
        positions -= pad + 1
    if max_length > positions:
        raise CselabError(f"--model {model} takes at most {positions} tokens, the recipe's max_length is {max_length}: "
                          f"give a recipe with max_length at most {positions}")


def resolve_teacher(teacher: str | None, no_teacher: bool) -> str | None:
    """The teacher's directory or fetched name: ``teacher``, else :data:`DEFAULT_TEACHER` where it is fetched;
    ``None`` with ``--no-teacher`` or when no teacher is at hand (SimCSE then)."""
    if no_teacher and teacher is not None:
        raise CselabError("give --teacher or --no-teacher, not both")
    if no_teacher:
        return None
    if teacher is None:
        return DEFAULT_TEACHER if Path(resolve_model_path(DEFAULT_TEACHER)).is_dir() else None
    _model_dir(teacher, "the teacher")
    return teacher


def general_text(recipe: Recipe) -> Path:
    """The general sentences of a recipe that trains on them: its ``general_file``, else cselab's corpus, fetched
    here when it is not yet in the data home (as ``cselab data fetch corpus`` does: never a refusal for a piece cselab
    fetches itself); a fetch that fails is one line naming the command to run by hand."""
    from cselab.data.text.training_data import NAMED_CORPORA, corpus_path

    if recipe.general_file is not None:
        return Path(recipe.general_file)
    try:
        return corpus_path("default")
    except CselabError:
        pass
    from cselab.data.registry.fetch import fetch
    from cselab.reporter import report

    command = NAMED_CORPORA["default"][1]
    report().say(f"adapt: the {recipe.name} recipe trains on general sentences beside your text; fetching them "
                 f"(`{command}`)")
    try:
        fetch("corpus")
    except CselabError as exc:
        raise CselabError(f"the {recipe.name} recipe trains on general sentences, which could not be fetched "
                          f"({exc}); run `{command}` where the package registries are reachable") from None
    return corpus_path("default")


def plan_adapt(text: str | Path, output_dir: str | Path, *, recipe: str | Path | Recipe | None = None,
               model: str = DEFAULT_MODEL, teacher: str | None = None, no_teacher: bool = False,
               task: str | None = None, steps: int | None = None, seed: int = 1, max_sentences: int | None = None,
               device: str = "auto") -> AdaptPlan:
    """Validate the inputs and build the run configuration (nothing is written; the text is read here, once).

    ``recipe``: a :class:`~cselab.adaptation.recipe.Recipe`, a YAML file or a shipped recipe's name; by default
    :func:`~cselab.adaptation.recipe.recipe_for` the teacher (``teacher``, or all-mpnet-base-v2 when fetched, unless
    ``no_teacher``) and ``task``. ``steps`` (default: the recipe's budget) and ``seed`` set the training; only the
    first ``max_sentences`` distinct sentences of the text are used when given; ``device`` is where models compute."""
    from cselab.data.stores.vector_store import content_key
    from cselab.errors import check_int, check_optional_int
    from cselab.fileio import check_writable_dir
    from cselab.vocabulary import ADAPT_TASKS

    check_optional_int(steps, "--steps", minimum=1)
    check_int(seed, "--seed", minimum=0)
    check_optional_int(max_sentences, "--max-sentences", minimum=MIN_SENTENCES)
    output_dir = check_writable_dir(Path(output_dir), "--output")
    if task is not None and task not in ADAPT_TASKS:
        raise CselabError(f"--task must be one of {', '.join(ADAPT_TASKS)}, got {task!r}")
    teacher_name = resolve_teacher(teacher, no_teacher)
    chosen = load_recipe(recipe) if recipe is not None else recipe_for(teacher=teacher_name is not None, task=task)
    if chosen.needs_teacher and teacher_name is None:
        raise CselabError(f"the {chosen.name} recipe distils a teacher: " + (
            "drop --no-teacher" if no_teacher else
            f"give --teacher (or fetch {DEFAULT_TEACHER}: `cselab data fetch models-mpnet`)"))
    if not chosen.needs_teacher and teacher is not None:
        raise CselabError(f"the {chosen.name} recipe trains without a teacher: drop --teacher")
    if not chosen.needs_teacher:
        teacher_name = None
    check_model(model, "--model")
    check_length(model, chosen.max_length)
    if teacher_name is not None:
        # its pass truncates at the teacher's own length; a twin or an ensemble teaches (the papers' -D teachers),
        # only one encoder is adapted first
        check_model(teacher_name, "the teacher", one_encoder=chosen.adapt_teacher)
    general = general_text(chosen) if chosen.general else None  # refused before the text is read when missing
    sentences = read_text(text, max_sentences)
    if len(sentences) < MIN_SENTENCES:
        raise CselabError(f"{text}: {len(sentences)} distinct sentences; cselab adapt needs at least "
                          f"{MIN_SENTENCES} (one per line)")
    return _plan(text, Path(output_dir), sentences, chosen, model=model, teacher=teacher_name, task=task,
                 steps=steps, seed=seed, max_sentences=max_sentences, device=device, general=general,
                 text_sha256=content_key("adapt-text/1", sentences))


def _plan(text: str | Path, output_dir: Path, sentences: list[str], recipe: Recipe, *, model: str,
          teacher: str | None, task: str | None, steps: int | None, seed: int, max_sentences: int | None,
          device: str, general: Path | None, text_sha256: str) -> AdaptPlan:
    """The plan of ``recipe`` on the text's distinct ``sentences`` (checked already)."""
    teacher_plan = None
    if recipe.adapt_teacher:  # the teacher's own SimCSE adaptation, first, in the run directory
        simcse = recipe_for(teacher=False).model_copy(update={"overrides": tuple(
            o for o in recipe.overrides if o.split("=", 1)[0].strip() in RUNTIME_OVERRIDES)})
        teacher_plan = _plan(text, output_dir / ADAPTED_TEACHER_DIR, sentences, simcse, model=str(teacher),
                             teacher=None, task=None, steps=recipe.adapted_teacher_steps, seed=seed,
                             max_sentences=max_sentences, device=device, general=None, text_sha256=text_sha256)
        teacher = str(teacher_plan.model_dir)
    train, held = split_held_out(sentences)
    limit = budget_examples(recipe, steps)
    own_limit = None if limit is None else max(1, limit // 2 if general is not None else limit)
    used, examples = drawn_units(model, train, recipe.units, recipe.max_length, recipe.passages, own_limit)
    general_units = draw_general(general, sentences, len(examples)) if general is not None else []
    own_examples, examples = len(examples), [*examples, *general_units]
    held_units = training_units(model, held, recipe.units, recipe.max_length, recipe.passages)
    if len(held_units) < 2:  # every selection and the held-out loss compare examples with each other
        raise CselabError(f"the held-out text ({len(held)} sentences) makes {len(held_units)} example of up to "
                          f"{recipe.max_length} tokens; give a longer text or a recipe with a shorter max_length")
    guard_views = {}
    if recipe.select == GUARDED_DISTILLATION_LOSS:
        guard_views = {"lines": list(held),
                       "passages": training_units(model, held, "passages", GUARD_MAX_LENGTH, recipe.passages)}
    n_steps = steps if steps is not None else default_steps(len(examples), recipe)
    raw: dict[str, Any] = {
        "protocol": "adapt-domain", "method": recipe.method,
        "model": {"backbone": model, "pooler": "mean", "max_length": recipe.max_length, "dropout": recipe.dropout},
        "data": {"corpus": str(output_dir / TRAIN_FILE)},
        "train": {"output_dir": str(output_dir), "seed": seed, "batch_size": recipe.batch_size,
                  "max_steps": n_steps, "scheduler": "linear", "precision": "auto", "lr": recipe.lr},
        "method_options": dict(recipe.method_options),
    }
    if teacher is not None:
        raw["method_options"].update(teacher=teacher, teacher_vectors=str(output_dir / TEACHER_DIR))
        # a line's nearest texts would be the passages that hold it: lines among lines; and the user's text among
        # itself, the general sentences among themselves
        blocks = [*([len(used)] if recipe.units == "mixed" else []), *([own_examples] if general_units else [])]
        if blocks:
            raw["method_options"]["neighbour_blocks"] = blocks
    if recipe.select == FIXED_BUDGET:  # one evaluation, at the last step, which is the result
        raw["train"].update(eval_every=n_steps, eval_at_start=False)
    else:  # step 0, the untouched model, is a candidate
        raw["train"].update(eval_every=evaluation_every(n_steps), eval_at_start=True)
    config = validate(RunConfig, apply_overrides(raw, [*recipe.overrides, f"train.device={device}"]))
    from cselab.methods import METHODS

    METHODS.get(config.method).parse_options(config.method_options)  # checked before anything is written or run
    return AdaptPlan(text=str(text), output_dir=output_dir, recipe=recipe, model=model, teacher=teacher, seed=seed,
                     steps=n_steps, config=config, sentences=len(sentences), text_sha256=text_sha256,
                     text_train_sentences=len(train), train_sentences=len(used), held_out=held,
                     train_units=examples, held_out_units=held_units, guard_views=guard_views,
                     general=None if general is None else str(general), general_units=general_units,
                     max_sentences=max_sentences, task=task, teacher_plan=teacher_plan)


def write_texts(plan: AdaptPlan) -> None:
    """The training examples and the held-out text inside the run directory (the run reads its text from there)."""
    write_atomic(plan.output_dir / TRAIN_FILE, "".join(f"{s}\n" for s in plan.train_units))
    write_atomic(plan.output_dir / HELD_OUT_FILE, "".join(f"{s}\n" for s in plan.held_out))

