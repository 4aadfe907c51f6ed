"""The README and docs/adapt.md point at the model `cselab adapt` hands back, and say what the command does now: every
path under an adapt run's output that a command or snippet loads, evaluates, exports or encodes is `OUTPUT/model`;
docs/adapt.md's recipe example loads as a recipe; its options table lists exactly the options `cselab adapt --help`
lists."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile",
        ROOT / "examples" / "quickstart.py"]
RUN_FILES = {"model", "adapt-report.md", "adapt-report.png", "adapt.json"}  # what a user of an adapt run reads


def _adapt_outputs(text: str) -> set[str]:
    return set(re.findall(r"cselab adapt [^\n`]*?--output (\S+)", text)) | set(
        re.findall(r"cselab\.adapt\([^)]*?\"[^\"]+\", \"([^\"]+)\"", text))


def test_every_use_of_an_adapted_model_in_the_docs_is_the_model_the_command_hands_back():
    checked = 0
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for output in _adapt_outputs(text):
            for used in re.findall(re.escape(output) + r"/([\w.-]+)", text):
                assert used in RUN_FILES, f"{doc.name}: {output}/{used} is not what cselab adapt hands back"
                checked += used == "model"
    assert checked >= 8  # the README's eval, export, encode, mteb and sentence-transformers lines, docs/adapt.md's


def test_the_makefile_demo_prints_the_model_it_hands_back():
    text = (ROOT / "Makefile").read_text()
    assert "cli adapt" in text and "--output $(DEMO_DIR)" in text and "runs/demo-adapt/model" in text


def test_the_recipe_example_in_docs_adapt_is_a_recipe():
    from cselab.adaptation.recipe import read_recipe

    text = (ROOT / "docs" / "adapt.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    recipe = read_recipe(yaml.safe_load(block), "docs/adapt.md")
    assert (recipe.max_length, recipe.mix, recipe.general) == (128, 0.5, True)


def test_the_options_table_lists_the_commands_options(capsys):
    from tests.helpers import run_cli

    code, out, _ = run_cli(["adapt", "--help"], capsys)
    assert code == 0
    helped = set(re.findall(r"^\s+(--[\w-]+)", out, re.M)) - {"--help"}
    table = (ROOT / "docs" / "adapt.md").read_text().split("## Options", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(--[\w-]+)", table))
    assert helped == documented and len(helped) == 15
