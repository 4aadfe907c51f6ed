"""The score-level ("concat") ensemble of members of different sizes, and distillation onto in-batch similarities.

Expected values are computed here from each member's own ``encode`` with numpy (cosines, their weighted mean,
scipy's Spearman over the dev CSV), never with the ensemble's own helpers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from cselab.errors import CselabError
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import EnsembleModel, load_model, save_model
from cselab.research.experiments.ensemble import choose_weight, ensemble, ensemble_chosen_on_dev
from tests.helpers import (
    build_tiny_model_dir,
    row_cosines,
    run_cli,
    tiny_distill_config,
    write_corpus,
)

PAIRS = [("a man plays the guitar .", "a woman plays the piano"),
         ("the dog runs on the road", "two cats sit in the old house"),
         ("a", "the big red ball")]
FIRST, SECOND = [p[0] for p in PAIRS], [p[1] for p in PAIRS]


def _member_cosines(a, b):
    cos_a = row_cosines(a.encode(FIRST).numpy(), a.encode(SECOND).numpy())
    cos_b = row_cosines(b.encode(FIRST).numpy(), b.encode(SECOND).numpy())
    return cos_a, cos_b


# -- the combination ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("w", [0.0, 0.3, 0.75, 1.0])
def test_concat_cosine_is_the_weighted_mean_of_the_members_cosines(members, w):
    a, b, _, _ = members
    ens = EnsembleModel([a, b], [w, 1 - w], combine="concat")
    cos_a, cos_b = _member_cosines(a, b)
    out_first, out_second = ens.encode(FIRST), ens.encode(SECOND)
    assert out_first.shape == (len(FIRST), 80) and ens.hidden_size == 80
    np.testing.assert_allclose(row_cosines(out_first.numpy(), out_second.numpy()), w * cos_a + (1 - w) * cos_b,
                               atol=1e-5)
    # the output's squared norm is the sum of the weights (unit members scaled by sqrt(w))
    np.testing.assert_allclose(np.linalg.norm(out_first.numpy(), axis=-1) ** 2, 1.0, atol=1e-5)
    # the token-level path (what sentence-transformers runs) gives the same vectors
    with torch.inference_mode():
        token_level = ens.eval()(ens.tokenize(FIRST))  # eval: no dropout, as sentence-transformers runs it
    torch.testing.assert_close(token_level, out_first, atol=1e-5, rtol=1e-5)


def test_concat_weights_need_not_sum_to_one_and_must_not_be_negative(members):
    a, b, _, _ = members
    cos_a, cos_b = _member_cosines(a, b)
    ens = EnsembleModel([a, b], [1.0, 3.0], combine="concat")
    np.testing.assert_allclose(row_cosines(ens.encode(FIRST).numpy(), ens.encode(SECOND).numpy()),
                               (1.0 * cos_a + 3.0 * cos_b) / 4.0, atol=1e-5)
    for weights in ([-0.1, 1.1], [0.0, 0.0]):
        with pytest.raises(CselabError, match="weights >= 0 with a positive sum"):
            EnsembleModel([a, b], weights, combine="concat")
    with pytest.raises(CselabError, match="unknown ensemble combine 'mean'"):
        EnsembleModel([a, b], [0.5, 0.5], combine="mean")


def test_sum_of_different_sizes_is_refused_and_points_to_concat(members, tmp_path):
    a, b, path_a, path_b = members
    with pytest.raises(CselabError, match=r'different embedding sizes: \[32, 48\].*combine "concat".*--combine concat'):
        EnsembleModel([a, b], [0.5, 0.5])
    with pytest.raises(CselabError, match="--combine concat"):
        ensemble(path_a, path_b, tmp_path / "sum", weight=0.5)
    assert not (tmp_path / "sum").exists()


def test_sum_is_unchanged_for_members_of_one_size(tmp_path):
    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "a", "bert", seed=1))
    c = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "c", "bert", seed=4), pooler="mean")
    ens = EnsembleModel([a, c], [0.3, 0.7])
    assert ens.combine == "sum" and ens.hidden_size == 32
    expected = 0.3 * a.encode(FIRST).numpy() + 0.7 * c.encode(FIRST).numpy()
    np.testing.assert_allclose(ens.encode(FIRST).numpy(), expected, atol=1e-6)


# -- saving and loading ---------------------------------------------------------------------------------------
def test_saved_concat_ensemble_keeps_combine_and_embeddings(members, tmp_path):
    a, b, _, _ = members
    ens = EnsembleModel([a, b], [0.4, 0.6], combine="concat")
    path = save_model(ens, tmp_path / "ens")
    description = json.loads((path / "cselab.json").read_text())
    assert description["combine"] == "concat" and description["weights"] == [0.4, 0.6]
    assert "concatenation" in (path / "README.md").read_text()
    loaded = load_model(path, device="cpu")
    assert isinstance(loaded, EnsembleModel) and loaded.combine == "concat" and loaded.hidden_size == 80
    torch.testing.assert_close(loaded.encode(FIRST), ens.encode(FIRST), atol=1e-5, rtol=1e-5)


def test_a_description_without_combine_loads_as_sum(tmp_path):
    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "a", "bert", seed=1))
    c = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "c", "bert", seed=4))
    path = save_model(EnsembleModel([a, c], [0.3, 0.7]), tmp_path / "old")
    description = json.loads((path / "cselab.json").read_text())
    assert description.pop("combine") == "sum"
    (path / "cselab.json").write_text(json.dumps(description))  # as written before combine existed
    loaded = load_model(path, device="cpu")
    assert loaded.combine == "sum"
    expected = 0.3 * a.encode(FIRST).numpy() + 0.7 * c.encode(FIRST).numpy()
    np.testing.assert_allclose(loaded.encode(FIRST).numpy(), expected, atol=1e-5)


@pytest.mark.parametrize(("combine", "weights", "message"), [
    ("mean", [0.5, 0.5], "unknown ensemble combine 'mean'; known: sum, concat"),
    (3, [0.5, 0.5], "unknown ensemble combine 3"),
    ("concat", [-1.0, 2.0], "weights >= 0"),
])
def test_a_bad_combine_is_refused_on_load_in_one_line(members, tmp_path, combine, weights, message):
    a, b, _, _ = members
    path = save_model(EnsembleModel([a, b], [0.5, 0.5], combine="concat"), tmp_path / "ens")
    description = json.loads((path / "cselab.json").read_text())
    (path / "cselab.json").write_text(json.dumps({**description, "combine": combine, "weights": weights}))
    with pytest.raises(CselabError) as exc:
        load_model(path)
    text = str(exc.value)
    assert message in text and str(path / "cselab.json") in text and "\n" not in text


def test_sentence_transformers_loads_a_concat_ensemble_as_cselab_encodes(members, tmp_path):
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (extra 'bench')")
    a, b, _, _ = members
    path = save_model(EnsembleModel([a, b], [0.3, 0.7], combine="concat"), tmp_path / "ens")
    own = load_model(path, device="cpu").encode(FIRST)
    model = st.SentenceTransformer(str(path), trust_remote_code=True, device="cpu")
    theirs = torch.as_tensor(model.encode(FIRST, convert_to_numpy=True, batch_size=2))
    assert theirs.shape == (len(FIRST), 80) and (theirs - own).abs().max() <= 1e-5
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension  # ST 6 / 5
    assert dimension() == 80
    # and the cosines are the weighted mean of the members' (independently of cselab's loader)
    cos_a, cos_b = _member_cosines(a, b)
    second = torch.as_tensor(model.encode(SECOND, convert_to_numpy=True))
    np.testing.assert_allclose(row_cosines(theirs.numpy(), second.numpy()), 0.3 * cos_a + 0.7 * cos_b, atol=1e-5)


# -- the weight chosen on dev, the CLI ---------------------------------------------------
def test_dev_score_of_a_concat_ensemble_matches_a_direct_computation(members, dev_home, tmp_path):
    a, b, path_a, path_b = members
    first, second, gold = [r[5] for r in dev_home], [r[6] for r in dev_home], [float(r[4]) for r in dev_home]
    cos_a = row_cosines(a.encode(first).numpy(), a.encode(second).numpy())
    cos_b = row_cosines(b.encode(first).numpy(), b.encode(second).numpy())

    def direct(w):
        return 100 * stats.spearmanr((1 - w) * cos_a + w * cos_b, gold).statistic

    grid = [0.0, 0.4, 1.0]
    choice = choose_weight(load_model(path_a), load_model(path_b), grid, combine="concat")
    for w in grid:
        assert choice.dev_by_weight[w] == pytest.approx(direct(w), abs=1e-6)
    saved, again = ensemble_chosen_on_dev(path_a, path_b, tmp_path / "uc", grid, combine="concat")
    description = json.loads((saved / "cselab.json").read_text())
    assert again.weight == choice.weight and description["combine"] == "concat"
    assert description["weights"] == [1 - choice.weight, choice.weight]
    with pytest.raises(CselabError, match="--combine concat"):  # a sum is refused before any dev encoding
        choose_weight(load_model(path_a), load_model(path_b), grid)


def test_cli_ensemble_combine_concat_saves_a_loadable_model(members, tmp_path, capsys):
    a, b, path_a, path_b = members
    code, out, err = run_cli(["ensemble", str(path_a), str(path_b), "--output", str(tmp_path / "e"),
                              "--weight", "0.6", "--combine", "concat", "--device", "cpu"], capsys)
    assert code == 0, err
    model = load_model(tmp_path / "e", device="cpu")
    assert model.combine == "concat" and model.weights == pytest.approx([0.4, 0.6])
    cos_a, cos_b = _member_cosines(a, b)
    np.testing.assert_allclose(row_cosines(model.encode(FIRST).numpy(), model.encode(SECOND).numpy()),
                               0.4 * cos_a + 0.6 * cos_b, atol=1e-5)
    # the default is the papers' sum, which refuses these members in one line that names the way out
    code, _, err = run_cli(["ensemble", str(path_a), str(path_b), "--output", str(tmp_path / "s")], capsys)
    assert code == 2 and "--combine concat" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()
    code, _, err = run_cli(["ensemble", str(path_a), str(path_b), "--output", str(tmp_path / "x"),
                            "--combine", "mean"], capsys)
    assert code == 2 and "'mean' is not one of 'sum', 'concat'" in err


# -- distillation onto similarities ---------------------------------------------------------------------------------
def _similarity_mse(student, teacher, texts) -> float:
    """The off-diagonal MSE of the two models' cosine-similarity matrices over ``texts``, with numpy."""
    def matrix(model):
        x = model.encode(texts).numpy().astype(np.float64)
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        return x @ x.T

    off = ~np.eye(len(texts), dtype=bool)
    return float(((matrix(student) - matrix(teacher))[off] ** 2).mean())


def _similarity_kl(student, teacher, texts, tau=0.1) -> float:
    """The mean over sentences of KL(teacher || student) of their softmax over the other sentences' cosines / tau,
    with numpy."""
    def log_softmax_over_others(model):
        x = model.encode(texts).numpy().astype(np.float64)
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        logits = (x @ x.T)[~np.eye(len(texts), dtype=bool)].reshape(len(texts), -1) / tau
        logits -= logits.max(axis=-1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))

    log_p, log_q = log_softmax_over_others(teacher), log_softmax_over_others(student)
    return float((np.exp(log_p) * (log_p - log_q)).sum(axis=-1).mean())


@pytest.mark.parametrize(("target", "term", "measure"), [
    ("similarities", "similarity_distillation_mse", _similarity_mse),
    ("similarity_distributions", "similarity_distillation_kl", _similarity_kl),
])
def test_distilling_similarities_from_a_wider_teacher(members, tmp_path, sts_home, target, term, measure):
    from cselab.training.trainer import Trainer

    _, b, _, _ = members
    # (mean pooling: the [CLS] vectors of tiny random BERTs are all but parallel, nothing to distil)
    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "hf-a", "bert", seed=1), pooler="mean", max_length=16)
    teacher_path = save_model(EnsembleModel([a, b], [0.5, 0.5], combine="concat"), tmp_path / "teacher")  # 80-d
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)  # 32-d
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    texts = corpus.read_text().splitlines()[:32]
    teacher = load_model(teacher_path, device="cpu")
    before = measure(Encoder.from_pretrained(student_dir, pooler="mean"), teacher, texts)

    config = tiny_distill_config(teacher_path, student_dir, corpus, tmp_path / "distilled",
                                 f"method_options.target={target}", "method_options.temperature=0.1",
                                 "model.pooler=mean", "model.dropout=0.0")
    trainer = Trainer(config)
    assert trainer.method.weights == {term: 1.0}
    result = trainer.run()
    assert result.steps == 16
    log = [json.loads(line) for line in (tmp_path / "distilled" / "metrics.jsonl").read_text().splitlines()]
    losses = [r[term] for r in log if term in r]
    after = measure(load_model(tmp_path / "distilled" / "best", device="cpu"), teacher, texts)
    assert len(losses) == 16 and np.mean(losses[-4:]) < 0.75 * np.mean(losses[:4]), losses  # batches differ: means
    assert after < 0.5 * before, (before, after)


def test_distilling_vectors_from_a_wider_teacher_fails_in_one_line(members, tmp_path, sts_home):
    from cselab.training.trainer import Trainer

    _, _, _, path_b = members  # 48-d
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)  # 32-d
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    with pytest.raises(CselabError) as exc:
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "d"))
    text = str(exc.value)
    assert "size 48" in text and "size 32" in text and "method_options.target=similarities" in text
    assert "\n" not in text
    # the loss terms follow the target: a weight for the other target's term is refused
    with pytest.raises(CselabError, match="no loss term 'distillation_mse'; terms: similarity_distillation_mse"):
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "d", "method_options.target=similarities",
                                "method_options.loss_weights.distillation_mse=1"))
    with pytest.raises(CselabError, match="train.batch_size must be at least 2"):
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "d", "method_options.target=similarities",
                                "train.batch_size=1"))
    with pytest.raises(CselabError, match="train.batch_size must be at least 3"):
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "d",
                                "method_options.target=similarity_distributions", "train.batch_size=2"))
    with pytest.raises(CselabError, match="method_options.target"):
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "d", "method_options.target=vector"))


def test_distilling_with_neighbour_groups(members, tmp_path, sts_home):
    from cselab.training.trainer import Trainer

    _, _, _, path_b = members  # the teacher: the 48-d member
    student_dir = build_tiny_model_dir(tmp_path / "student", "bert", seed=3)
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    config = tiny_distill_config(path_b, student_dir, corpus, tmp_path / "grouped",
                                 "method_options.target=similarities", "method_options.neighbours=1",
                                 "train.batch_size=4", "model.pooler=mean")
    trainer = Trainer(config)
    sentences = corpus.read_text().splitlines()
    # each example: a sentence and its nearest other sentence by the teacher's cosine, computed here with numpy
    vectors = load_model(path_b, device="cpu").encode(sentences).numpy().astype(np.float64)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    examples = list(trainer.examples)  # (sentence, its neighbour) as indices of the training sentences
    assert len(examples) == len(sentences)
    for (anchor, neighbour), i in zip(examples, range(len(sentences)), strict=True):
        assert anchor == i
        assert cos[i, neighbour] == pytest.approx(cos[i].max(), abs=1e-6)
    batch = trainer.method.collate(examples[:4])
    assert batch["texts"] == [sentences[j] for e in examples[:4] for j in e] and batch["input_ids"].shape[0] == 8
    assert trainer.run().steps == 16
    # neighbours need a similarity target, and do not mix with length grouping
    with pytest.raises(CselabError, match="with target vectors every sentence is matched on its own"):
        Trainer(tiny_distill_config(path_b, build_tiny_model_dir(tmp_path / "s48", "bert", seed=3, hidden_size=48),
                                    corpus, tmp_path / "v", "method_options.neighbours=1"))
    with pytest.raises(CselabError, match="use one of them"):
        Trainer(tiny_distill_config(path_b, student_dir, corpus, tmp_path / "w", "method_options.target=similarities",
                                "method_options.neighbours=1", "train.length_group_window=4"))
