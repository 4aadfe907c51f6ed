"""The plans of every domain-study configuration and of `cselab adapt`'s defaults on two fixture texts, as built by
the code: what ``lab/tests/test_recipes_as_data.py`` compares today's plans with, so that moving the study's arms out
of the command into recipe files changes no configuration a record was made with.

``python -m lab.tests.adapt_plan_snapshot OUT.json`` writes today's plans;
``lab/tests/fixtures/adapt_plans_before.json`` was written once, by the code before the move (commit dff62ec, the
study's arms then options of ``plan_adapt``). :func:`plan_summary` is what is compared: the effective configuration
(paths made relative to the fixture's root), the budget, the selection, the mix, and a hash of each text the plan made
(training examples, general sentences, held-out text and its views).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

WORDS = [f"word{i}" for i in range(60)]


def make_fixture(root: Path, lines: int) -> dict[str, Path]:
    """A tiny student, a data home with a tiny teacher as all-mpnet-base-v2, a text of ``lines`` lines and the
    study's general sentences (900 upper-case lines), under ``root``. The student takes 512 tokens, so that the
    recipes' 256 are planned (the snapshot's student took 128; a plan reads its tokenizer, never its positions)."""
    import shutil

    from tests.helpers import build_tiny_model_dir

    student = build_tiny_model_dir(root / "student", "bert", seed=0, positions=512)
    home = root / "home"
    if not (home / "models" / "all-mpnet-base-v2").is_dir():
        shutil.copytree(student, home / "models" / "all-mpnet-base-v2")
    rng = random.Random(0)
    text = root / "text.txt"
    text.write_text("".join(f"{' '.join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))} {i}\n"
                            for i in range(lines)))
    general = root / "general.txt"
    general.write_text("".join(f"{' '.join(rng.choice(WORDS).upper() for _ in range(6))} G{i}\n" for i in range(900)))
    return {"student": student, "home": home, "text": text, "general": general,
            "teacher": home / "models" / "all-mpnet-base-v2"}


def _digest(texts: Any) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def plan_summary(plan: Any, root: Path) -> dict[str, Any]:
    from cselab.config.run_config import flatten_config

    config = flatten_config(plan.config.model_dump(mode="json"))
    config = {k: (str(v).replace(str(root), "<root>") if isinstance(v, str) else v) for k, v in config.items()}
    inner = plan.teacher_plan
    return {"config": config, "steps": plan.steps, "selection": plan.selection, "units": plan.units,
            "passages": plan.passages, "mix": plan.mix, "teacher": str(plan.teacher).replace(str(root), "<root>"),
            "train_units": _digest(plan.train_units), "n_train_units": len(plan.train_units),
            "general_units": _digest(plan.general_units), "n_general_units": len(plan.general_units),
            "held_out": _digest(plan.held_out), "held_out_units": _digest(plan.held_out_units),
            "guard_views": {k: _digest(v) for k, v in sorted(plan.guard_views.items())},
            "teacher_plan": None if inner is None else plan_summary(inner, root)}


TEXTS = {"short": 240, "long": 3000}
DEFAULTS = {"default": {}, "no-teacher": {"no_teacher": True}, **{f"task-{t}": {"task": t} for t in
            ("similarity", "search", "clustering", "classification")}}


def current_plans(name: str, root: Path, fixture: dict[str, Path]) -> dict[str, Any]:
    """Today's plans of every configuration and of cselab adapt's defaults on one fixture text, as
    :func:`plan_summary` gives them (the defaults' general sentences the fixture's file, as the snapshot took them).
    ``CSELAB_HOME`` must be the fixture's home."""
    import argparse

    from cselab.adaptation import plan_adapt, recipe_for
    from lab.domain_study import run_domains
    from lab.domain_study.recipes import with_arms
    from lab.domain_study.study import CONFIGURATIONS

    plans: dict[str, Any] = {}
    args = argparse.Namespace(steps=None, batch_size=None, max_length=None)
    for spec in CONFIGURATIONS:
        if not spec.trains or spec.recipe:
            continue
        plan = run_domains.configuration_plan(
            spec, fixture["text"], root / "run", args, seed=1, model=str(fixture["student"]),
            teacher=str(fixture["teacher"]), general=fixture["general"] if spec.general else None,
            runtime=["train.threads=1", "train.device=cpu"])
        plans[f"{name}/{spec.key}"] = plan_summary(plan, root)
    for key, options in DEFAULTS.items():
        recipe = recipe_for(teacher=not options.get("no_teacher"), task=options.get("task"))
        if recipe.general:
            recipe = with_arms(recipe, general=fixture["general"], examples=recipe.examples)
        plan = plan_adapt(fixture["text"], root / "run", model=str(fixture["student"]), recipe=recipe, **options)
        plans[f"{name}/cselab-adapt-{key}"] = plan_summary(plan, root)
    return plans


def main(argv: list[str] | None = None) -> None:
    import os
    import tempfile

    out = Path((argv or sys.argv[1:])[0])
    snapshot: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in TEXTS.items():
            root = Path(tmp) / name
            fixture = make_fixture(root, lines)
            os.environ["CSELAB_HOME"] = str(fixture["home"])
            snapshot.update(current_plans(name, root, fixture))
    out.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print(f"{len(snapshot)} plans -> {out}")


if __name__ == "__main__":
    main()
