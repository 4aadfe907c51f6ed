"""Distillation onto chosen pairs (``method_options.target: pairs``): each sentence with one of its nearest neighbours
by the teacher and with random sentences, the student's cosine regressing onto the teacher's.

Expected values come from numpy over the teacher's own ``encode`` (cosines, nearest neighbours by a full sort) and
from a per-pair loop, never from the method's helpers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cselab.errors import CselabError
from cselab.losses import pair_similarity_mse
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model, save_model
from tests.helpers import build_tiny_model_dir, tiny_distill_config, write_corpus


def _unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# -- the loss term ----------------------------------------------------------------------------------------------
def test_pair_similarity_mse_matches_a_per_pair_loop_and_detaches_the_target():
    torch.manual_seed(0)
    first = torch.randn(5, 7, requires_grad=True)
    second = torch.randn(5, 7)
    target = torch.rand(5, requires_grad=True)
    loss = pair_similarity_mse(first, second, target)
    a, b, t = first.detach().double().numpy(), second.double().numpy(), target.detach().double().numpy()
    expected = 0.0
    for i in range(5):
        cos = a[i] @ b[i] / (np.linalg.norm(a[i]) * np.linalg.norm(b[i]))
        expected += (cos - t[i]) ** 2
    assert loss.item() == pytest.approx(expected / 5, rel=1e-5)
    assert loss.dtype == torch.float32
    loss.backward()
    assert first.grad is not None and target.grad is None


def test_pair_similarity_mse_hand_case():
    # cos((1,0),(1,0)) = 1 against 0.5; cos((1,0),(0,1)) = 0 against 0; cos((1,1),(1,0)) = 1/sqrt2 against 1/sqrt2
    first = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    second = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 0.0]])
    target = torch.tensor([0.5, 0.0, 2 ** -0.5])
    assert pair_similarity_mse(first, second, target).item() == pytest.approx(0.25 / 3, abs=1e-7)


def test_pair_similarity_mse_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="same shape|shape"):
        pair_similarity_mse(torch.zeros(3, 4), torch.zeros(2, 4), torch.zeros(3))
    with pytest.raises(ValueError, match="vector of 3 cosines"):
        pair_similarity_mse(torch.ones(3, 4), torch.ones(3, 4), torch.zeros(3, 1))


# -- the method ---------------------------------------------------------------------------------------------------
@pytest.fixture
def pair_setup(tmp_path, sts_home):
    """A 48-d tiny BERT teacher (mean pooling), a 32-d student directory and a 40-sentence corpus."""
    teacher = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-t", "bert", seed=2, hidden_size=48),
                                      pooler="mean", max_length=16)
    teacher_dir = save_model(teacher, tmp_path / "teacher")
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    return teacher_dir, student_dir, corpus


def _pairs_config(setup, out, *extra):
    teacher_dir, student_dir, corpus = setup
    return tiny_distill_config(teacher_dir, student_dir, corpus, out, "method_options.target=pairs",
                               "method_options.neighbours=3", "model.pooler=mean", "model.dropout=0.0",
                               "train.batch_size=8", *extra)


def test_pairs_are_drawn_from_the_teachers_nearest_neighbours_and_carry_its_cosines(pair_setup, tmp_path):
    from cselab.training.trainer import Trainer

    trainer = Trainer(_pairs_config(pair_setup, tmp_path / "p", "method_options.random_pairs=2"))
    method = trainer.method
    assert method.weights == {"pair_similarity_mse": 1.0}
    sentences = pair_setup[2].read_text().splitlines()
    assert len(trainer.examples) == len(sentences) and list(trainer.examples[:3]) == [0, 1, 2]
    teacher = load_model(pair_setup[0], device="cpu")
    unit = _unit(teacher.encode(sentences).numpy())
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    anchors = [5, 0, 17, 33, 8, 21, 2, 39]
    batch = method.collate(anchors)
    texts, targets = batch["texts"], batch["pair_targets"].numpy()
    # layout: the 8 anchors, their 8 neighbours, then 2 rounds of 8 random sentences
    assert len(texts) == 8 * 4 and batch["input_ids"].shape[0] == 32 and targets.shape == (8 * 3,)
    assert texts[:8] == [sentences[i] for i in anchors]
    for j, anchor in enumerate(anchors):
        partner = sentences.index(texts[8 + j])
        third_nearest = np.sort(cos[anchor])[::-1][2]
        assert partner != anchor and cos[anchor, partner] >= third_nearest - 1e-6  # among the 3 nearest
        for r in range(3):  # the neighbour pair and both random pairs carry the teacher's cosine
            other = sentences.index(texts[8 + 8 * r + j])
            assert targets[8 * r + j] == pytest.approx(unit[anchor] @ unit[other], abs=1e-5)
    # the same anchors draw the same partners (a resumed run sees the same batches); other anchors others
    assert method.collate(anchors)["texts"] == texts
    drawn = {tuple(method.collate([i, (i + 1) % 40])["texts"][2:]) for i in range(40)}
    assert len(drawn) > 30  # partners vary with the batch


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_teachers_pass_over_the_text_runs_in_the_runs_precision(pair_setup, tmp_path, precision):
    """fp32 gives the teacher's own fp32 vectors; bf16 (what `auto` picks on a CPU with fast bf16) vectors that
    differ from them by bf16's rounding (4e-5 on this tiny teacher, 1e-3 on all-MiniLM-L6-v2) and no more."""
    from cselab.training.trainer import Trainer

    trainer = Trainer(_pairs_config(pair_setup, tmp_path / precision, f"train.precision={precision}"))
    sentences = pair_setup[2].read_text().splitlines()
    expected = _unit(load_model(pair_setup[0], device="cpu").encode(sentences).numpy())
    got = trainer.method._teacher_unit.numpy()
    assert got.dtype == np.float32
    gap = np.abs(got - expected).max()
    assert (gap < 1e-6 if precision == "fp32" else 1e-5 < gap < 3e-2), gap


def test_pair_distillation_brings_the_students_pair_cosines_to_the_teachers(pair_setup, tmp_path):
    from cselab.training.trainer import Trainer

    trainer = Trainer(_pairs_config(pair_setup, tmp_path / "run", "train.max_steps=40", "train.eval_every=40"))
    sentences = pair_setup[2].read_text().splitlines()
    teacher = load_model(pair_setup[0], device="cpu")
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, len(sentences), size=(60, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]

    def pair_error(model) -> float:
        x = _unit(model.encode(sentences).numpy())
        t = _unit(teacher.encode(sentences).numpy())
        return float(np.mean([((x[i] @ x[j]) - (t[i] @ t[j])) ** 2 for i, j in pairs]))

    before = pair_error(Encoder.from_pretrained(pair_setup[1], pooler="mean"))
    assert trainer.run().steps == 40
    after = pair_error(load_model(tmp_path / "run" / "best", device="cpu"))  # the only evaluation: step 40
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["pair_similarity_mse"] for r in log if "pair_similarity_mse" in r]
    assert len(losses) == 40 and np.mean(losses[-8:]) < 0.6 * np.mean(losses[:8]), losses
    assert after < 0.6 * before, (before, after)


def test_pair_distillation_refuses_bad_settings_in_one_line(pair_setup, tmp_path):
    from cselab.training.trainer import Trainer

    with pytest.raises(CselabError, match="set method_options.neighbours") as exc:
        Trainer(_pairs_config(pair_setup, tmp_path / "a", "method_options.neighbours=0"))
    assert "\n" not in str(exc.value)
    with pytest.raises(CselabError, match="no gradient caching"):
        Trainer(_pairs_config(pair_setup, tmp_path / "b", "train.chunk_size=4"))
    with pytest.raises(CselabError, match="below the number of training sentences"):
        Trainer(_pairs_config(pair_setup, tmp_path / "c", "method_options.neighbours=40"))
    with pytest.raises(CselabError, match="use one of them"):
        Trainer(_pairs_config(pair_setup, tmp_path / "d", "train.length_group_window=2"))
    with pytest.raises(CselabError, match="random_pairs"):
        Trainer(_pairs_config(pair_setup, tmp_path / "e", "method_options.random_pairs=-1"))


def test_a_resumed_pair_distillation_ends_with_the_weights_of_an_uninterrupted_one(pair_setup, tmp_path):
    """8 steps straight == 4 steps, then --resume to 8 (the partners of each batch are drawn again identically)."""
    from safetensors.torch import load_file

    from cselab.training.trainer import Trainer

    Trainer(_pairs_config(pair_setup, tmp_path / "a", "train.max_steps=8", "train.save_every=4")).run()
    Trainer(_pairs_config(pair_setup, tmp_path / "b", "train.max_steps=4", "train.save_every=4")).run()
    Trainer(_pairs_config(pair_setup, tmp_path / "b", "train.max_steps=8", "train.save_every=4")).run(
        resume=True, allow_change=("train.max_steps",))
    wa = load_file(tmp_path / "a" / "last" / "method.safetensors")
    wb = load_file(tmp_path / "b" / "last" / "method.safetensors")
    assert wa.keys() == wb.keys() and len(wa) > 0
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    # and the student did move away from where it started
    fresh = Encoder.from_pretrained(pair_setup[1], pooler="mean").state_dict()
    moved = [k for k in wb if k.startswith("student.") and k.removeprefix("student.") in fresh
             and not torch.equal(wb[k], fresh[k.removeprefix("student.")])]
    assert moved


def test_cselab_distill_keeps_the_configs_corpus_unless_told_otherwise(pair_setup, tmp_path, capsys):
    """`cselab distill` without --corpus trains on the config's data.corpus (an override of it wins; --corpus wins
    over both), and a pairs config runs through the command."""
    import yaml

    from tests.helpers import run_cli

    teacher_dir, student_dir, corpus = pair_setup
    other = write_corpus(tmp_path / "other.txt", n=40, seed=5)
    config = tmp_path / "pairs.yaml"
    config.write_text(yaml.safe_dump({
        "method": "distill", "model": {"backbone": "unused", "pooler": "mean", "max_length": 16, "dropout": 0.0},
        "data": {"corpus": str(corpus)},
        "train": {"batch_size": 8, "max_steps": 2, "eval_every": 2, "eval_at_start": False, "device": "cpu"},
        "method_options": {"teacher": "unused", "target": "pairs", "neighbours": 3}}))
    base = ["distill", str(teacher_dir), "--student", str(student_dir), "--config", str(config)]
    for extra, expected in [([], corpus), ([f"data.corpus={other}"], other), (["--corpus", str(other)], other)]:
        out = tmp_path / f"d{len(list(tmp_path.glob('d*')))}"
        code, _, err = run_cli([*base, "--output-dir", str(out), *extra], capsys)
        assert code == 0, err
        ran = yaml.safe_load((out / "config.yaml").read_text())
        assert ran["data"]["corpus"] == str(expected), extra
        assert ran["method_options"]["target"] == "pairs" and ran["method_options"]["teacher"] == str(teacher_dir)
        assert ran["model"]["backbone"] == str(student_dir)
