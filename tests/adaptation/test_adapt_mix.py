"""A recipe's ``mix: W``: the model handed back (``OUTPUT/model``) is the selected model's weights mixed with the
untouched model's, ``(1 - W) * untouched + W * selected`` of every floating-point weight (the selected model itself,
``OUTPUT/best``, kept beside it; W = 1 hands back its weights unchanged); a kill between training and the mix resumes
to the same model; a bad W or a changed W on resume is refused in one line.

Expected weights are recomputed here, one tensor at a time, from the two models loaded from disk.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from cselab.adaptation import plan_adapt
from cselab.errors import CselabError
from cselab.models.sentence_model import load_model
from tests.adaptation.test_adapt import write_text
from tests.adaptation.test_adapt_distill import write_recipe
from tests.helpers import recipe_with, run_cli


def _recipe(path, mix=None):
    """SimCSE's recipe on a tiny batch and length, in fp32, with ``mix`` when given: a user's recipe file."""
    return write_recipe(path, "simcse", batch_size=8, max_length=16, overrides=("train.precision=fp32",),
                        **({} if mix is None else {"mix": mix}))


def _adapt(text, model, out, capsys, *extra, mix=None):
    recipe = _recipe(out.parent / f"{out.name}-recipe.yaml", mix)
    return run_cli(["adapt", str(text), "--model", str(model), "--no-teacher", "--output", str(out), "--steps", "3",
                    "--recipe", str(recipe), *extra], capsys)


def _assert_mixed(start, selected, mixed, weight):
    ours, theirs, got = (load_model(p, device="cpu").state_dict() for p in (start, selected, mixed))
    assert got.keys() == theirs.keys()
    moved = 0
    for name, value in got.items():
        if not value.is_floating_point():
            assert torch.equal(value, theirs[name])
            continue
        expected = (1 - weight) * ours[name] + weight * theirs[name]
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-6)
        moved += int(not torch.equal(ours[name], theirs[name]))
    assert moved > 0  # training changed weights, so the mix is not the start or the selected model


def test_mix_hands_back_the_weights_mixed_with_the_untouched_model(tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    code, stdout, err = _adapt(text, tiny_bert_dir, out, capsys, mix=0.25)
    assert code == 0, err
    _assert_mixed(tiny_bert_dir, out / "best", out / "model", 0.25)
    summary = json.loads((out / "adapt.json").read_text())
    assert summary["mix"] == 0.25 and summary["model_dir"] == str(out / "model")
    assert f"model: {out / 'model'} " in stdout and "0.25 of them its own" in stdout
    description = json.loads((out / "model" / "cselab.json").read_text())
    assert description["adaptation"]["mix"] == 0.25 and description["weights_mixed"]["weight"] == 0.25
    assert "0.25 of them its own" in (out / "adapt-report.md").read_text()
    # without a mix (SimCSE's recipe hands back the selected model): OUTPUT/model holds the selected weights as they
    # are, and nothing says it is mixed
    plain = tmp_path / "plain"
    code, stdout, err = _adapt(text, tiny_bert_dir, plain, capsys)
    assert code == 0, err
    handed, selected = (load_model(plain / name, device="cpu").state_dict() for name in ("model", "best"))
    assert handed.keys() == selected.keys() and all(torch.equal(handed[k], selected[k]) for k in handed)
    assert f"model: {plain / 'model'} " in stdout and "mixed" not in stdout
    assert json.loads((plain / "adapt.json").read_text())["mix"] == 1.0


def test_a_kill_between_training_and_the_mix_resumes_to_the_same_model(tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    assert _adapt(text, tiny_bert_dir, out, capsys, mix=0.5)[0] == 0
    first = load_model(out / "model", device="cpu").state_dict()
    # as a kill after training leaves it: the selected model saved, no mix, no summary
    shutil.rmtree(out / "model")
    (out / "adapt.json").unlink()
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--resume", mix=0.5)
    assert code == 0, err
    again = load_model(out / "model", device="cpu").state_dict()
    assert all(torch.equal(first[name], again[name]) for name in first)
    _assert_mixed(tiny_bert_dir, out / "best", out / "model", 0.5)


def test_a_changed_mix_on_resume_is_refused(tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    assert _adapt(text, tiny_bert_dir, out, capsys, mix=0.5)[0] == 0
    (out / "adapt.json").unlink()  # unfinished
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--resume", mix=0.7)
    assert code == 2 and err.count("\n") == 1 and "mix: 0.5 -> 0.7" in err, err
    # dropped on resume: the run would hand back the unmixed model, which is another adaptation than it started
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--resume")
    assert code == 2 and err.count("\n") == 1 and "mix: 0.5 -> None" in err, err


@pytest.mark.parametrize("value", [0, 1.5, -0.2, "half"])
def test_a_bad_mix_is_refused_in_one_line_before_any_work(value, tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    code, _, err = _adapt(text, tiny_bert_dir, tmp_path / "o", capsys, mix=value)
    assert code == 2 and err.count("\n") == 1 and ": mix: Input should be" in err, err
    assert not (tmp_path / "o").exists()


def test_the_plan_refuses_a_mix_outside_zero_to_one(tiny_bert_dir, tmp_path):
    text = write_text(tmp_path / "text.txt")
    for value, bound in ((0.0, "greater than 0"), (1.01, "less than or equal to 1")):
        with pytest.raises(CselabError, match=f"^recipe .*: mix: Input should be {bound}$"):
            plan_adapt(text, tmp_path / "o", model=str(tiny_bert_dir), no_teacher=True,
                       recipe=_recipe(tmp_path / "bad.yaml", value))
    plan = plan_adapt(text, tmp_path / "o", model=str(tiny_bert_dir), no_teacher=True,
                      recipe=recipe_with("simcse", mix=0.5))
    assert plan.model_dir == tmp_path / "o" / "model"
    # the plan says the mix in the words the report and the summary use, and only when there is one
    assert plan.describe().endswith("; its weights mixed with the untouched model's, 0.5 of them its own")
    unmixed = plan_adapt(text, tmp_path / "u", model=str(tiny_bert_dir), no_teacher=True)
    assert unmixed.model_dir == tmp_path / "u" / "model" and "mixed" not in unmixed.describe()


def test_only_a_mixed_model_is_said_to_be_mixed(tmp_path):
    """The printed summary names the mix only below 1 (an unmixed run hands back the selected weights as they
    are)."""
    from cselab.adaptation.run import AdaptResult, summary_of

    def printed(mix):
        return summary_of(AdaptResult(tmp_path / "m", 4, "held-out", {}, {}, 1.0, tmp_path / "r.md", mix))

    assert printed(1.0) == f"model: {tmp_path / 'm'} (selected at step 4; held-out)\nreport: {tmp_path / 'r.md'} (1 s)"
    assert "(selected at step 4; held-out; its weights mixed with the untouched model's, 0.5 of them its own)" in (
        printed(0.5))
