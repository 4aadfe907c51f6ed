"""Bad recipes and inputs of `cselab adapt` are refused before any work, in one line, with exit status 2 (or a
CselabError in Python), and nothing of the user's changes: every file the command was given hashes the same after,
and the output directory is not made. A recipe setting what an option or a field sets is refused, not settled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.adaptation.test_adapt_distill import write_general, write_text
from tests.cli.test_robustness import snapshot
from tests.helpers import recipe_with, run_cli


def _recipe(path: Path, **changes) -> Path:
    raw = recipe_with("simcse").model_dump(mode="json", by_alias=True)
    raw.update(changes)
    path.write_text(yaml.safe_dump(raw))
    return path


RECIPE_CASES = {
    "batch of a billion": ({"batch_size": 1_000_000_000}, "batch_size: Input should be less than or equal to 4096"),
    "100000 tokens": ({"max_length": 100_000}, "max_length: Input should be less than or equal to 8192"),
    "steps beside --steps": ({"overrides": ["train.max_steps=5"]}, "train.max_steps is set by --steps"),
    "seed beside --seed": ({"overrides": ["train.seed=3"]}, "train.seed is set by --seed"),
    "batch size twice": ({"overrides": ["train.batch_size=8"]}, "train.batch_size is the recipe's batch_size"),
    "length twice": ({"overrides": ["model.max_length=32"]}, "model.max_length is the recipe's max_length"),
    "another corpus": ({"overrides": ["data.corpus=/x.txt"]}, "data.corpus is set by the text"),
    "another backbone": ({"overrides": ["model.backbone=bert-base-uncased"]}, "model.backbone is set by --model"),
    "a teacher by override": ({"overrides": ["method_options.teacher=/nonexistent"]},
                              "method_options.teacher is set by --teacher"),
    "a teacher in the options": ({"method": "distill", "method_options": {"teacher": "/nonexistent"}},
                                 "method_options.teacher is set by the command"),
    "the teacher's vectors": ({"overrides": ["method_options.teacher_vectors=/x"]},
                              "method_options.teacher_vectors is set by the run directory"),
    "no KEY=VALUE": ({"overrides": ["train.lr"]}, "'train.lr' is not KEY=VALUE"),
    "unknown field": ({"selection": "fixed-budget"}, "unknown key 'selection'"),
    "min above max": ({"steps": {"passes": 1, "min": 300, "max": 200}}, "steps: Value error, max (200) is below min "
                      "(300)"),
    "mix of 0": ({"mix": 0}, "mix: Input should be greater than 0"),
    "simcse kept by a teacher": ({"select": "teacher-agreement"}, "recipe.yaml: a simcse recipe trains without a "
                                 "teacher"),
    "an unknown method option": ({"method_options": {"temprature": 0.2}}, "method_options.temprature"),
}


@pytest.mark.parametrize("case", sorted(RECIPE_CASES))
def test_a_bad_recipe_is_refused_in_one_line_and_nothing_changes(case, tiny_bert_dir, tmp_path, capsys):
    changes, message = RECIPE_CASES[case]
    text = write_text(tmp_path / "text.txt")
    recipe = _recipe(tmp_path / "recipe.yaml", **changes)
    before = snapshot(tmp_path, tiny_bert_dir)
    code, out, err = run_cli(["adapt", str(text), "--output", str(tmp_path / "out"), "--model", str(tiny_bert_dir),
                              "--no-teacher", "--recipe", str(recipe)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert snapshot(tmp_path, tiny_bert_dir) == before and not (tmp_path / "out").exists()


def _general_cases(root: Path) -> dict[str, tuple[Path, str]]:
    mixed = write_general(root / "mixed.txt", 300)
    lines = mixed.read_bytes().splitlines()
    mixed.write_bytes(b"\n".join(line if i % 3 else line + b" \xff\xfe" for i, line in enumerate(lines)) + b"\n")
    latin = root / "latin.txt"
    latin.write_bytes("\n".join(f"Caf\u00e9 num\u00e9ro {i} cr\u00e8me" for i in range(300)).encode("latin-1"))
    long = root / "long.txt"
    long.write_text("word " * 1_000_000 + "\n")
    return {"invalid UTF-8 in a third of its lines": (mixed, "lines are not valid UTF-8"),
            "latin-1": (latin, "300 invalid UTF-8"),
            "one 5 MB line": (long, "a line of 4,999,999 characters; give one sentence per line")}


@pytest.mark.parametrize("case", ["invalid UTF-8 in a third of its lines", "latin-1", "one 5 MB line"])
def test_a_general_text_that_is_not_one_utf8_sentence_per_line_is_refused(case, home_with_teacher, tiny_bert_dir,
                                                                            tmp_path, capsys):
    general, message = _general_cases(tmp_path)[case]
    text = write_text(tmp_path / "text.txt")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(recipe_with(max_length=64, general_file=str(general)).model_dump(
        mode="json", by_alias=True)))
    before = snapshot(tmp_path)
    code, _, err = run_cli(["adapt", str(text), "--output", str(tmp_path / "out"), "--model", str(tiny_bert_dir),
                            "--recipe", str(recipe)], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_a_teacher_without_its_tokenizer_is_refused(teacher_dir, tiny_bert_dir, tmp_path, capsys):
    teacher = tmp_path / "teacher"
    shutil.copytree(teacher_dir, teacher)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (teacher / name).unlink(missing_ok=True)
    text = write_text(tmp_path / "text.txt")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(recipe_with(max_length=64).model_dump(mode="json", by_alias=True)))
    before = snapshot(tmp_path)
    code, _, err = run_cli(["adapt", str(text), "--output", str(tmp_path / "out"), "--model", str(tiny_bert_dir),
                            "--teacher", str(teacher), "--recipe", str(recipe)], capsys)
    assert code == 2 and err.count("\n") == 1 and "holds no tokenizer" in err, err
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_the_api_refuses_as_the_command_does_and_changes_nothing_it_is_given(tiny_bert_dir, tmp_path):
    import cselab

    text = write_text(tmp_path / "text.txt")
    recipe = _recipe(tmp_path / "recipe.yaml", overrides=["train.max_steps=5"])
    before = snapshot(tmp_path)
    cases = [
        ({"recipe": recipe, "no_teacher": True}, cselab.CselabError, "train.max_steps is set by --steps"),
        ({"steps": 0, "no_teacher": True}, cselab.UsageError, "steps: 0 is not in the range"),
        ({"steps": "5", "no_teacher": True}, cselab.UsageError, "steps"),
        ({"seed": -1, "no_teacher": True}, cselab.UsageError, "seed: -1 is not in the range"),
        ({"no_teacher": "yes"}, cselab.UsageError, "no_teacher"),
        ({"task": "ranking", "no_teacher": True}, cselab.CselabError, "--task must be one of"),
        ({"teacher": "x", "no_teacher": True}, cselab.CselabError, "give --teacher or --no-teacher, not both"),
        ({"labels": 5, "no_teacher": True}, cselab.UsageError, "labels"),
        ({"progress": "no", "no_teacher": True}, cselab.UsageError, "progress"),
        ({"max_sentences": 10, "no_teacher": True}, cselab.UsageError,
         "--max-sentences: 10 is not in the range x>=200"),
        ({"recipe": tmp_path / "none.yaml", "no_teacher": True}, cselab.CselabError, "no such file"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            cselab.adapt(text, tmp_path / "out", model=tiny_bert_dir, **{"progress": False, **options})
    with pytest.raises(cselab.UsageError, match="text"):
        cselab.adapt(None, tmp_path / "out", model=tiny_bert_dir)
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()
