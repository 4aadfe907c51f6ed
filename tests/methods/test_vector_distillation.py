"""Distillation onto a wider teacher's vectors (``target: vectors`` with ``projection: pca-rotation | linear-head``,
``vector_loss: mse | cosine``), read from a teacher pass on disk.

Expected values come from numpy's SVD, scipy's orthogonal Procrustes and scikit-learn's ridge, never from
the method's helpers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cselab.errors import CselabError
from cselab.losses import distillation_cosine
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model, save_model
from tests.helpers import build_tiny_model_dir, tiny_distill_config, write_corpus


def _unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_distillation_cosine_hand_case_and_target_detached():
    # cos 1 (parallel, other length), cos 0, cos -1
    student = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]], requires_grad=True)
    target = torch.tensor([[1.0, 0.0], [3.0, 0.0], [-2.0, -2.0]], requires_grad=True)
    loss = distillation_cosine(student, target)
    assert loss.item() == pytest.approx((0 + 1 + 2) / 3, abs=1e-6)
    loss.backward()
    assert student.grad is not None and target.grad is None


def test_pca_rotation_matches_numpy_and_scipy():
    from scipy.linalg import orthogonal_procrustes

    from cselab.methods.distill import pca_rotation

    rng = np.random.default_rng(0)
    teacher = _unit(rng.normal(size=(60, 9)) @ rng.normal(size=(9, 9)) + 2.0)  # correlated, unit rows, not centred
    student = rng.normal(size=(60, 4)) + 3.0
    sample = list(range(0, 60, 2))
    got = pca_rotation(torch.from_numpy(teacher), sample, torch.from_numpy(student[sample])).numpy()
    _, _, vt = np.linalg.svd(teacher, full_matrices=False)
    reduced = teacher @ vt[:4].T  # the 4 leading right singular directions, uncentred
    rotation, singular_sum = orthogonal_procrustes(reduced[sample], student[sample])
    scale = singular_sum / (reduced[sample] ** 2).sum()
    np.testing.assert_allclose(got, scale * reduced @ rotation, atol=1e-8)
    # the fit is the closest any rotation and scale bring the sample: a random rotation does worse
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    assert ((got[sample] - student[sample]) ** 2).sum() < ((scale * reduced[sample] @ q - student[sample]) ** 2).sum()
    # with all the teacher's dimensions kept, the targets' cosines are the teacher's
    full = pca_rotation(torch.from_numpy(teacher[:, :4].copy()), sample, torch.from_numpy(student[sample])).numpy()
    np.testing.assert_allclose(_unit(full) @ _unit(full).T, _unit(teacher[:, :4]) @ _unit(teacher[:, :4]).T, atol=1e-8)


def test_fit_linear_map_is_scikit_learns_ridge():
    from sklearn.linear_model import Ridge

    from cselab.methods.distill import fit_linear_map

    rng = np.random.default_rng(1)
    source, target = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 3)), rng.normal(size=(40, 5))
    weight, bias = fit_linear_map(torch.from_numpy(source), torch.from_numpy(target), ridge=0.05)
    centred = source - source.mean(0)
    alpha = 0.05 * np.trace(centred.T @ centred) / 3
    reference = Ridge(alpha=alpha).fit(source, target)
    np.testing.assert_allclose(weight.numpy(), reference.coef_.T, atol=1e-8)
    np.testing.assert_allclose(bias.numpy(), reference.intercept_, atol=1e-8)


@pytest.fixture
def wide_setup(tmp_path):
    """A 48-d teacher (mean pooling), a 32-d student and 80 training sentences."""
    teacher = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-t", "bert", seed=2, hidden_size=48),
                                      pooler="mean", max_length=16)
    teacher_dir = save_model(teacher, tmp_path / "teacher")
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)
    corpus = write_corpus(tmp_path / "corpus.txt", n=80)
    return teacher_dir, student_dir, corpus


def _config(setup, out, *extra):
    teacher_dir, student_dir, corpus = setup
    return tiny_distill_config(teacher_dir, student_dir, corpus, out, "model.pooler=mean", "model.dropout=0.0",
                               "train.max_steps=30", "train.eval_every=30", *extra)


@pytest.mark.parametrize(("projection", "vector_loss", "term"), [
    ("pca-rotation", "mse", "distillation_mse"),
    ("pca-rotation", "cosine", "distillation_cosine"),
    ("linear-head", "mse", "distillation_mse"),
    ("linear-head", "cosine", "distillation_cosine"),
])
def test_a_wider_teachers_vectors_are_learnt(wide_setup, tmp_path, sts_home, projection, vector_loss, term):
    from cselab.training.trainer import Trainer

    config = _config(wide_setup, tmp_path / "run", f"method_options.projection={projection}",
                     f"method_options.vector_loss={vector_loss}")
    trainer = Trainer(config)
    assert trainer.method.weights == {term: 1.0}
    sentences = wide_setup[2].read_text().splitlines()
    teacher = _unit(load_model(wide_setup[0], device="cpu").encode(sentences).numpy())
    # the targets (pca-rotation) or the teacher's own unit vectors (linear-head), for every training sentence
    targets = trainer.method._targets.numpy()
    if projection == "linear-head":
        np.testing.assert_allclose(targets, teacher, atol=1e-5)
        assert tuple(trainer.method.head.weight.shape) == (48, 32)
    else:
        assert targets.shape == (80, 32)
    assert trainer.run().steps == 30
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r[term] for r in log if term in r]
    assert len(losses) == 30 and np.mean(losses[-5:]) < np.mean(losses[:5]), losses
    saved = load_model(tmp_path / "run" / "best", device="cpu")
    assert saved.hidden_size == 32  # the student alone: no head at inference
    assert json.loads((tmp_path / "run" / "best" / "cselab.json").read_text())["kind"] == "encoder"


def test_pca_rotation_keeps_step_zero_and_brings_the_student_to_its_targets(wide_setup, tmp_path, sts_home):
    """The targets, computed here with numpy and scipy from the untouched student's vectors of all 80 sentences
    (fewer than ``fit_sentences``: the fit sees every one), are what the run trains towards."""
    from scipy.linalg import orthogonal_procrustes

    from cselab.training.trainer import Trainer

    sentences = wide_setup[2].read_text().splitlines()
    teacher = _unit(load_model(wide_setup[0], device="cpu").encode(sentences).numpy())
    start = Encoder.from_pretrained(wide_setup[1], pooler="mean")
    before = start.encode(sentences).numpy().astype(np.float64)
    _, _, vt = np.linalg.svd(teacher, full_matrices=False)
    reduced = teacher @ vt[:32].T
    rotation, singular_sum = orthogonal_procrustes(reduced, before)
    targets = singular_sum / (reduced ** 2).sum() * reduced @ rotation

    def distance(vectors) -> float:  # mean cosine distance to the targets
        return float(1 - (_unit(vectors) * _unit(targets)).sum(1).mean())

    config = _config(wide_setup, tmp_path / "run", "method_options.projection=pca-rotation",
                     "method_options.vector_loss=cosine", "train.max_steps=60", "train.eval_every=60")
    trainer = Trainer(config)
    np.testing.assert_allclose(trainer.method._targets.numpy(), targets, rtol=1e-4, atol=1e-4)
    # the method adds no module: the model it trains and saves is the untouched student at step 0
    start_state = start.state_dict()
    assert all(torch.equal(v, start_state[k]) for k, v in trainer.method.student.state_dict().items())
    assert trainer.run().steps == 60
    after = load_model(tmp_path / "run" / "best", device="cpu").encode(sentences).numpy()
    assert distance(after) < 0.8 * distance(before), (distance(before), distance(after))


def test_projection_settings_that_contradict_are_refused_in_one_line(wide_setup, tmp_path, sts_home):
    from cselab.training.trainer import Trainer

    cases = [
        (["method_options.projection=pca-rotation", "method_options.target=similarities"], "leave projection at none"),
        (["method_options.vector_loss=cosine", "method_options.target=similarities"], "target vectors only"),
        (["method_options.projection=rotation"], "method_options.projection"),
        (["method_options.teacher_vectors=" + str(tmp_path / "nothing")], "holds no teacher pass"),
    ]
    for extra, message in cases:
        with pytest.raises(CselabError, match=message) as exc:
            Trainer(_config(wide_setup, tmp_path / "r", *extra))
        assert "\n" not in str(exc.value)
    # a teacher narrower than the student cannot be reduced to the student's width
    narrow = save_model(Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-n", "bert", seed=4, hidden_size=16),
                                                pooler="mean"), tmp_path / "narrow")
    with pytest.raises(CselabError, match="use projection linear-head"):
        Trainer(_config((narrow, wide_setup[1], wide_setup[2]), tmp_path / "n",
                        "method_options.projection=pca-rotation"))


def test_a_pass_given_by_path_is_read_by_text(wide_setup, tmp_path, sts_home):
    """``method_options.teacher_vectors``: a pass over MORE sentences (e.g. a held-out part too) is matched to the
    training sentences by their text."""
    from cselab.teacher.vectors import teacher_vectors
    from cselab.training.trainer import Trainer

    sentences = wide_setup[2].read_text().splitlines()
    extra = ["a held out sentence", "another one"]
    teacher_vectors(str(wide_setup[0]), extra + sentences[::-1], tmp_path / "pass", backends=["torch"],
                    requested_precision="fp32")
    config = _config(wide_setup, tmp_path / "run", "method_options.projection=linear-head",
                     f"method_options.teacher_vectors={tmp_path / 'pass'}")
    trainer = Trainer(config)
    expected = _unit(load_model(wide_setup[0], device="cpu").encode(sentences).numpy())
    np.testing.assert_allclose(trainer.method._teacher_unit.numpy(), expected, atol=1e-5)
    assert trainer.method.teacher is None  # no teacher model is loaded when its pass is on disk
    with pytest.raises(CselabError, match="no teacher vector of 1 training sentence"):
        write_corpus(tmp_path / "other.txt", n=1, seed=99)
        other = tmp_path / "corpus2.txt"
        other.write_text("\n".join(sentences + (tmp_path / "other.txt").read_text().splitlines()) + "\n")
        Trainer(tiny_distill_config(wide_setup[0], wide_setup[1], other, tmp_path / "r2", "model.pooler=mean",
                                    "method_options.projection=linear-head",
                                    f"method_options.teacher_vectors={tmp_path / 'pass'}"))


def test_similarities_and_vectors_computes_both_terms_on_one_batch(wide_setup, tmp_path, sts_home):
    """Target ``similarities_and_vectors``: on one batch, the similarity term against the teacher's own cosines and the
    vector term against the PCA-rotated targets, each equal to a numpy computation from the same vectors, weighed by
    ``loss_weights``; a run trains both and saves the student alone."""
    from cselab.methods.base import StepContext
    from cselab.training.trainer import Trainer

    config = _config(wide_setup, tmp_path / "run", "method_options.target=similarities_and_vectors",
                     "method_options.projection=pca-rotation", "method_options.vector_loss=cosine",
                     "method_options.neighbours=3", "train.batch_size=4",
                     "method_options.loss_weights={distillation_cosine: 0.5}")
    trainer = Trainer(config)
    method = trainer.method
    assert method.weights == {"similarity_distillation_mse": 1.0, "distillation_cosine": 0.5}
    sentences = wide_setup[2].read_text().splitlines()
    teacher = _unit(load_model(wide_setup[0], device="cpu").encode(sentences).numpy())
    examples = method.training_examples()
    batch = method.collate(examples[:4])  # 4 sentences with 3 neighbours each: 16 rows
    rows = [i for example in examples[:4] for i in example]
    method.eval()  # no dropout: the student's vectors below are the ones the terms read
    with torch.no_grad():
        terms = method.loss_terms(batch, StepContext(dist=trainer.dist, step=0, generator=torch.Generator()))
        student = method.student.encode([sentences[i] for i in rows]).numpy().astype(np.float64)
    s, t = _unit(student), teacher[rows]
    off = ~np.eye(len(rows), dtype=bool)
    expected_sim = np.mean(((s @ s.T) - (t @ t.T))[off] ** 2)
    targets = _unit(method._targets.numpy()[rows])
    expected_cos = np.mean(1 - (s * targets).sum(1))
    assert terms["similarity_distillation_mse"].item() == pytest.approx(expected_sim, rel=1e-3, abs=1e-6)
    assert terms["distillation_cosine"].item() == pytest.approx(expected_cos, rel=1e-3, abs=1e-6)
    assert method.weighted_loss(terms).item() == pytest.approx(expected_sim + 0.5 * expected_cos, rel=1e-3)
    method.train()
    assert trainer.run().steps == 30
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert sum("similarity_distillation_mse" in r and "distillation_cosine" in r for r in log) == 30
    assert load_model(tmp_path / "run" / "best", device="cpu").hidden_size == 32


def test_rotation_and_head_computes_both_vector_terms_on_one_batch(wide_setup, tmp_path, sts_home):
    """Projection ``pca-rotation+linear-head``: on one batch, the student's vector against the PCA rotated into its
    frame (numpy's SVD, scipy's Procrustes) and the head's output against the teacher's own unit vector (the head
    started at scikit-learn's ridge fit), each equal to a numpy computation, weighed by ``loss_weights``; a run trains
    both and saves the student alone."""
    from scipy.linalg import orthogonal_procrustes
    from sklearn.linear_model import Ridge

    from cselab.methods.base import StepContext
    from cselab.training.trainer import Trainer

    config = _config(wide_setup, tmp_path / "run", "method_options.projection=pca-rotation+linear-head",
                     "method_options.vector_loss=cosine", "method_options.loss_weights={head_distillation_cosine: 0.5}")
    trainer = Trainer(config)
    method = trainer.method
    assert method.weights == {"distillation_cosine": 1.0, "head_distillation_cosine": 0.5}
    sentences = wide_setup[2].read_text().splitlines()
    teacher = _unit(load_model(wide_setup[0], device="cpu").encode(sentences).numpy())
    start = Encoder.from_pretrained(wide_setup[1], pooler="mean").encode(sentences).numpy().astype(np.float64)
    _, _, vt = np.linalg.svd(teacher, full_matrices=False)
    reduced = teacher @ vt[:32].T
    rotation, singular_sum = orthogonal_procrustes(reduced, start)  # the fit sees all 80 (< fit_sentences)
    targets = singular_sum / (reduced ** 2).sum() * reduced @ rotation
    centred = start - start.mean(0)
    ridge = Ridge(alpha=1e-2 * np.trace(centred.T @ centred) / 32).fit(start, teacher)

    rows = list(range(16))
    batch = method.collate(rows)
    method.eval()
    with torch.no_grad():
        terms = method.loss_terms(batch, StepContext(dist=trainer.dist, step=0, generator=torch.Generator()))
    s = start[rows]
    expected_rotation = np.mean(1 - (_unit(s) * _unit(targets[rows])).sum(1))
    expected_head = np.mean(1 - (_unit(ridge.predict(s)) * teacher[rows]).sum(1))
    assert terms["distillation_cosine"].item() == pytest.approx(expected_rotation, rel=1e-3, abs=1e-6)
    assert terms["head_distillation_cosine"].item() == pytest.approx(expected_head, rel=1e-3, abs=1e-6)
    assert method.weighted_loss(terms).item() == pytest.approx(expected_rotation + 0.5 * expected_head, rel=1e-3)
    method.train()
    assert trainer.run().steps == 30
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for term in ("distillation_cosine", "head_distillation_cosine"):
        losses = [r[term] for r in log if term in r]
        assert len(losses) == 30 and np.mean(losses[-5:]) < np.mean(losses[:5]), (term, losses)
    assert load_model(tmp_path / "run" / "best", device="cpu").hidden_size == 32


def test_rotation_and_head_is_refused_beside_the_similarities_in_one_line(wide_setup, tmp_path, sts_home):
    from cselab.training.trainer import Trainer

    with pytest.raises(CselabError, match="use pca-rotation or linear-head") as exc:
        Trainer(_config(wide_setup, tmp_path / "r", "method_options.target=similarities_and_vectors",
                        "method_options.projection=pca-rotation+linear-head", "method_options.neighbours=3",
                        "train.batch_size=4"))
    assert "\n" not in str(exc.value)


def _info_nce_loop(a: np.ndarray, b: np.ndarray, temperature: float) -> float:
    """SimCSE's loss by hand: for each row i, -log of the softmax of cos(a_i, b_j) / tau at j = i."""
    a, b = _unit(a.astype(np.float64)), _unit(b.astype(np.float64))
    losses = []
    for i in range(len(a)):
        logits = [float(a[i] @ b[j]) / temperature for j in range(len(b))]
        top = max(logits)
        losses.append(-(logits[i] - top - np.log(sum(np.exp(x - top) for x in logits))))
    return float(np.mean(losses))


def test_contrastive_adds_simcses_term_between_two_dropout_views(wide_setup, tmp_path, sts_home):
    """``contrastive: true``: beside the rotation's and the head's terms, ``info_nce`` between two dropout views of the
    batch (each equal to a per-row loop over the views' cosines), weighed by ``loss_weights``; the distillation terms
    read the first view; dropout off makes both views the untouched student's vectors; a run logs and lowers it."""
    from cselab.methods.base import StepContext
    from cselab.training.trainer import Trainer

    config = _config(wide_setup, tmp_path / "run", "model.dropout=0.1", "method_options.contrastive=true",
                     "method_options.projection=pca-rotation+linear-head", "method_options.vector_loss=cosine",
                     "method_options.temperature=0.2", "method_options.loss_weights={info_nce: 0.5}")
    trainer = Trainer(config)
    method = trainer.method
    assert method.weights == {"distillation_cosine": 1.0, "head_distillation_cosine": 1.0, "info_nce": 0.5}
    sentences = wide_setup[2].read_text().splitlines()
    ctx = StepContext(dist=trainer.dist, step=0, generator=torch.Generator())
    batch = method.collate(list(range(16)))

    method.eval()  # no dropout: both views are the untouched student's vectors
    with torch.no_grad():
        terms = method.loss_terms(batch, ctx)
    start = Encoder.from_pretrained(wide_setup[1], pooler="mean").encode(sentences[:16]).numpy()
    assert terms["info_nce"].item() == pytest.approx(_info_nce_loop(start, start, 0.2), rel=1e-4)
    assert terms["distillation_cosine"].item() == pytest.approx(
        np.mean(1 - (_unit(start) * _unit(method._targets[:16].numpy())).sum(1)), rel=1e-3, abs=1e-6)

    method.train()  # dropout: two different views, the loss between them, the distillation on the first
    torch.manual_seed(0)
    with torch.no_grad():
        views = method.embed(batch)
        terms = method.loss_from_embeddings(views, ctx)
    first, second = views["view_1"].numpy(), views["view_2"].numpy()
    assert np.abs(first - second).max() > 1e-3
    assert np.array_equal(views["student"].numpy(), first)
    assert terms["info_nce"].item() == pytest.approx(_info_nce_loop(first, second, 0.2), rel=1e-4)
    assert terms["distillation_cosine"].item() == pytest.approx(
        np.mean(1 - (_unit(first) * _unit(method._targets[:16].numpy())).sum(1)), rel=1e-3, abs=1e-6)
    expected = terms["distillation_cosine"] + terms["head_distillation_cosine"] + 0.5 * terms["info_nce"]
    assert method.weighted_loss(terms).item() == pytest.approx(expected.item(), rel=1e-5)

    assert trainer.run().steps == 30
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["info_nce"] for r in log if "info_nce" in r]
    assert len(losses) == 30 and np.mean(losses[-5:]) < np.mean(losses[:5]), losses
    assert load_model(tmp_path / "run" / "best", device="cpu").hidden_size == 32


@pytest.mark.parametrize(("extra", "message"), [
    (("model.dropout=0.0",), "the student has no dropout"),
    (("model.dropout=0.1", "method_options.target=pairs", "method_options.neighbours=3",
      "method_options.projection=none"), "target pairs batches anchors with their partners"),
])
def test_contrastive_settings_that_contradict_are_refused_in_one_line(wide_setup, tmp_path, sts_home, extra, message):
    from cselab.training.trainer import Trainer

    with pytest.raises(CselabError, match=message) as exc:
        Trainer(_config(wide_setup, tmp_path / "r", "method_options.contrastive=true",
                        "method_options.projection=pca-rotation", *extra))
    assert "\n" not in str(exc.value)


def test_contrastive_is_refused_for_a_checkpoint_saved_without_dropout(wide_setup, tmp_path, sts_home):
    """``model.dropout`` unset keeps the checkpoint's dropout; a checkpoint saved with none gives two equal views."""
    from cselab.training.trainer import Trainer

    teacher_dir, student_dir, corpus = wide_setup
    config_path = student_dir / "config.json"
    hf_config = json.loads(config_path.read_text())
    hf_config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config_path.write_text(json.dumps(hf_config))
    with pytest.raises(CselabError, match="the student has no dropout") as exc:
        Trainer(_config(wide_setup, tmp_path / "r", "model.dropout=null", "method_options.contrastive=true",
                        "method_options.projection=pca-rotation"))
    assert "\n" not in str(exc.value)
    # the same checkpoint with dropout asked for is accepted
    Trainer(_config(wide_setup, tmp_path / "r2", "model.dropout=0.1", "method_options.contrastive=true",
                    "method_options.projection=pca-rotation"))


def _info_nce_loop_without(a: np.ndarray, b: np.ndarray, temperature: float, related: np.ndarray) -> float:
    """SimCSE's loss by hand with row j left out of row i's sum where ``related[i, j]`` (never i itself)."""
    a, b = _unit(a.astype(np.float64)), _unit(b.astype(np.float64))
    losses = []
    for i in range(len(a)):
        kept = [j for j in range(len(b)) if j == i or not related[i, j]]
        total = sum(np.exp(float(a[i] @ b[j]) / temperature) for j in kept)
        losses.append(-(float(a[i] @ b[i]) / temperature - np.log(total)))
    return float(np.mean(losses))


def test_related_cosine_leaves_the_teachers_related_sentences_out_of_the_negatives(wide_setup, tmp_path, sts_home):
    """``related_cosine: c``: each sentence's negatives lose the batch's sentences whose teacher cosine to it (the
    teacher's own encoding, computed here) is at least c; the term equals a per-row loop that drops them, and
    differs from the unmasked term when some pair is dropped."""
    from cselab.methods.base import StepContext
    from cselab.training.trainer import Trainer

    sentences = wide_setup[2].read_text().splitlines()
    teacher = _unit(load_model(wide_setup[0], device="cpu").encode(sentences[:16]).numpy().astype(np.float64))
    cosines = teacher @ teacher.T
    values = np.sort(cosines[np.triu_indices(16, 1)])
    k = int(0.8 * len(values))  # a fifth of the pairs related; the threshold half-way between two cosines
    threshold = float(values[k - 1] + values[k]) / 2
    assert values[k] - values[k - 1] > 1e-5  # far from both, so float32 rounding cannot move a pair across it
    related = (cosines >= threshold) & ~np.eye(16, dtype=bool)
    assert 0 < related.sum() < 16 * 15
    config = _config(wide_setup, tmp_path / "run", "model.dropout=0.1", "method_options.contrastive=true",
                     "method_options.projection=pca-rotation", "method_options.vector_loss=cosine",
                     f"method_options.related_cosine={threshold}")
    trainer = Trainer(config)
    method = trainer.method
    ctx = StepContext(dist=trainer.dist, step=0, generator=torch.Generator())
    batch = method.collate(list(range(16)))
    method.train()
    torch.manual_seed(0)
    with torch.no_grad():
        views = method.embed(batch)
        term = method.loss_from_embeddings(views, ctx)["info_nce"].item()
    first, second = views["view_1"].numpy(), views["view_2"].numpy()
    # related pairs are read from the teacher's own unit vectors, not from the rotated targets the distillation reads
    np.testing.assert_allclose(views["related_teacher"].numpy(), teacher, atol=1e-5)
    assert term == pytest.approx(_info_nce_loop_without(first, second, 0.05, related), rel=1e-4)
    assert term != pytest.approx(_info_nce_loop(first, second, 0.05), rel=1e-3)


def test_related_cosine_without_the_contrastive_term_is_refused_in_one_line(wide_setup, tmp_path, sts_home):
    from cselab.training.trainer import Trainer

    with pytest.raises(CselabError, match="it needs method_options.contrastive=true") as exc:
        Trainer(_config(wide_setup, tmp_path / "r", "method_options.projection=pca-rotation",
                        "method_options.related_cosine=0.5"))
    assert "\n" not in str(exc.value)


def test_two_runs_where_the_timing_flips_train_bit_identical_weights(wide_setup, tmp_path, sts_home, monkeypatch):
    """Issue 87: the teacher's pass runs the way kept for this machine and teacher, not the fastest of the moment,
    so a run repeated on a busy machine (the probe's timings flipped, the pass computed again) trains the same."""
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    import shutil

    from safetensors.numpy import load_file

    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass
    from cselab.training.trainer import Trainer

    monkeypatch.setattr(teacher_pass, "EXPORT_MIN_SENTENCES", 0)  # the 80 sentences try the exports too
    monkeypatch.setattr(teacher_pass, "_exports_available", lambda: ["onnx"])

    def run(name: str, fastest: str) -> dict:
        seconds = {"torch": 1.0, "onnx": 1.0, fastest: 0.1}
        monkeypatch.setattr(teacher_pass, "_timed",
                            lambda runner, probe: (seconds[runner.backend], runner.encode(probe)))
        shutil.rmtree(cselab_home() / "teacher-vectors", ignore_errors=True)  # the pass is computed again
        Trainer(_config(wide_setup, tmp_path / name, "method_options.projection=pca-rotation",
                        "train.precision=fp32", "train.max_steps=4", "train.eval_every=4")).run()
        return load_file(str(tmp_path / name / "best" / "model.safetensors"))

    first, second = run("first", "onnx"), run("second", "torch")
    assert first.keys() == second.keys()
    assert all(np.array_equal(first[k], second[k]) for k in first)
    # the test can fail: where no way is kept, the second timing runs torch, whose vectors differ in their last bits
    (cselab_home() / "teacher_backend.json").unlink()
    third = run("third", "torch")
    assert not all(np.array_equal(first[k], third[k]) for k in first)
