"""A recipe: how ``cselab adapt`` trains, as data. What the student learns (the method and its options), from which
text (lines or passages of the user's text, general sentences beside it), for how long (the budget), what is kept
(the selection) and what is handed back (the weight mix). One validated, frozen object, loaded from a YAML file
(``cselab adapt --recipe FILE``) or from the recipes cselab ships (:data:`SHIPPED`), which its defaults and
``--task`` choose (:func:`recipe_for`).

A recipe file holds the fields of :class:`Recipe` at its top level, e.g.::

    name: vectors-and-head
    description: the teacher's whole vector of passages of your lines and of as many general sentences
    method: distill
    method_options: {target: vectors, projection: pca-rotation+linear-head, vector_loss: cosine}
    lr: 1.0e-4
    steps: {passes: 1, min: 200, max: 200}
    units: passages
    max_length: 256
    general: true
    mix: 0.75

``overrides`` (``KEY=VALUE``, as ``cselab train`` takes them) set any other run-configuration key last; the keys
that the command's options or a field of the recipe set are refused there, so that two places never say two things.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cselab.errors import CselabError
from cselab.vocabulary import ADAPT_SELECTIONS, ADAPT_TASKS, ADAPT_UNITS, PASSAGE_GROUPINGS

RECIPES_DIR = Path(__file__).with_name("recipes")
DEFAULT_RECIPE, DEFAULT_TEACHER_RECIPE = "simcse", "vectors-and-head"  # without a teacher, with one
# with a teacher, the tasks for which the teacher is adapted to the text first: the domain study measured it ahead
# of the default on search and similarity and behind it on clustering and classification (docs/adapt.md)
TASK_RECIPES = {"similarity": "vectors-and-head-teacher-first", "search": "vectors-and-head-teacher-first"}
# the run-configuration keys that the command sets (from its options and the run directory): a recipe's overrides may
# not set them
COMMAND_KEYS = {"train.max_steps": "--steps", "train.seed": "--seed", "train.device": "--device",
                "train.output_dir": "--output", "data.corpus": "the text", "model.backbone": "--model",
                "method_options.teacher": "--teacher", "method_options.teacher_vectors": "the run directory",
                "method": "the recipe's method", "protocol": "cselab adapt", "model.pooler": "cselab adapt (mean)"}
# the run-configuration keys that a field of the recipe sets
FIELD_KEYS = {"train.batch_size": "batch_size", "model.max_length": "max_length", "train.lr": "lr",
              "model.dropout": "dropout"}
MAX_BATCH_SIZE = 4096  # training examples per step; more is a typo (a batch of 4096 passages of 256 tokens is ~1M)
MAX_LENGTH = 8192  # tokens of an example; the model's own limit is checked when the plan reads it
MAX_LR = 1.0  # a peak learning rate above it moves AdamW's every weight by up to 1 per step: a typo, not a recipe


class Budget(BaseModel):
    """Training steps when ``--steps`` is not given: ``passes`` over the training examples, at least ``min`` and at
    most ``max`` steps."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    passes: float = Field(1.0, gt=0, allow_inf_nan=False)
    min_steps: int = Field(100, ge=1, alias="min")
    max_steps: int = Field(450, ge=1, alias="max")

    @model_validator(mode="after")
    def _ordered(self) -> Budget:
        if self.max_steps < self.min_steps:
            raise ValueError(f"max ({self.max_steps}) is below min ({self.min_steps})")
        return self


class Recipe(BaseModel):
    """How ``cselab adapt`` trains (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    description: str = Field(min_length=1, description="what it trains, in one clause (the plan prints it)")
    method: Literal["simcse", "distill"] = Field(description="simcse (no teacher) or distill (a teacher's vectors)")
    method_options: dict[str, Any] = Field(default_factory=dict, description="the method's options")
    lr: float = Field(gt=0, le=MAX_LR, allow_inf_nan=False, description="peak learning rate")
    dropout: float = Field(0.1, ge=0.0, lt=1.0, description="the student's dropout while it trains")
    steps: Budget = Field(default_factory=Budget, description="the budget when --steps is not given")
    units: Literal[ADAPT_UNITS] = Field("lines", description="a training example: a line, a passage of lines, or "
                                        "both (mixed: every line once as itself and once in a passage)")
    passages: Literal[PASSAGE_GROUPINGS] = Field("shuffled", description="which lines a passage groups")
    max_length: int = Field(64, ge=8, le=MAX_LENGTH, description="tokens of a training example")
    batch_size: int = Field(64, ge=2, le=MAX_BATCH_SIZE, description="training examples per step")
    select: Literal[ADAPT_SELECTIONS] = Field("fixed-budget", description="which step is kept")
    general: bool = Field(False, description="train on as many general sentences as the text gives examples")
    general_file: str | None = Field(None, description="the general sentences (one per line); none: cselab's "
                                     "corpus (`cselab data fetch corpus`)")
    mix: float = Field(1.0, gt=0.0, le=1.0, description="the adapted model's share of the weights handed back, mixed "
                       "with the untouched model's")
    adapt_teacher: bool = Field(False, description="adapt the teacher to the text first (SimCSE), then distil it")
    adapted_teacher_steps: int = Field(100, ge=1, description="the teacher's SimCSE steps when adapt_teacher")
    examples: Literal["budget", "all"] = Field(
        "budget", description="budget: a seeded draw of the examples the steps train on, so the cost follows the "
        "budget, not the size of the text; all: every example the text gives")
    overrides: tuple[str, ...] = Field((), description="other run-configuration keys, KEY=VALUE, set last")

    @field_validator("overrides")
    @classmethod
    def _own_keys(cls, overrides: tuple[str, ...]) -> tuple[str, ...]:
        for override in overrides:
            key, eq, _ = override.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError(f"{override!r} is not KEY=VALUE")
            if key in COMMAND_KEYS:
                raise ValueError(f"{key} is set by {COMMAND_KEYS[key]}, not by a recipe")
            if key in FIELD_KEYS:
                raise ValueError(f"{key} is the recipe's {FIELD_KEYS[key]}: set that field instead")
            if key.startswith("method_options."):
                raise ValueError(f"{key}: set it in method_options")
        return overrides

    @field_validator("method_options")
    @classmethod
    def _not_the_commands(cls, options: dict[str, Any]) -> dict[str, Any]:
        owned = sorted(set(options) & {"teacher", "teacher_vectors", "neighbour_blocks"})
        if owned:
            raise ValueError(f"method_options.{owned[0]} is set by the command (--teacher, the run directory, the "
                             "text), not by a recipe")
        return options

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        if self.method == "simcse" and (self.adapt_teacher or self.select != "fixed-budget"):
            raise ValueError("a simcse recipe trains without a teacher: no adapt_teacher, select fixed-budget")
        if self.general_file is not None and not self.general:
            raise ValueError("general_file is read only with general: true")
        return self

    @property
    def needs_teacher(self) -> bool:
        return self.method == "distill"


def read_recipe(raw: dict[str, Any], where: str, base: Path | None = None) -> Recipe:
    """A recipe from its fields (``where`` names it in an error); a relative ``general_file`` is read from ``base``."""
    from pydantic import ValidationError

    from cselab.config.run_config import describe_error

    if base is not None and isinstance(raw.get("general_file"), str) and not Path(raw["general_file"]).is_absolute():
        raw = {**raw, "general_file": str(base / raw["general_file"])}
    try:
        return Recipe.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        if not error["loc"]:  # a check of the recipe as a whole: its own words, no field to name
            raise CselabError(f"recipe {where}: {str(error['msg']).removeprefix('Value error, ')}") from None
        raise CselabError(f"recipe {where}: {describe_error(Recipe, exc).removeprefix('config: ')}") from None


def load_recipe(recipe: str | Path | Recipe) -> Recipe:
    """A :class:`Recipe`: given, a shipped recipe's name (:data:`SHIPPED`), or a YAML file."""
    from cselab.config.run_config import read_yaml

    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe in shipped_recipes():
        path = RECIPES_DIR / f"{recipe}.yaml"
    else:
        path = Path(recipe)
        if not path.is_file():
            raise CselabError(f"--recipe {recipe}: no such file (a recipe YAML file, or one of "
                              f"{', '.join(shipped_recipes())})")
    try:
        raw = read_yaml(path)
        duplicate = _duplicate_key(path)
    except CselabError as exc:
        raise CselabError(f"--recipe {exc}") from None
    if duplicate is not None:
        raise CselabError(f"recipe {path}: {duplicate}")
    return read_recipe(raw, str(path), base=path.parent)


def _duplicate_key(path: Path) -> str | None:
    """A key given twice in one mapping of the YAML file (YAML keeps the last without a word), as a message naming
    it and its lines; None when every key is given once."""
    import yaml

    def check(node: yaml.Node) -> str | None:
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is not None and name in seen:
                    return (f"{name!r} is given twice (lines {seen[name]} and {key.start_mark.line + 1}); give each "
                            "key once")
                if name is not None:
                    seen[name] = key.start_mark.line + 1
                found = check(value)
                if found:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                found = check(item)
                if found:
                    return found
        return None

    return check(yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader))


def shipped_recipes() -> tuple[str, ...]:
    """The names of the recipes cselab ships."""
    return tuple(sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")))


def recipe_for(*, teacher: bool, task: str | None = None) -> Recipe:
    """The shipped recipe ``cselab adapt`` runs when none is given: SimCSE without a teacher; with one, the default
    (vectors-and-head), or for ``task`` the recipe measured best for it."""
    if task is not None and task not in ADAPT_TASKS:
        raise CselabError(f"--task must be one of {', '.join(ADAPT_TASKS)}, got {task!r}")
    if not teacher:
        return load_recipe(DEFAULT_RECIPE)
    return load_recipe(TASK_RECIPES.get(task or "", DEFAULT_TEACHER_RECIPE))
