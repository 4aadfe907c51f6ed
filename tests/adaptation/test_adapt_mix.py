"""`cselab adapt --mix W`: the model handed back is the selected model's weights mixed with the untouched model's,
``(1 - W) * untouched + W * selected`` of every floating-point weight, saved beside the selected model; a kill
between training and the mix resumes to the same model; a bad W or a changed W on resume is refused in one line.

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
from tests.helpers import run_cli


def _adapt(text, model, out, capsys, *extra):
    return run_cli(["adapt", str(text), "--model", str(model), "--no-teacher", "--output", str(out), "--steps", "3",
                    "--batch-size", "8", "--max-length", "16", "train.precision=fp32", *extra], capsys)


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
    code, stdout, err = _adapt(text, tiny_bert_dir, out, capsys, "--mix", "0.25")
    assert code == 0, err
    _assert_mixed(tiny_bert_dir, out / "best", out / "weight-mix", 0.25)
    summary = json.loads((out / "adapt.json").read_text())
    assert summary["mix"] == 0.25
    assert f"model: {out / 'weight-mix'} " in stdout and "0.25 of them its own" in stdout
    description = json.loads((out / "weight-mix" / "cselab.json").read_text())
    assert description["adaptation"]["mix"] == 0.25 and description["weights_mixed"]["weight"] == 0.25
    assert "0.25 of them its own" in (out / "adapt-report.md").read_text()
    # without --mix (SimCSE's recipe hands back the selected model): no mix is made
    code, stdout, err = _adapt(text, tiny_bert_dir, tmp_path / "plain", capsys)
    assert code == 0, err
    assert not (tmp_path / "plain" / "weight-mix").exists() and f"model: {tmp_path / 'plain' / 'best'} " in stdout
    assert json.loads((tmp_path / "plain" / "adapt.json").read_text())["mix"] == 1.0


def test_a_kill_between_training_and_the_mix_resumes_to_the_same_model(tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    assert _adapt(text, tiny_bert_dir, out, capsys, "--mix", "0.5")[0] == 0
    first = load_model(out / "weight-mix", device="cpu").state_dict()
    # as a kill after training leaves it: the selected model saved, no mix, no summary
    shutil.rmtree(out / "weight-mix")
    (out / "adapt.json").unlink()
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--mix", "0.5", "--resume")
    assert code == 0, err
    again = load_model(out / "weight-mix", device="cpu").state_dict()
    assert all(torch.equal(first[name], again[name]) for name in first)
    _assert_mixed(tiny_bert_dir, out / "best", out / "weight-mix", 0.5)


def test_a_changed_mix_on_resume_is_refused(tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "adapted"
    assert _adapt(text, tiny_bert_dir, out, capsys, "--mix", "0.5")[0] == 0
    (out / "adapt.json").unlink()  # unfinished
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--mix", "0.7", "--resume")
    assert code == 2 and err.count("\n") == 1 and "mix: 0.5 -> 0.7" in err
    # dropped on resume: the run would hand back the unmixed model, which is another adaptation than it started
    code, _, err = _adapt(text, tiny_bert_dir, out, capsys, "--resume")
    assert code == 2 and err.count("\n") == 1 and "mix: 0.5 -> None" in err


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "half"])
def test_a_bad_mix_is_refused_in_one_line_before_any_work(value, tiny_bert_dir, tmp_path, capsys):
    text = write_text(tmp_path / "text.txt")
    code, _, err = _adapt(text, tiny_bert_dir, tmp_path / "o", capsys, "--mix", value)
    assert code == 2 and err.count("\n") == 1 and "--mix" in err
    assert not (tmp_path / "o").exists()


def test_the_plan_refuses_a_mix_outside_zero_to_one(tiny_bert_dir, tmp_path):
    text = write_text(tmp_path / "text.txt")
    for value in (0.0, 1.01):
        with pytest.raises(CselabError, match="--mix must be above 0 and at most 1"):
            plan_adapt(text, tmp_path / "o", model=str(tiny_bert_dir), no_teacher=True, mix=value)
    plan = plan_adapt(text, tmp_path / "o", model=str(tiny_bert_dir), no_teacher=True, mix=0.5)
    assert plan.model_dir == tmp_path / "o" / "weight-mix"
    # the plan says the mix in the words the report and the summary use, and only when there is one
    assert plan.describe().endswith("; its weights mixed with the untouched model's, 0.5 of them its own")
    unmixed = plan_adapt(text, tmp_path / "u", model=str(tiny_bert_dir), no_teacher=True)
    assert unmixed.model_dir == tmp_path / "u" / "best" and "mixed" not in unmixed.describe()


def test_only_a_mixed_model_is_said_to_be_mixed(tmp_path):
    """The printed summary names the mix only below 1 (an unmixed run hands back ``best`` as it was selected)."""
    from cselab.adaptation.run import AdaptResult, summary_of

    def printed(mix):
        return summary_of(AdaptResult(tmp_path / "m", 4, "held-out", {}, {}, 1.0, tmp_path / "r.md", mix))

    assert printed(1.0) == f"model: {tmp_path / 'm'} (selected at step 4; held-out)\nreport: {tmp_path / 'r.md'} (1 s)"
    assert "(selected at step 4; held-out; its weights mixed with the untouched model's, 0.5 of them its own)" in (
        printed(0.5))
