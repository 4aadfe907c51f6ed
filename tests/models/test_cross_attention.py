"""JTCSE's cross-attention encoder layers and cross stream on tiny BERT and RoBERTa, against HF's own layers,
a by-hand reference of one CAEL and a plain-tensor-maths loop over the layers' weights for the whole stream."""

import copy
import math

import pytest
import torch
from transformers import AutoConfig, AutoModel

from cselab.errors import CselabError
from cselab.models.cross_attention import cael_positions, cross_layer, cross_stream_cls, encoder_layers
from cselab.models.encoder import Encoder
from tests.helpers import build_tiny_model_dir

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


def build_deep_model_dir(path, family, seed, n_layers=4):
    """Like conftest's tiny model directory but ``n_layers`` deep (room for a non-CAEL layer inside the stream)."""
    build_tiny_model_dir(path, family, seed=seed)  # the tokenizer and a config to deepen
    config = AutoConfig.from_pretrained(path)
    config.num_hidden_layers = n_layers
    torch.manual_seed(seed)
    AutoModel.from_config(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Per family: two tiny encoders with DIFFERENT weights (same vocabulary), dropout 0, eval mode;
    ``family`` has 2 layers, ``family + "-4"`` has 4."""
    out = {}
    for family in ("bert", "roberta"):
        for depth, build in ((2, build_tiny_model_dir), (4, build_deep_model_dir)):
            encoders = []
            for seed in (0, 1):
                path = build(tmp_path_factory.mktemp(f"{family}{depth}-{seed}"), family, seed=seed)
                encoders.append(Encoder.from_pretrained(path, dropout=0.0).eval())
            out[family if depth == 2 else f"{family}-4"] = encoders
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
        c_1, c_2 = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, num_ca_layers=1)
        expected_2 = _by_hand(l_2, h_2[j - 1], l_1, h_1[j - 1], mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # one CAEL = the last layer: c = its first token, started from hidden_states[1]; symmetric for encoder II
    torch.testing.assert_close(c_1, expected[:, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c_2, expected_2[:, 0], atol=1e-5, rtol=1e-5)


def test_cross_cls_errors(twins, tmp_path):
    enc_1, enc_2 = twins["bert"]
    features = enc_1.tokenize(TEXTS)
    h = _states(enc_1, features)
    with pytest.raises(CselabError, match="at least one"):
        cross_stream_cls(enc_1.backbone, enc_2.backbone, h, h, features["attention_mask"], num_ca_layers=0)
    with pytest.raises(CselabError, match="does not divide"):
        cross_stream_cls(enc_1.backbone, enc_2.backbone, h, h, features["attention_mask"], num_ca_layers=3)
    with pytest.raises(CselabError, match="encoder.layer"):
        encoder_layers(torch.nn.Linear(2, 2))


# -- the cross stream against plain tensor maths ---------------------------------------------------------------
def _linear(x, weights, name):
    return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]


def _layer_norm(x, weights, name, eps):
    centred = x - x.mean(-1, keepdim=True)
    variance = (centred**2).mean(-1, keepdim=True)
    return centred / torch.sqrt(variance + eps) * weights[f"{name}.weight"] + weights[f"{name}.bias"]


def _gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def plain_layer(weights_q, x_q, weights_v, x_v, mask, heads, eps):
    """A BERT layer from its weights: queries/keys/output/feed-forward of ``weights_q`` on ``x_q``, values of
    ``weights_v`` on ``x_v`` (the same weights and states give the ordinary layer)."""
    n, t, d = x_q.shape
    size = d // heads

    def split(z):
        return z.reshape(n, t, heads, size).transpose(1, 2)

    q = split(_linear(x_q, weights_q, "attention.self.query"))
    k = split(_linear(x_q, weights_q, "attention.self.key"))
    v = split(_linear(x_v, weights_v, "attention.self.value"))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(size)
    scores = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
    context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(n, t, d)
    attended = _layer_norm(_linear(context, weights_q, "attention.output.dense") + x_q, weights_q,
                           "attention.output.LayerNorm", eps)
    hidden = _gelu(_linear(attended, weights_q, "intermediate.dense"))
    return _layer_norm(_linear(hidden, weights_q, "output.dense") + attended, weights_q, "output.LayerNorm", eps)


def plain_cross_stream(backbone_1, backbone_2, hidden_1, hidden_2, mask, positions):
    """``(c_I, c_II)`` by a per-layer loop over the layers' weights (METHODS.md section 6, written out):
    start at ``hidden[j0 - 1]``; a CAEL mixes own queries/keys with the other stream's values, any other
    layer is the encoder's ordinary layer on its own stream."""
    config = backbone_1.config
    assert config.hidden_act == "gelu", "the reference writes out exact (erf) GELU"
    heads, eps = config.num_attention_heads, config.layer_norm_eps
    weights_1 = [dict(layer.named_parameters()) for layer in backbone_1.encoder.layer]
    weights_2 = [dict(layer.named_parameters()) for layer in backbone_2.encoder.layer]
    x_1, x_2 = hidden_1[positions[0] - 1], hidden_2[positions[0] - 1]
    for j in range(positions[0], len(weights_1) + 1):
        w_1, w_2 = weights_1[j - 1], weights_2[j - 1]
        if j in positions:
            x_1, x_2 = (plain_layer(w_1, x_1, w_2, x_2, mask, heads, eps),
                        plain_layer(w_2, x_2, w_1, x_1, mask, heads, eps))
        else:
            x_1, x_2 = (plain_layer(w_1, x_1, w_1, x_1, mask, heads, eps),
                        plain_layer(w_2, x_2, w_2, x_2, mask, heads, eps))
    return x_1[:, 0], x_2[:, 0]


def _hf_states(encoder, features):
    """The backbone's own forward (HF's hidden_states), not cselab's wrapper."""
    inputs = {k: features[k] for k in ("input_ids", "attention_mask")}
    return encoder.backbone(**inputs, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("model, num_ca, positions", [
    ("bert", 1, (2,)), ("bert", 2, (1, 2)), ("roberta", 2, (1, 2)),
    ("bert-4", 2, (2, 4)), ("roberta-4", 2, (2, 4)), ("bert-4", 4, (1, 2, 3, 4)), ("bert-4", 1, (4,)),
])
def test_cross_stream_matches_a_plain_per_layer_loop(twins, model, num_ca, positions):
    enc_1, enc_2 = twins[model]
    features = enc_1.tokenize(TEXTS)
    mask = features["attention_mask"]
    assert (mask == 0).any(), "the batch must contain padding"
    with torch.no_grad():
        h_1, h_2 = _hf_states(enc_1, features), _hf_states(enc_2, features)
        expected = plain_cross_stream(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, positions)
        got = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, num_ca_layers=num_ca)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_non_cael_layers_get_the_mask_their_attention_implementation_expects(twins, implementation):
    """Layer 3 of 4 is an ordinary layer in the cross stream; it must mask padding under either implementation."""
    enc_1, enc_2 = (copy.deepcopy(e) for e in twins["roberta-4"])
    for encoder in (enc_1, enc_2):
        encoder.backbone.set_attn_implementation(implementation)
    features = enc_1.tokenize(TEXTS)
    mask = features["attention_mask"]
    with torch.no_grad():
        h_1, h_2 = _hf_states(enc_1, features), _hf_states(enc_2, features)
        expected = plain_cross_stream(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, (2, 4))
        got = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, num_ca_layers=2)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model", ["bert", "bert-4"])
def test_every_cael_shapes_c(twins, model):
    """Two streams: with 2 CAELs the first one is in the path to c, so c differs from the 1-CAEL value."""
    enc_1, enc_2 = twins[model]
    features = enc_1.tokenize(TEXTS)
    with torch.no_grad():
        h_1, h_2 = _hf_states(enc_1, features), _hf_states(enc_2, features)
        one = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, features["attention_mask"], num_ca_layers=1)
        two = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, features["attention_mask"], num_ca_layers=2)
    for a, b in zip(one, two, strict=True):
        assert (a - b).abs().max() > 1e-3, "the first CAEL did not change c"


def test_gradient_of_c_flows_through_the_cross_stream(twins):
    """The primitive stream's states are detached, so any gradient on layer 1 (the first of 2 CAELs) can only
    come through the cross stream: own query/key/output/feed-forward and the OTHER encoder's value."""
    enc_1, enc_2 = (copy.deepcopy(e).train() for e in twins["bert"])
    features = enc_1.tokenize(TEXTS)
    h_1, h_2 = ([s.detach() for s in _hf_states(e, features)] for e in (enc_1, enc_2))
    c_1, _ = cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, features["attention_mask"], num_ca_layers=2)
    c_1.sum().backward()
    first_1, first_2 = encoder_layers(enc_1.backbone)[0], encoder_layers(enc_2.backbone)[0]
    last_1, last_2 = encoder_layers(enc_1.backbone)[-1], encoder_layers(enc_2.backbone)[-1]
    own = [first_1.attention.self.query, first_1.attention.self.key, first_1.attention.output.dense,
           first_1.attention.output.LayerNorm, first_1.intermediate.dense, first_1.output.dense]
    for module in [*own, first_2.attention.self.value, last_1.attention.self.query, last_2.attention.self.value]:
        assert module.weight.grad is not None and module.weight.grad.abs().sum() > 0, module
    # c_I's last step uses encoder I's queries and encoder II's values of the last layer, never the reverse
    assert last_2.attention.self.query.weight.grad is None
    assert last_1.attention.self.value.weight.grad is None


@pytest.mark.parametrize("model, num_ca, positions", [("bert", 2, (1, 2)), ("roberta-4", 2, (2, 4))])
def test_gradients_of_c_equal_those_of_the_plain_loop(twins, model, num_ca, positions):
    """Every parameter's gradient of a loss on (c_I, c_II), through cselab's stream vs through the plain loop
    (autograd through the same parameter tensors, starting from the backbone's own forward)."""
    # float64 so that summation order cannot hide a wiring error; dropout 0: train mode is deterministic
    enc_1, enc_2 = (copy.deepcopy(e).double().train() for e in twins[model])
    features = enc_1.tokenize(TEXTS)
    mask = features["attention_mask"]
    params = [*enc_1.backbone.parameters(), *enc_2.backbone.parameters()]

    def gradients(stream):
        h_1, h_2 = _hf_states(enc_1, features), _hf_states(enc_2, features)
        c_1, c_2 = stream(h_1, h_2)
        loss = (c_1 * torch.linspace(-1, 1, c_1.shape[-1], dtype=c_1.dtype)).sum() + (c_2**2).sum()
        return torch.autograd.grad(loss, params, allow_unused=True)

    got = gradients(lambda h_1, h_2: cross_stream_cls(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, num_ca))
    expected = gradients(lambda h_1, h_2: plain_cross_stream(enc_1.backbone, enc_2.backbone, h_1, h_2, mask, positions))
    for g, e in zip(got, expected, strict=True):
        if e is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, e, atol=1e-10, rtol=1e-8)
