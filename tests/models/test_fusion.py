"""IFCL's embedding fusion: the embeddings-in path, padding/fusion by hand, and the fraternal embedding module."""

import pytest
import torch
from torch import nn

from cselab.models.dropout import dropout_disabled
from cselab.models.encoder import Encoder
from cselab.models.fusion import (
    FraternalEmbeddings,
    embedding_output,
    forward_from_embedding_output,
    fuse,
    given_embedding_output,
    pad_to_length,
)

SENTENCES = ["a man plays the guitar .", "the dog runs", "two women walk in the park with a big dog ."]


def _features(encoder):
    return encoder.tokenize(SENTENCES, max_length=16)


def test_embeddings_in_path_equals_normal_forward_in_eval(tiny_model_dir):
    encoder = Encoder.from_pretrained(tiny_model_dir).eval()
    features = _features(encoder)
    with torch.no_grad():
        normal = encoder.hidden_states(features)
        y = embedding_output(encoder.backbone.embeddings, features["input_ids"])
        via_y = forward_from_embedding_output(encoder, y, features)
    assert torch.equal(via_y.last_hidden_state, normal.last_hidden_state)
    assert len(via_y.hidden_states) == len(normal.hidden_states)
    for ours, theirs in zip(via_y.hidden_states, normal.hidden_states, strict=True):
        assert torch.equal(ours, theirs)
    assert torch.equal(via_y.pooler_output, normal.pooler_output)


def test_embeddings_in_path_equals_normal_forward_in_training_with_the_same_seed(tiny_model_dir):
    """Same RNG state -> same dropout draws in the same order: dropout sits exactly where HF puts it."""
    encoder = Encoder.from_pretrained(tiny_model_dir, dropout=0.3).train()
    features = _features(encoder)
    torch.manual_seed(7)
    normal = encoder.hidden_states(features).last_hidden_state
    torch.manual_seed(7)
    y = embedding_output(encoder.backbone.embeddings, features["input_ids"])
    ours = forward_from_embedding_output(encoder, y, features)
    assert torch.equal(ours.last_hidden_state, normal)
    # hidden_states[0] is the dropped-out y: some entries zeroed, the rest scaled by 1/(1-p)
    dropped = ours.hidden_states[0]
    zero = dropped == 0
    assert zero.any() and not zero.all()
    assert torch.allclose(dropped[~zero], (y / 0.7)[~zero], atol=1e-6)
    # a different draw gives a different output (the test could fail)
    assert not torch.equal(forward_from_embedding_output(encoder, y, features).last_hidden_state, normal)


def test_gradients_flow_into_the_given_embedding_output(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir).eval()
    features = _features(encoder)
    y = embedding_output(encoder.backbone.embeddings, features["input_ids"]).detach().requires_grad_(True)
    forward_from_embedding_output(encoder, y, features).last_hidden_state[:, 0].sum().backward()
    assert y.grad is not None and y.grad.abs().sum() > 0


def test_given_embedding_output_is_undone_after_the_block_and_on_error(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir).eval()
    features = _features(encoder)
    with torch.no_grad():
        before = encoder.hidden_states(features).last_hidden_state
        fake = torch.zeros(3, features["input_ids"].shape[1], encoder.hidden_size)
        with given_embedding_output(encoder.backbone, fake):
            replaced = encoder.hidden_states(features).last_hidden_state
        assert not torch.equal(replaced, before)
        with pytest.raises(RuntimeError, match="boom"), given_embedding_output(encoder.backbone, fake):
            raise RuntimeError("boom")
        assert "forward" not in encoder.backbone.embeddings.__dict__
        assert torch.equal(encoder.hidden_states(features).last_hidden_state, before)


def test_embedding_output_has_no_dropout_and_restores_modes(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, dropout=0.5).train()
    emb = encoder.backbone.embeddings
    ids = _features(encoder)["input_ids"]
    a, b = embedding_output(emb, ids), embedding_output(emb, ids)
    assert torch.equal(a, b), "no dropout draw inside BEL(x)"
    assert emb.dropout.training, "dropout mode restored"
    # BEL(x) = LayerNorm(word + position + token type), computed here by hand
    positions = torch.arange(ids.shape[1])
    raw = (emb.word_embeddings(ids) + emb.position_embeddings(positions)
           + emb.token_type_embeddings(torch.zeros_like(ids)))
    assert torch.allclose(a, emb.LayerNorm(raw), atol=1e-6)
    with dropout_disabled(emb):
        assert not emb.dropout.training
    assert emb.dropout.training


def test_pad_to_length_by_hand():
    ids = torch.tensor([[101, 7, 102], [101, 102, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    out_ids, out_mask = pad_to_length(ids, mask, 5, pad_id=9)
    assert out_ids.tolist() == [[101, 7, 102, 9, 9], [101, 102, 0, 9, 9]]
    assert out_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]
    same_ids, same_mask = pad_to_length(ids, mask, 3, pad_id=9)
    assert torch.equal(same_ids, ids) and torch.equal(same_mask, mask)
    with pytest.raises(ValueError, match="shorter"):
        pad_to_length(ids, mask, 2, pad_id=9)


def test_fuse_by_hand_position_by_position():
    # one sentence, 4 positions, width 2: English has 2 real tokens, German 3
    y = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]])
    y_de = torch.tensor([[[10.0, 20.0], [30.0, 40.0], [50.0, 60.0], [70.0, 80.0]]])
    mask = torch.tensor([[1, 1, 0, 0]])
    mask_de = torch.tensor([[1, 1, 1, 0]])
    fused, fused_mask = fuse(y, mask, y_de, mask_de, eps=0.9)
    expected = torch.tensor([[[1.9, 3.8], [5.7, 7.6], [9.5, 11.4], [13.3, 15.2]]])  # 0.9*y + 0.1*y_de
    assert torch.allclose(fused, expected, atol=1e-5)
    assert fused_mask.tolist() == [[1, 1, 1, 0]]  # OR of the masks
    assert fused_mask.dtype == mask.dtype
    ends, _ = fuse(y, mask, y_de, mask_de, eps=1.0)
    assert torch.equal(ends, y)
    with pytest.raises(ValueError, match="equal shapes"):
        fuse(y, mask, y_de[:, :3], mask_de[:, :3], eps=0.9)
    with pytest.raises(ValueError, match="eps"):
        fuse(y, mask, y_de, mask_de, eps=1.5)


def test_fraternal_copy_of_source_is_frozen_and_equals_the_initial_embeddings(tiny_model_dir):
    encoder = Encoder.from_pretrained(tiny_model_dir).train()
    frat = FraternalEmbeddings.copy_of_source(encoder)
    assert frat.projection is None and frat.tokenizer is encoder.tokenizer
    assert not any(p.requires_grad for p in frat.parameters())
    ids = _features(encoder)["input_ids"]
    expected = embedding_output(encoder.backbone.embeddings, ids).detach()
    assert torch.equal(frat(ids), expected)
    with torch.no_grad():  # training the source later does not move the copy
        encoder.backbone.embeddings.word_embeddings.weight.add_(1.0)
    assert torch.equal(frat(ids), expected)
    assert frat.pad_token_id == encoder.tokenizer.pad_token_id


def _small_roberta_dir(tmp_path, roberta_dir, hidden):
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    tokenizer = AutoTokenizer.from_pretrained(roberta_dir)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=2 * hidden, max_position_embeddings=130,
                           pad_token_id=tokenizer.pad_token_id)
    path = tmp_path / f"roberta-{hidden}"
    RobertaModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_fraternal_other_model_projects_to_the_source_width(tiny_bert_dir, tiny_roberta_dir, tmp_path):
    other = _small_roberta_dir(tmp_path, tiny_roberta_dir, hidden=16)
    frat = FraternalEmbeddings.from_pretrained(str(other), target_size=32)
    assert isinstance(frat.projection, nn.Linear) and frat.projection.weight.shape == (32, 16)
    assert frat.projection.weight.requires_grad
    assert not any(p.requires_grad for p in frat.embeddings.parameters())
    tokens = frat.tokenize(["der hund", "ein mann spielt"], max_length=16)
    assert tokens["input_ids"][0, -1].item() == frat.pad_token_id == frat.tokenizer.pad_token_id
    out = frat(tokens["input_ids"])
    assert out.shape == (2, tokens["input_ids"].shape[1], 32)
    expected = frat.projection(embedding_output(frat.embeddings, tokens["input_ids"]))
    assert torch.allclose(out, expected)
    out.sum().backward()
    assert frat.projection.weight.grad is not None
    same = FraternalEmbeddings.from_pretrained(str(tiny_roberta_dir), target_size=32)
    assert same.projection is None
