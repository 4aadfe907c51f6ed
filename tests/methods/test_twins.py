"""TNCSE / JTCSE stage 2 on tiny BERT and RoBERTa: loss wiring against direct computations, the twin
inference, the R draw, the no-CAEL equivalence, the cross stream's c-terms against a plain per-layer loop (and
their gradients), what the CAEL count does and does not change, and clear errors."""

import math

import pytest
import torch

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.losses import cross_encoder_info_nce, info_nce
from cselab.methods import build_method
from cselab.methods.base import StepContext
from cselab.methods.jtcse import draw_query_side
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model, save_model
from cselab.runtime.distributed import DistributedContext
from cselab.training.pipeline import plan_pipeline
from tests.helpers import REPO_ROOT, build_tiny_model_dir
from tests.models.test_cross_attention import build_deep_model_dir, plain_cross_stream

TEXTS = ["a man plays the guitar .", "the dog runs", "two women are walking in the park", "a cat",
         "the young man is riding a horse on the road"]


def make_stage1_dir(path, family, seed, build=build_tiny_model_dir):
    """A stage-1 model directory: a tiny backbone plus a (random) trained-MLP head, saved as cselab does."""
    backbone = build(path / "hf", family, seed=seed)
    torch.manual_seed(100 + seed)
    return save_model(Encoder.from_pretrained(backbone, with_head=True), path / "model")


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    """Per family two stage-1 models with different weights; ``family + "-4"``: 4 layers instead of 2."""
    root = tmp_path_factory.mktemp("stage1")
    out = {}
    for family in ("bert", "roberta"):
        out[family] = [make_stage1_dir(root / f"{family}{s}", family, s) for s in (0, 1)]
        out[f"{family}-4"] = [make_stage1_dir(root / f"{family}-4-{s}", family, s, build_deep_model_dir)
                              for s in (0, 1)]
    return out


def twin_config(method, enc_1, enc_2, *extra):
    return load_config(None, [
        f"method_options.encoder_1={enc_1}", f"method_options.encoder_2={enc_2}", "model.max_length=16",
        "model.dropout=0.1", *extra,
    ], method=method)


def ctx(seed=0):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return StepContext(dist=DistributedContext(), step=0, generator=generator)


def by_hand_tn(h_a, h_b, p_a, p_b):
    """L_TN by a Python loop over the pairs (TNCSE Eq. 6 with the cosine floor 1e-4)."""
    h_a, h_b, p_a, p_b = (t.detach() for t in (h_a, h_b, p_a, p_b))
    total = 0.0
    for i in range(h_a.shape[0]):
        cos = float(torch.dot(h_a[i], h_b[i]) / (h_a[i].norm() * h_b[i].norm()))
        gap = float((p_a[i] - p_b[i]).norm()) / float(p_a[i].norm() + p_b[i].norm())
        total += -math.log(max(cos, 1e-4)) * gap
    return total / h_a.shape[0]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_tncse_terms_equal_direct_computations_on_the_model_outputs(stage1, family):
    method = build_method(twin_config("tncse", *stage1[family])).train()
    batch = method.collate(TEXTS)
    torch.manual_seed(7)
    terms = method.loss_terms(batch, ctx())
    torch.manual_seed(7)  # the same dropout masks: twin_views is the first random draw of loss_terms
    views = method.twin_views(batch, with_pooler=True)
    h_1, h_1p = views.h[0].chunk(2)
    h_2, h_2p = views.h[1].chunk(2)
    p_1, p_1p = views.p[0].chunk(2)
    p_2, p_2p = views.p[1].chunk(2)
    assert not torch.allclose(h_1, h_1p), "dropout must make the two copies differ"
    # P is each encoder's stage-1 MLP on its CLS vector
    torch.testing.assert_close(views.p[0], method.encoder_1.head(views.h[0]))
    # the CLS vector of the last layer, recomputed directly from the backbone
    torch.manual_seed(7)
    direct = method.encoder_1.backbone(**{k: torch.cat([v, v]) for k, v in batch.items()}).last_hidden_state[:, 0]
    torch.testing.assert_close(views.h[0], direct)
    tau = 0.05
    expected_nce = info_nce(h_1, h_1p, tau) + info_nce(h_2, h_2p, tau)
    expected_ictn = by_hand_tn(h_1, h_2p, p_1, p_2p) + by_hand_tn(h_2, h_1p, p_2, p_1p)
    expected_icnce = cross_encoder_info_nce(torch.cat([h_1, h_1p]), torch.cat([h_2, h_2p]), tau)
    assert set(terms) == {"nce", "icnce", "ictn"}
    torch.testing.assert_close(terms["nce"], expected_nce)
    torch.testing.assert_close(terms["icnce"], expected_icnce)
    assert float(terms["ictn"].detach()) == pytest.approx(expected_ictn, rel=1e-5)


def test_icnce_rows_and_masking_by_hand(stage1):
    """ICNCE on the model's outputs against an explicit loop: positive = other copy in the other encoder."""
    method = build_method(twin_config("tncse", *stage1["bert"], "method_options.loss_weights={nce: 0, ictn: 0}"))
    batch = method.collate(TEXTS)
    torch.manual_seed(3)
    terms = method.loss_terms(batch, ctx())
    assert set(terms) == {"icnce"}, "weight-0 terms are not computed"
    torch.manual_seed(3)
    views = method.twin_views(batch, with_pooler=False)
    a, b = (t.detach() for t in views.h)
    n, half = a.shape[0], a.shape[0] // 2
    total = 0.0
    for k in range(n):
        logits = {m: float(torch.cosine_similarity(a[k], b[m], dim=0)) / 0.05 for m in range(n) if m != k}
        positive = (k + half) % n
        total += -logits[positive] + math.log(sum(math.exp(v) for v in logits.values()))
    assert float(terms["icnce"].detach()) == pytest.approx(total / n, rel=1e-5)


def test_gradients_reach_both_encoders_and_their_mlps(stage1):
    method = build_method(twin_config("tncse", *stage1["bert"])).train()
    terms = method.loss_terms(method.collate(TEXTS), ctx())
    sum(terms.values()).backward()
    for encoder in method.encoders:
        assert encoder.head.dense.weight.grad.abs().sum() > 0
        assert encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_jtcse_without_cael_equals_tncse_exactly(stage1, family):
    tncse = build_method(twin_config("tncse", *stage1[family])).train()
    jtcse = build_method(twin_config("jtcse", *stage1[family], "method_options.num_ca_layers=0")).train()
    batch = tncse.collate(TEXTS)
    torch.manual_seed(11)
    a = tncse.loss_terms(batch, ctx(5))
    torch.manual_seed(11)
    context = ctx(5)
    b = jtcse.loss_terms(batch, context)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    fresh = ctx(5).generator
    assert torch.equal(context.generator.get_state(), fresh.get_state()), "no R may be drawn without CAELs"


def _seed_with_r(r):
    return next(s for s in range(100) if draw_query_side(ctx(s).generator) == r)


def _hf_views(method, batch):
    """Both dropout copies through each backbone's own forward: ``(features, hidden_states per encoder)``."""
    features = {k: torch.cat([v, v]) for k, v in batch.items()}
    return features, [e.backbone(**features, output_hidden_states=True).hidden_states for e in method.encoders]


@pytest.mark.parametrize("model, r, num_ca, positions", [
    ("bert", 0, 1, (2,)), ("bert", 1, 1, (2,)), ("roberta", 1, 1, (2,)),  # one CAEL: the last layer alone
    ("bert", 1, 2, (1, 2)), ("bert-4", 1, 2, (2, 4)), ("roberta-4", 0, 2, (2, 4)),
])
def test_jtcse_icnce_equals_the_plain_cross_stream_on_the_drawn_query_side(stage1, model, r, num_ca, positions):
    # dropout 0: the forward passes are deterministic, so the reference can recompute everything
    method = build_method(twin_config("jtcse", *stage1[model], f"method_options.num_ca_layers={num_ca}",
                                      "model.dropout=0.0", "method_options.loss_weights={nce: 0, ictn: 0}")).train()
    batch = method.collate(TEXTS)
    terms = method.loss_terms(batch, ctx(_seed_with_r(r)))
    features, states = _hf_views(method, batch)
    h_1, h_2 = states[0][-1][:, 0], states[1][-1][:, 0]
    c_1, c_2 = plain_cross_stream(method.encoder_1.backbone, method.encoder_2.backbone, *states,
                                  features["attention_mask"], positions)
    x = cross_encoder_info_nce
    expected = x(h_1, h_2) + x(c_1, c_2) if r == 1 else x(h_2, h_1) + x(c_2, c_1)
    other = x(h_2, h_1) + x(c_2, c_1) if r == 1 else x(h_1, h_2) + x(c_1, c_2)
    atol = 2e-6  # fp32 rounding of two computation orders; the two query sides differ by >= 1e-5 here
    torch.testing.assert_close(terms["icnce"], expected, atol=atol, rtol=0.0)
    assert float((expected - other).detach().abs()) > 4 * atol, (
        "the two query sides must differ for the test to mean anything")


@pytest.mark.parametrize("model", ["bert", "roberta", "bert-4"])
def test_jtcse_cael_count_changes_the_c_terms_and_not_the_h_terms(stage1, model):
    one, two = (build_method(twin_config("jtcse", *stage1[model], f"method_options.num_ca_layers={k}")).train()
                for k in (1, 2))
    two.load_state_dict(one.state_dict())
    batch = one.collate(TEXTS)
    terms, h = [], []
    for method in (one, two):  # training mode, dropout 0.1: the h-terms must agree bit for bit
        torch.manual_seed(3)
        terms.append(method.loss_terms(batch, ctx(4)))
        torch.manual_seed(3)
        h.append(method.twin_views(batch, with_pooler=False).h)
    for key in ("nce", "ictn"):
        assert torch.equal(terms[0][key], terms[1][key]), key
    for a, b in zip(*h, strict=True):
        assert torch.equal(a, b)
    assert not torch.allclose(terms[0]["icnce"], terms[1]["icnce"])
    # without dropout the c-part alone: the first of two CAELs changes c (it feeds the cross stream's next layer)
    c = []
    with torch.no_grad():
        for method in (one.eval(), two.eval()):
            c.append(method.cross_views(method.twin_views(batch, with_pooler=False)))
    for a, b in zip(*c, strict=True):
        assert (a - b).abs().max() > 1e-3


def test_jtcse_c_terms_train_the_first_cael_of_both_encoders(stage1):
    """2 CAELs in 2 layers (CAELs at 1 and 2): the gradient of ICNCE equals the plain-loop reference's, and its
    c-part reaches layer 1's own query/key/attention-output/feed-forward and the OTHER encoder's value."""
    method = build_method(twin_config("jtcse", *stage1["bert"], "method_options.num_ca_layers=2",
                                      "model.dropout=0.0", "method_options.loss_weights={nce: 0, ictn: 0}")).train()
    method.double()  # float64 encoders (the losses still cast to float32), so the comparison can be tight
    batch = method.collate(TEXTS)
    params = list(method.parameters())
    names = [name for name, _ in method.named_parameters()]
    seed = _seed_with_r(1)

    def gradients(loss):
        return dict(zip(names, torch.autograd.grad(loss, params, retain_graph=True, materialize_grads=True),
                        strict=True))

    got = gradients(method.loss_terms(batch, ctx(seed))["icnce"])
    features, states = _hf_views(method, batch)
    h_1, h_2 = states[0][-1][:, 0], states[1][-1][:, 0]
    c_1, c_2 = plain_cross_stream(method.encoder_1.backbone, method.encoder_2.backbone, *states,
                                  features["attention_mask"], (1, 2))
    from_h, from_c = gradients(cross_encoder_info_nce(h_1, h_2)), gradients(cross_encoder_info_nce(c_1, c_2))
    for name in names:
        expected = from_h[name] + from_c[name]
        tolerance = 1e-6 * float(expected.abs().max()) + 1e-12
        torch.testing.assert_close(got[name], expected, atol=tolerance, rtol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    first = "backbone.encoder.layer.0."
    for encoder, other in (("encoder_1.", "encoder_2."), ("encoder_2.", "encoder_1.")):
        own = [f"{encoder}{first}{part}.weight" for part in (
            "attention.self.query", "attention.self.key", "attention.output.dense", "attention.output.LayerNorm",
            "intermediate.dense", "output.dense", "output.LayerNorm")]
        for name in [*own, f"{other}{first}attention.self.value.weight"]:
            c_part = got[name] - from_h[name]
            assert c_part.abs().max() > 1e-3 * from_h[name].abs().max(), name


def test_jtcse_draws_r_once_per_step_from_the_run_generator(stage1):
    method = build_method(twin_config("jtcse", *stage1["bert"], "method_options.num_ca_layers=1")).train()
    context = ctx(9)
    method.loss_terms(method.collate(TEXTS), context)
    reference = ctx(9).generator
    draw_query_side(reference)
    assert torch.equal(context.generator.get_state(), reference.get_state())


def test_jtcse_rejects_a_cael_count_that_does_not_divide_the_depth(stage1):
    with pytest.raises(CselabError, match="does not divide the 2 layers"):
        build_method(twin_config("jtcse", *stage1["bert"], "method_options.num_ca_layers=3"))


@pytest.mark.parametrize("method_name", ["tncse", "jtcse"])
def test_twin_inference_is_the_sum_of_the_two_cls_vectors(stage1, tmp_path, method_name):
    extra = ["method_options.num_ca_layers=2"] if method_name == "jtcse" else []
    method = build_method(twin_config(method_name, *stage1["bert"], *extra))
    save_model(method.inference_model(), tmp_path / "twin")
    loaded = load_model(tmp_path / "twin")
    got = loaded.encode(TEXTS)
    expected = 0
    for path in stage1["bert"]:  # by hand: each saved stage-1 backbone, its tokenizer, CLS of the last layer
        from transformers import AutoModel, AutoTokenizer

        tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
        with torch.no_grad():
            for_sentence = [model(**tokenizer(t, return_tensors="pt")).last_hidden_state[0, 0] for t in TEXTS]
        expected = expected + torch.stack(for_sentence)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert len(list(loaded.parameters())) == 2 * len(list(method.encoder_1.parameters())), \
        "the saved twin is two plain encoders (with their MLPs), nothing of the cross branch"


def test_missing_mlp_is_a_clear_error_unless_the_backbone_pooler_is_allowed(stage1, tiny_bert_dir):
    with pytest.raises(CselabError, match="no trained MLP"):
        build_method(twin_config("tncse", stage1["bert"][0], tiny_bert_dir))
    method = build_method(twin_config("tncse", stage1["bert"][0], tiny_bert_dir,
                                      "method_options.allow_backbone_pooler=true")).train()
    assert method.encoder_2.head is None
    batch = method.collate(TEXTS)
    torch.manual_seed(0)
    views = method.twin_views(batch, with_pooler=True)
    pooler = method.encoder_2.backbone.pooler
    torch.testing.assert_close(views.p[1], pooler.activation(pooler.dense(views.h[1])))
    assert torch.isfinite(sum(method.loss_terms(batch, ctx()).values()))


def test_config_errors(stage1, tiny_bert_dir):
    with pytest.raises(CselabError, match="encoder_1 and encoder_2"):
        build_method(load_config(None, [], method="tncse"))
    with pytest.raises(CselabError, match="model.pooler must be cls"):
        build_method(twin_config("tncse", *stage1["bert"], "model.pooler=mean"))
    with pytest.raises(CselabError, match="different vocabularies"):
        build_method(twin_config("tncse", stage1["bert"][0], stage1["roberta"][0]))
    with pytest.raises(CselabError, match="no loss term"):
        build_method(twin_config("tncse", *stage1["bert"], "method_options.loss_weights={ictm: 1}"))


PRESETS = REPO_ROOT / "configs"


@pytest.mark.parametrize("name", ["cpu-minilm", "paper-bert-base", "paper-roberta-base"])
def test_tncse_and_jtcse_presets_share_one_stage1(name):
    """They name one stage-1 directory, so their stage-1 runs must be the same configuration (the pipeline refuses
    to reuse a directory holding a different one)."""
    plans = [plan_pipeline(load_config(PRESETS / method / f"{name}.yaml")) for method in ("tncse", "jtcse")]
    assert plans[0].stage1_dir == plans[1].stage1_dir
    for a, b in zip(plans[0].stage1, plans[1].stage1, strict=True):
        assert a.model_dump(mode="json") == b.model_dump(mode="json")


@pytest.mark.parametrize("family, dropout_tncse, pivots", [("bert", 0.00025, {"fr": 1.5e-5, "ru": 2.0e-5}),
                                                           ("roberta", 0.0175, {"nl": 1.5e-5, "zh": 1.25e-5})])
def test_twin_paper_presets(family, dropout_tncse, pivots):
    for method in ("tncse", "jtcse"):
        config = load_config(PRESETS / method / f"paper-{family}-base.yaml")
        # stage-2 dropout: TNCSE's reference values; JTCSE keeps the backbone's own
        assert config.model.dropout == (dropout_tncse if method == "tncse" else 0.1)
        # the HF Trainer's max_grad_norm 1.0 in stage 1; none in stage 2 (TNCSE's released stage-2 loop clips nothing)
        assert config.data.corpus == "data/wiki1m+sickr.txt" and config.train.grad_clip is None
        stage1 = plan_pipeline(config).stage1
        assert [(c.data.corpus, c.train.lr, c.train.batch_size, c.train.grad_clip) for c in stage1] == [
            (f"data/wiki1m+sickr.rtt-{pivot}.txt", lr, 64, 1.0) for pivot, lr in pivots.items()]


@pytest.mark.parametrize("preset", sorted(p.relative_to(PRESETS).as_posix() for p in PRESETS.glob("*/paper-*.yaml")))
def test_paper_presets_clip_gradients_like_the_hf_trainer(preset):
    config = load_config(PRESETS / preset)
    if config.method in ("tncse", "jtcse"):  # the Trainer ran stage 1; stage 2 is a plain loop without clipping
        assert [c.train.grad_clip for c in plan_pipeline(config).stage1] == [1.0, 1.0]
        assert config.train.grad_clip is None
    else:
        assert config.train.grad_clip == 1.0
