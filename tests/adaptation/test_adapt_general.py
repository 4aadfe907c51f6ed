"""A recipe's general sentences (``general: true``, ``general_file: FILE``): general sentences trained on beside the
user's text (as many as the text gives training examples), never one of the user's sentences, their own part of the
teacher's pass and their own block of neighbours, and a refusal in one line for a file that cannot serve.

Expected values are computed here from the files the test writes (sets, counts), never read from the code's output.
"""

from __future__ import annotations

import json
import shutil

import pytest

from cselab.errors import CselabError
from tests.adaptation.test_adapt_distill import write_general, write_recipe, write_text
from tests.helpers import LAB_RECIPES, build_tiny_model_dir, recipe_with, run_cli


@pytest.fixture
def home_with_teacher(tmp_path, monkeypatch, tmp_path_factory):
    home = tmp_path / "home"
    teacher = build_tiny_model_dir(tmp_path_factory.mktemp("teacher"), "bert", seed=7, hidden_size=48)
    shutil.copytree(teacher, home / "models" / "all-mpnet-base-v2")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    return home


def test_draw_general_never_takes_the_users_sentences_and_is_seeded(tmp_path):
    from cselab.adaptation.examples import draw_general

    own = write_text(tmp_path / "text.txt").read_text().splitlines()
    general = write_general(tmp_path / "general.txt", 50, also=own[:10])
    drawn = draw_general(general, own, 30)
    assert len(drawn) == 30 and len(set(drawn)) == 30
    assert not set(drawn) & set(own)
    assert set(drawn) <= set(general.read_text().splitlines())
    assert drawn == draw_general(general, own, 30)  # seeded
    # fewer sentences than asked for: all of them (the 50 that are not the user's)
    assert sorted(draw_general(general, own, 500)) == sorted(general.read_text().splitlines()[:50])


@pytest.mark.parametrize("case, message", [
    ("missing", "general sentences {path}: no such file (general sentences, one per line)"),
    ("only-mine", "general sentences {path}: no sentence that is not also in the text to adapt to"),
    ("not-utf8", "general sentences {path}: 2 lines are not valid UTF-8; give a UTF-8 file, one sentence per line"),
    ("one-long-line", "general sentences {path}: a line of 10,001 characters; give one sentence per line (at most "
     "10,000 characters)"),
])
def test_a_general_file_that_cannot_serve_is_refused_in_one_line(case, message, tmp_path):
    from cselab.adaptation.examples import draw_general

    own = write_text(tmp_path / "text.txt").read_text().splitlines()
    path = tmp_path / "general.txt"
    fine = write_general(tmp_path / "fine.txt", 50).read_bytes()
    if case == "only-mine":
        path.write_text("\n".join(own[:20]) + "\n")
    elif case == "not-utf8":  # two lines of Latin-1 among good ones: a dropped line would change the training silently
        path.write_bytes(fine + "caf\xe9 cr\xe8me\n".encode("latin-1") + fine[:40] + b"\n\xff\xfe\n")
    elif case == "one-long-line":  # a file that is not one sentence per line (10,000 characters at most)
        path.write_bytes(fine + b"a" * 10_001 + b"\n")
    with pytest.raises(CselabError) as err:
        draw_general(path, own, 10)
    assert str(err.value) == message.format(path=path)
    # 10,000 characters is still a sentence
    path.write_bytes(fine + b"a" * 10_000 + b"\n")
    assert len(draw_general(path, own, 60)) == 51


def test_the_plan_adds_one_general_sentence_per_example_in_their_own_part_and_block(home_with_teacher,
                                                                                   long_bert_dir, tmp_path):
    from cselab.adaptation import plan_adapt

    text = write_text(tmp_path / "text.txt")
    general = write_general(tmp_path / "general.txt", 2000)
    distill = LAB_RECIPES / "distill.yaml"
    plain = plan_adapt(text, tmp_path / "a", model=str(long_bert_dir), recipe=distill)
    plan = plan_adapt(text, tmp_path / "b", model=str(long_bert_dir),
                      recipe=recipe_with(distill, general=True, general_file=str(general)))
    own = plain.train_units  # the cosines recipe: 220 lines, then their passages
    assert plan.text_units == own
    assert plan.train_units[len(own):] == plan.general_units and len(plan.general_units) == len(own)
    assert set(plan.general_units) <= set(general.read_text().splitlines())
    # the teacher's pass: the user's parts as without --general, the general sentences a part of their own
    assert plan.teacher_parts() == {**plain.teacher_parts(), "general": plan.general_units}
    # neighbours: lines among lines, passages among passages, general sentences among themselves
    assert plan.config.method_options["neighbour_blocks"] == [220, len(own)]
    # the budget's one pass counts the general sentences too: ceil(2 * len(own) / 16), within 100..450
    assert plan.steps == min(450, max(100, -(-2 * len(own) // 16)))
    facts, plain_facts = plan.facts(), plain.facts()
    assert "general_sha256" in facts and "general_sha256" not in plain_facts
    # the recipe recorded whole (so its hash) differs by the general sentences; nothing else but the steps does
    assert facts["recipe_sha256"] != plain_facts["recipe_sha256"]
    assert {k: v for k, v in facts.items() if k not in ("general_sha256", "steps", "recipe_sha256")} == {
        k: v for k, v in plain_facts.items() if k not in ("steps", "recipe_sha256")}
    assert f", and {len(own)} general sentences of {general}, 20 held out" in plan.describe()


def test_adapt_with_general_sentences_trains_on_them_and_records_them(home_with_teacher, tiny_bert_dir, long_bert_dir,
                                                                     tmp_path, capsys):
    from cselab.adaptation import plan_adapt
    from cselab.methods import METHODS

    text = write_text(tmp_path / "text.txt")
    general = write_general(tmp_path / "general.txt", 400)
    out = tmp_path / "adapted"
    recipe = write_recipe(tmp_path / "recipe.yaml", LAB_RECIPES / "vectors.yaml", general=True,
                          general_file=str(general), batch_size=8, overrides=("train.precision=fp32",))
    code, stdout, err = run_cli(["adapt", str(text), "--model", str(tiny_bert_dir), "--output", str(out),
                                 "--recipe", str(recipe), "--steps", "3"], capsys)
    assert code == 0, err
    examples = (out / "train.txt").read_text().splitlines()
    held = (out / "held-out.txt").read_text().splitlines()
    mine = set(text.read_text().splitlines())
    # the 220 training lines, then as many general sentences; the held-out part only the user's
    assert set(examples[:220]) == mine - set(held) and len(examples) == 440
    assert not set(examples[220:]) & mine and set(examples[220:]) <= set(general.read_text().splitlines())
    assert set(held) <= mine
    # the teacher's store holds every training and held-out text once; the general part's directory is gone
    kept = (out / "teacher" / "texts.txt").read_text().splitlines()
    assert sorted(kept) == sorted(set(examples) | set(held)) and not (out / "teacher-general").exists()
    summary = json.loads((out / "adapt.json").read_text())
    assert (summary["general"], summary["general_sentences"]) == (str(general), 220)
    assert "220 general sentences of" in stdout
    # passages: the count the plan names is the user's passages, the general sentences named apart
    passages = plan_adapt(text, tmp_path / "p", model=str(long_bert_dir), recipe=recipe_with(
        LAB_RECIPES / "vectors-passages.yaml", general=True, general_file=str(general)))
    assert f"in {len(passages.text_units)} passages, and {len(passages.general_units)} general" in passages.describe()
    # the method reads a target for every training example, general sentences included
    plan = plan_adapt(text, out, model=str(tiny_bert_dir), recipe=recipe, steps=3)
    method = METHODS.get("distill")(plan.config)
    assert len(method.training_examples()) == 440
