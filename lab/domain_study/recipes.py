"""The study's configurations as `cselab adapt` recipes: each configuration of :mod:`lab.domain_study.study` names a
recipe file (``lab/recipes/*.yaml``, or one cselab ships) and the arms it changes (selection, units, passages, length,
mix, general sentences, run-configuration keys); :func:`configuration_recipe` makes the one
:class:`cselab.adaptation.Recipe` that says all of it, and the study runs it through ``cselab.adaptation.plan_adapt`` /
``run_adapt``, the entry points ``cselab adapt --recipe FILE`` and ``cselab.adapt()`` call.

Every configuration plans what it planned when its records were made: ``lab/tests/test_recipes_as_data.py`` compares
each plan with the snapshot the code before recipes became data made (``lab/tests/fixtures/adapt_plans_before.json``).
The study's runs trained on every example the text gave (``examples: all``), so the recipes made here keep that.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"
NO_TEACHER_RECIPE = "simcse"


def study_recipe(name: str) -> Any:
    """A recipe by name: the study's (``lab/recipes/NAME.yaml``) or one cselab ships."""
    from cselab.adaptation.recipe import load_recipe, shipped_recipes

    return load_recipe(name if name in shipped_recipes() else RECIPES_DIR / f"{name}.yaml")


def with_arms(base: Any, *, overrides: Sequence[str] = (), batch_size: int | None = None,
              max_length: int | None = None, general: Path | None = None, examples: str = "all",
              **fields: Any) -> Any:
    """``base`` with the study's arms: ``fields`` (select, units, passages, mix; ``None`` keeps the recipe's),
    ``batch_size`` and ``max_length`` (run_domains' --batch-size and --max-length), the general sentences of the file
    ``general``, and ``KEY=VALUE`` ``overrides`` as the study spelled them: ``method_options.*`` go into the method's
    options; ``train.batch_size``, ``model.max_length``, ``train.lr`` and ``model.dropout`` into the recipe's fields
    (a batch size given so keeps the budget's steps: the passes are scaled with it, as the override did when the step
    count was made from the recipe's batch); the rest stay overrides."""
    from cselab.adaptation.recipe import FIELD_KEYS, Recipe
    from cselab.config.run_config import apply_overrides, parse_override

    raw = base.model_dump(mode="json", by_alias=True)
    raw.update({k: v for k, v in fields.items() if v is not None})
    if batch_size is not None:
        raw["batch_size"] = batch_size
    if max_length is not None:
        raw["max_length"] = max_length
    method, rest = [], []
    for override in overrides:
        key = override.split("=", 1)[0].strip()
        if key.startswith("method_options."):
            method.append(override)
        elif key in FIELD_KEYS:
            _, value = parse_override(override)
            if key == "train.batch_size":
                raw["steps"] = {**raw["steps"], "passes": raw["steps"]["passes"] * value / raw["batch_size"]}
            raw[FIELD_KEYS[key]] = value
        else:
            rest.append(override)
    raw["method_options"] = apply_overrides({"method_options": dict(raw["method_options"])}, method)["method_options"]
    if general is not None:
        raw.update(general=True, general_file=str(general))
    raw.update(examples=examples, overrides=tuple(rest))
    return Recipe.model_validate(raw)


def configuration_recipe(spec: Any, *, batch_size: int | None = None, max_length: int | None = None,
                         general: Path | None = None, runtime: Sequence[str] = ()) -> Any:
    """The recipe of the configuration ``spec`` (:class:`lab.domain_study.study.Configuration`): its recipe file
    with its arms, ``runtime`` overrides last (threads, precision)."""
    base = study_recipe(spec.adapt_recipe if spec.teacher else NO_TEACHER_RECIPE)
    return with_arms(base, overrides=[*spec.overrides, *runtime], batch_size=batch_size,
                     max_length=max_length or spec.max_length, general=general, select=spec.select, units=spec.units,
                     passages=spec.passages, mix=spec.mix)


def split_runtime(runtime: Sequence[str]) -> tuple[list[str], str]:
    """(the runtime overrides a recipe holds, the device): ``train.device`` is the command's ``--device``."""
    device = "auto"
    kept = []
    for override in runtime:
        key, _, value = override.partition("=")
        if key.strip() == "train.device":
            device = value.strip()
        else:
            kept.append(override)
    return kept, device
