"""Poolers, the encoder's inference path, and lossless save/load of every model kind."""

import json

import pytest
import torch

from cselab.errors import CselabError
from cselab.models.encoder import Encoder, encoding_length
from cselab.models.poolers import last_token_position, masked_mean, pool
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model

SENTENCES = ["a man plays the guitar .", "the dog runs", "two women walk in the park with a big dog .", "cat"]


def test_masked_mean_ignores_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.equal(masked_mean(hidden, mask), torch.tensor([[2.0, 3.0]]))


def test_last_mask_position_and_mask_pooling():
    ids = torch.tensor([[5, 9, 7, 9, 0], [9, 1, 2, 3, 4]])
    assert last_token_position(ids, 9).tolist() == [3, 0]
    hidden = torch.arange(2 * 5 * 3, dtype=torch.float).view(2, 5, 3)
    out = pool("mask", (hidden,), torch.ones(2, 5), input_ids=ids, mask_token_id=9)
    assert torch.equal(out, torch.stack([hidden[0, 3], hidden[1, 0]]))
    with pytest.raises(CselabError, match="mask token"):
        last_token_position(torch.tensor([[1, 2]]), 9)


def test_first_last_avg_by_hand():
    emb, first, last = (torch.randn(1, 3, 2) for _ in range(3))
    mask = torch.tensor([[1, 1, 0]])
    out = pool("first_last_avg", (emb, first, last), mask)
    expected = ((first[0, :2] + last[0, :2]) / 2).mean(0, keepdim=True)
    assert torch.allclose(out, expected)


def test_unknown_pooler_is_a_clear_error(tiny_bert_dir):
    with pytest.raises(CselabError, match="unknown pooler 'avg'"):
        Encoder.from_pretrained(tiny_bert_dir, pooler="avg")


@pytest.mark.parametrize("pooler", ["cls", "mean", "first_last_avg", "pooler"])
def test_encode_restores_order_and_matches_single_sentences(tiny_model_dir, pooler):
    encoder = Encoder.from_pretrained(tiny_model_dir, pooler=pooler)
    batched = encoder.encode(SENTENCES, batch_size=3)
    single = torch.cat([encoder.encode([s]) for s in SENTENCES])
    assert batched.shape == (4, encoder.hidden_size)
    assert torch.allclose(batched, single, atol=1e-5)


def test_head_is_train_only(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="cls", with_head=True)
    encoder.eval()
    features = encoder.tokenize(SENTENCES[:2])
    with torch.no_grad():
        plain, headed = encoder(features), encoder(features, apply_head=True)
    assert torch.allclose(encoder.encode(SENTENCES[:2]), plain, atol=1e-6)
    assert torch.allclose(headed, torch.tanh(encoder.head.dense(plain)), atol=1e-6)


def test_encoder_round_trip_keeps_head_and_embeddings(tiny_model_dir, tmp_path):
    encoder = Encoder.from_pretrained(tiny_model_dir, pooler="cls", with_head=True, max_length=40)
    torch.nn.init.normal_(encoder.head.dense.weight)
    save_model(encoder, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.pooler == "cls" and loaded.max_length == 40
    assert torch.equal(loaded.head.dense.weight, encoder.head.dense.weight)
    assert torch.allclose(loaded.encode(SENTENCES), encoder.encode(SENTENCES), atol=1e-6)
    assert json.loads((tmp_path / "m" / "cselab.json").read_text())["kind"] == "encoder"
    assert not list((tmp_path / "m").rglob("*.bin")) and not list((tmp_path / "m").rglob("*.pt"))


def test_twin_is_the_sum_of_its_encoders(tiny_bert_dir, tmp_path):
    a = Encoder.from_pretrained(tiny_bert_dir, pooler="cls")
    b = Encoder.from_pretrained(tiny_bert_dir, pooler="cls")
    with torch.no_grad():
        for p in b.parameters():
            p.add_(0.01 * torch.randn_like(p))
    twin = TwinModel(a, b)
    expected = a.encode(SENTENCES) + b.encode(SENTENCES)
    assert torch.allclose(twin.encode(SENTENCES), expected, atol=1e-6)
    save_model(twin, tmp_path / "twin")
    assert torch.allclose(load_model(tmp_path / "twin").encode(SENTENCES), expected, atol=1e-5)


def test_ensemble_weights(tiny_bert_dir, tmp_path):
    a = Encoder.from_pretrained(tiny_bert_dir, pooler="cls")
    b = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    ens = EnsembleModel([a, b], [0.3, 0.7])
    expected = 0.3 * a.encode(SENTENCES) + 0.7 * b.encode(SENTENCES)
    save_model(ens, tmp_path / "ens")
    assert torch.allclose(load_model(tmp_path / "ens").encode(SENTENCES), expected, atol=1e-5)


def test_saved_encoder_is_a_sentence_transformers_directory(tiny_bert_dir, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    save_model(encoder, tmp_path / "m")
    theirs = st.SentenceTransformer(str(tmp_path / "m"), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    assert torch.allclose(theirs.cpu(), encoder.encode(SENTENCES), atol=1e-5)


def test_unreadable_model_dirs(tmp_path):
    with pytest.raises(CselabError, match="not a model directory"):
        load_model(tmp_path)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(CselabError, match="is a file"):
        load_model(tmp_path / "f.txt")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cselab.json").write_text("{not json")
    with pytest.raises(CselabError, match="cannot read"):
        load_model(bad)


@pytest.mark.parametrize("pooler", ["mean", "cls"])
def test_forward_by_length_equals_each_row_alone_and_keeps_the_gradient(tiny_bert_dir, pooler):
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler=pooler).eval()  # dropout off: forwards must agree
    texts = [" ".join([SENTENCES[i % 4]] * (1 + i % 5)) for i in range(11)]  # lengths from 2 to 50 tokens
    features = encoder.tokenize(texts)
    grouped = encoder.forward_by_length(features, groups=4)
    alone = torch.cat([encoder(encoder.tokenize([t])) for t in texts])  # each row with no padding at all
    torch.testing.assert_close(grouped, alone, atol=1e-5, rtol=1e-5)
    weights = torch.randn_like(grouped)
    (grouped * weights).sum().backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad(set_to_none=True)
    (encoder(features) * weights).sum().backward()
    whole = {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}
    assert grads.keys() == whole.keys() and "backbone.embeddings.word_embeddings.weight" in grads
    for name, grad in grads.items():
        torch.testing.assert_close(grad, whole[name], atol=1e-5, rtol=1e-4)
    assert torch.equal(encoder.forward_by_length(features, groups=1), encoder(features))


def test_encoding_length_sets_the_length_for_the_block_capped_at_the_positions(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, max_length=16)
    long_text = " ".join(SENTENCES * 20)  # far more tokens than the model has positions
    assert encoder.position_limit == 128 and len(encoder.token_rows([long_text])[0]) == 16
    with encoding_length(encoder, 64):
        assert encoder.max_length == 64 and len(encoder.token_rows([long_text])[0]) == 64
    assert encoder.max_length == 16
    with encoding_length(encoder, 1000):  # no more than the positions number
        assert encoder.max_length == 128
    with encoding_length(encoder, None):  # None: the model's own length
        assert encoder.max_length == 16
    with pytest.raises(RuntimeError, match="inside"), encoding_length(encoder, 64):
        raise RuntimeError("inside")
    assert encoder.max_length == 16  # restored when the block raises too
