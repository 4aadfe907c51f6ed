"""JTCSE's cross-attention encoder layers on tiny BERT and RoBERTa, against HF's own layers and a by-hand reference."""

import copy
import math

import pytest
import torch

from conftest import build_tiny_model_dir
from cselab.errors import CselabError
from cselab.models.cross_attention import cael_positions, cross_cls, cross_layer, encoder_layers
from cselab.models.encoder import Encoder

TEXTS = ["a man plays the guitar .", "the dog", "two women are walking in the park with a cat"]


@pytest.mark.parametrize("n_layers, num_ca, expected", [
    (12, 6, (2, 4, 6, 8, 10, 12)),
    (12, 4, (3, 6, 9, 12)),
    (12, 3, (4, 8, 12)),
    (12, 1, (12,)),
    (12, 12, tuple(range(1, 13))),
    (6, 3, (2, 4, 6)),
    (6, 2, (3, 6)),
    (2, 1, (2,)),
    (12, 0, ()),
])
def test_cael_positions(n_layers, num_ca, expected):
    assert cael_positions(n_layers, num_ca) == expected


@pytest.mark.parametrize("n_layers, num_ca", [(12, 5), (6, 4), (12, 24), (12, -1)])
def test_cael_positions_rejects_non_divisors(n_layers, num_ca):
    with pytest.raises(CselabError, match="num_ca_layers"):
        cael_positions(n_layers, num_ca)


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Per family: two tiny encoders with DIFFERENT weights (same vocabulary), dropout 0, eval mode."""
    out = {}
    for family in ("bert", "roberta"):
        encoders = []
        for seed in (0, 1):
            path = build_tiny_model_dir(tmp_path_factory.mktemp(f"{family}{seed}"), family, seed=seed)
            encoders.append(Encoder.from_pretrained(path, dropout=0.0).eval())
        out[family] = encoders
    return out


def _states(encoder, features):
    return encoder.hidden_states(features).hidden_states


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_identical_encoders_give_the_ordinary_layer_output(twins, family):
    encoder = twins[family][0]
    features = encoder.tokenize(TEXTS)
    hidden = _states(encoder, features)
    layers = encoder_layers(encoder.backbone)
    for j in range(1, len(layers) + 1):
        layer = layers[j - 1]
        full = cross_layer(layer, hidden[j - 1], layer, hidden[j - 1], features["attention_mask"])
        torch.testing.assert_close(full, hidden[j], atol=1e-5, rtol=1e-5)
        first = cross_layer(layer, hidden[j - 1], layer, hidden[j - 1], features["attention_mask"], cls_only=True)
        torch.testing.assert_close(first, hidden[j][:, :1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_values_come_from_the_other_layer(twins, family):
    """Same input states, different layers: equals layer_q run by HF with layer_v's value projection."""
    enc_q, enc_v = twins[family]
    features = enc_q.tokenize(TEXTS)
    states = _states(enc_q, features)[0]
    layer_q, layer_v = encoder_layers(enc_q.backbone)[0], encoder_layers(enc_v.backbone)[0]
    swapped = copy.deepcopy(layer_q)
    swapped.attention.self.value = copy.deepcopy(layer_v.attention.self.value)
    mask = features["attention_mask"]
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    expected = swapped(states, additive)
    got = cross_layer(layer_q, states, layer_v, states, mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, layer_q(states, additive), atol=1e-3), "the value projection made no difference"


def _by_hand(layer_q, states_q, layer_v, states_v, mask):
    """Explicit per-sample, per-head loops for the context; the layer's own output/feed-forward blocks after it."""
    attn = layer_q.attention.self
    heads, size = attn.num_attention_heads, attn.attention_head_size
    q_all, k_all = attn.query(states_q), attn.key(states_q)
    v_all = layer_v.attention.self.value(states_v)
    n, t, _ = states_q.shape
    context = torch.zeros(n, t, heads * size)
    for b in range(n):
        keep = mask[b].bool()
        for h in range(heads):
            sl = slice(h * size, (h + 1) * size)
            scores = q_all[b, :, sl] @ k_all[b, keep, sl].T / math.sqrt(size)
            context[b, :, sl] = torch.softmax(scores, dim=-1) @ v_all[b, keep, sl]
    return layer_q.feed_forward_chunk(layer_q.attention.output(context, states_q))


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_cross_layer_matches_a_by_hand_computation(twins, family):
    enc_1, enc_2 = twins[family]
    features = enc_1.tokenize(TEXTS)
    mask = features["attention_mask"]
    assert (mask == 0).any(), "the batch must contain padding"
    h_1, h_2 = _states(enc_1, features), _states(enc_2, features)
    j = 2
    l_1, l_2 = encoder_layers(enc_1.backbone)[j - 1], encoder_layers(enc_2.backbone)[j - 1]
    with torch.no_grad():
        expected = _by_hand(l_1, h_1[j - 1], l_2, h_2[j - 1], mask)
        got = cross_layer(l_1, h_1[j - 1], l_2, h_2[j - 1], mask)
        c_1, c_2 = cross_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, num_ca_layers=1)
        expected_2 = _by_hand(l_2, h_2[j - 1], l_1, h_1[j - 1], mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # c = first token of the LAST CAEL (layer 2 of 2), symmetric for the second encoder
    torch.testing.assert_close(c_1, expected[:, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c_2, expected_2[:, 0], atol=1e-5, rtol=1e-5)


def test_cross_cls_errors(twins, tmp_path):
    enc_1, enc_2 = twins["bert"]
    features = enc_1.tokenize(TEXTS)
    h = _states(enc_1, features)
    with pytest.raises(CselabError, match="at least one"):
        cross_cls(enc_1.backbone, enc_2.backbone, h, h, features["attention_mask"], num_ca_layers=0)
    with pytest.raises(CselabError, match="does not divide"):
        cross_cls(enc_1.backbone, enc_2.backbone, h, h, features["attention_mask"], num_ca_layers=3)
    with pytest.raises(CselabError, match="encoder.layer"):
        encoder_layers(torch.nn.Linear(2, 2))


def test_gradient_reaches_both_encoders(twins):
    enc_1, enc_2 = (copy.deepcopy(e).train() for e in twins["bert"])
    features = enc_1.tokenize(TEXTS)
    c_1, _ = cross_cls(enc_1.backbone, enc_2.backbone, _states(enc_1, features), _states(enc_2, features),
                       features["attention_mask"], num_ca_layers=2)
    c_1.sum().backward()
    last_1, last_2 = encoder_layers(enc_1.backbone)[-1], encoder_layers(enc_2.backbone)[-1]
    assert last_1.attention.self.query.weight.grad.abs().sum() > 0
    assert last_2.attention.self.value.weight.grad.abs().sum() > 0
    assert last_2.attention.self.query.weight.grad is None, "c_I must not use encoder II's queries"
