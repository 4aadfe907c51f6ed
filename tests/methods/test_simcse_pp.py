"""SimCSE++: the dropout switch, the off-dropout third pass, the two loss terms alone and together, the loop."""


import pytest
import torch
import yaml

from cselab.config.run_config import load_config
from cselab.losses import dimension_contrastive_loss, info_nce, offdropout_info_nce
from cselab.methods import build_method
from cselab.methods.base import StepContext
from cselab.methods.simcse import duplicate
from cselab.models.dropout import dropout_disabled
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model
from cselab.runtime.distributed import DistributedContext
from tests.helpers import REPO_ROOT, run_whole_loop, write_corpus

CONFIGS = REPO_ROOT / "configs"
SENTENCES = ["a man plays the guitar .", "the dog runs on the road", "two women walk in the park", "a cat sits",
             "the bird eats food", "a child rides a horse"]


def ctx() -> StepContext:
    return StepContext(dist=DistributedContext(), step=0, generator=torch.Generator())


def make_method(model_dir, *overrides, dropout=0.1):
    config = load_config(None, [f"model.backbone={model_dir}", "model.max_length=16", f"model.dropout={dropout}",
                                *overrides], method="simcse++")
    method = build_method(config)
    method.train()
    return method


def count_backbone_calls(monkeypatch, encoder):
    """Record the number of rows of every backbone forward call."""
    rows = []
    original = encoder.backbone.forward

    def counting(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows.append(ids.shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(encoder.backbone, "forward", counting)
    return rows


# -- dropout_disabled ---------------------------------------------------------------------------------
def test_dropout_disabled_gives_the_deterministic_network_and_restores_dropout(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="cls", with_head=True, dropout=0.3)
    features = encoder.tokenize(SENTENCES)
    encoder.eval()
    with torch.no_grad():
        reference = encoder(features, apply_head=True)
    encoder.train()
    with torch.no_grad():
        assert not torch.allclose(encoder(features), encoder(features)), "dropout should be on in train mode"
        with dropout_disabled(encoder):
            a, b = encoder(features, apply_head=True), encoder(features, apply_head=True)
        after = encoder(features, apply_head=True), encoder(features, apply_head=True)
    assert torch.equal(a, b)
    assert torch.allclose(a, reference, atol=1e-6)
    assert all(m.training for m in encoder.modules()), "every module must be back in training mode"
    assert not torch.allclose(*after), "dropout must be back on after the block"


def test_dropout_disabled_covers_attention_probability_dropout(tiny_bert_dir):
    """HF attention applies its dropout probability by its OWN training flag: switching only nn.Dropout
    modules off would leave it on. Here only attention dropout is non-zero."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(tiny_bert_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.5)
    model = AutoModel.from_pretrained(tiny_bert_dir, config=config)
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    model.train()
    with torch.no_grad():
        assert not torch.allclose(model(ids).last_hidden_state, model(ids).last_hidden_state)
        with dropout_disabled(model):
            a, b = model(ids).last_hidden_state, model(ids).last_hidden_state
    assert torch.equal(a, b)


def test_dropout_disabled_restores_mixed_flags_even_on_error(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, dropout=0.1)
    encoder.train()
    encoder.backbone.encoder.layer[0].eval()  # a partly frozen model keeps its eval part
    before = {name: m.training for name, m in encoder.named_modules()}
    with pytest.raises(RuntimeError), dropout_disabled(encoder):
        assert not any(m.training for m in encoder.modules())
        raise RuntimeError("boom")
    assert {name: m.training for name, m in encoder.named_modules()} == before


def test_dropout_disabled_keeps_gradients(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, dropout=0.1)
    encoder.train()
    with dropout_disabled(encoder):
        out = encoder(encoder.tokenize(SENTENCES[:2]))
    assert out.requires_grad
    (out * torch.randn_like(out)).sum().backward()  # a plain sum of a LayerNorm output has no gradient
    assert encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


# -- the method -----------------------------------------------------------------------------------------
def test_third_pass_is_dropout_free_differentiable_and_restores_dropout(tiny_bert_dir, monkeypatch):
    import cselab.methods.simcse_pp as module

    method = make_method(tiny_bert_dir, dropout=0.2)
    seen = []

    def spy(z1, z2, z0, *args, **kwargs):
        seen.append(z0)
        return offdropout_info_nce(z1, z2, z0, *args, **kwargs)

    monkeypatch.setattr(module, "offdropout_info_nce", spy)
    batch = method.collate(SENTENCES)
    method.loss_terms(batch, ctx())
    method.loss_terms(batch, ctx())
    z0_first, z0_second = seen
    assert torch.equal(z0_first, z0_second), "two dropout-free passes must agree exactly"
    method.eval()
    with torch.no_grad():
        expected = method.encoder(batch, apply_head=True)
    method.train()
    assert torch.allclose(z0_first, expected, atol=1e-6), "z0 = the eval-mode (dropout-free) encoding, with the MLP"
    assert all(m.training for m in method.modules()), "dropout must be restored after the third pass"
    assert z0_first.requires_grad
    (z0_first * torch.randn_like(z0_first)).sum().backward()
    assert method.encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_loss_equals_the_loss_functions_on_independently_computed_views(tiny_bert_dir):
    """Replay the dropout masks with the same RNG seed and recompute every view by hand."""
    method = make_method(tiny_bert_dir, "method_options.m=0.7", "method_options.offdropout_scale=positive",
                         "method_options.dcl_temperature=2.0", "method_options.temperature=0.1", dropout=0.1)
    batch = method.collate(SENTENCES)
    torch.manual_seed(123)
    terms = method.loss_terms(batch, ctx())
    torch.manual_seed(123)
    z1, z2 = method.encoder(duplicate(batch), apply_head=True).chunk(2)
    method.eval()
    z0 = method.encoder(batch, apply_head=True)
    method.train()
    assert not torch.allclose(z1, z0), "the dropout views must differ from the off-dropout view"
    assert set(terms) == {"info_nce", "dcl"}
    torch.testing.assert_close(terms["info_nce"], offdropout_info_nce(z1, z2, z0, 0.1, m=0.7, scale="positive"))
    torch.testing.assert_close(terms["dcl"], dimension_contrastive_loss(z1, z2, 2.0))
    assert method.weights == {"info_nce": 1.0, "dcl": 0.1}
    torch.testing.assert_close(method.weighted_loss(terms), terms["info_nce"] + 0.1 * terms["dcl"])


def test_deterministic_model_loss_by_hand(tiny_model_dir):
    """Dropout 0: all three views are the same encoding z, computed here independently."""
    method = make_method(tiny_model_dir, dropout=0.0)
    batch = method.collate(SENTENCES)
    terms = method.loss_terms(batch, ctx())
    z = method.encoder(batch, apply_head=True)
    torch.testing.assert_close(terms["info_nce"], offdropout_info_nce(z, z, z, 0.05, m=0.9, scale="negatives"))
    torch.testing.assert_close(terms["dcl"], dimension_contrastive_loss(z, z, 5.0))


def test_dcl_only_row_is_simcse_info_nce_plus_lambda_dcl(tiny_bert_dir, monkeypatch):
    method = make_method(tiny_bert_dir, "method_options.off_dropout=false", dropout=0.1)
    rows = count_backbone_calls(monkeypatch, method.encoder)
    batch = method.collate(SENTENCES)
    torch.manual_seed(7)
    terms = method.loss_terms(batch, ctx())
    assert rows == [2 * len(SENTENCES)], "no third pass without off-dropout"
    torch.manual_seed(7)
    z1, z2 = method.encoder(duplicate(batch), apply_head=True).chunk(2)
    torch.testing.assert_close(terms["info_nce"], info_nce(z1, z2, 0.05))
    torch.testing.assert_close(terms["dcl"], dimension_contrastive_loss(z1, z2, 5.0))
    torch.testing.assert_close(method.weighted_loss(terms),
                               info_nce(z1, z2, 0.05) + 0.1 * dimension_contrastive_loss(z1, z2, 5.0))


def test_off_info_only_row_computes_no_dcl(tiny_bert_dir, monkeypatch):
    import cselab.methods.simcse_pp as module

    method = make_method(tiny_bert_dir, "method_options.loss_weights.dcl=0", dropout=0.1)
    monkeypatch.setattr(module, "dimension_contrastive_loss", lambda *a, **k: pytest.fail("DCL computed while off"))
    rows = count_backbone_calls(monkeypatch, method.encoder)
    batch = method.collate(SENTENCES)
    torch.manual_seed(5)
    terms = method.loss_terms(batch, ctx())
    assert rows == [2 * len(SENTENCES), len(SENTENCES)], "the 2B dropout pass, then the B off-dropout pass"
    assert set(terms) == {"info_nce"}
    torch.manual_seed(5)
    z1, z2 = method.encoder(duplicate(batch), apply_head=True).chunk(2)
    method.eval()
    z0 = method.encoder(batch, apply_head=True)
    torch.testing.assert_close(method.weighted_loss(terms), offdropout_info_nce(z1, z2, z0, 0.05, m=0.9))


def test_loss_weights_merge_over_defaults_and_bad_options_fail(tiny_bert_dir):
    from cselab.errors import CselabError

    assert make_method(tiny_bert_dir, "method_options.loss_weights.info_nce=2").weights == {"info_nce": 2.0, "dcl": 0.1}
    with pytest.raises(CselabError, match="offdropout_scale"):
        make_method(tiny_bert_dir, "method_options.offdropout_scale=both")
    with pytest.raises(CselabError, match="no loss term 'off_info'"):
        make_method(tiny_bert_dir, "method_options.loss_weights.off_info=1")


@pytest.mark.parametrize("variant", ["", "method_options.off_dropout=false", "method_options.loss_weights.dcl=0"])
def test_whole_loop(tiny_model_dir, sts_home, tmp_path, variant):
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = load_config(None, [
        f"model.backbone={tiny_model_dir}", f"data.corpus={corpus}", f"train.output_dir={tmp_path / 'run'}",
        "train.batch_size=8", "train.max_steps=4", "train.eval_every=2", "train.lr=1e-3", "train.log_every=1",
        "model.max_length=16", *([variant] if variant else []),
    ], method="simcse++")
    _, log = run_whole_loop(config, steps=4)
    losses = [r for r in log if "loss" in r]
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(r["loss"])) for r in losses)
    assert ("dcl" in losses[0]) == ("dcl=0" not in variant)
    best = load_model(tmp_path / "run" / "best")
    assert best.head is not None and best.pooler == "cls"
    assert best.encode(SENTENCES[:2]).shape == (2, best.hidden_size)


# -- configurations -----------------------------------------------------------------------------------------
def _cpu_protocol(path):
    raw = yaml.safe_load(path.read_text())
    raw["train"].pop("output_dir")
    return raw


@pytest.mark.parametrize("name", ["cpu-minilm.yaml", "cpu-minilm-off-info.yaml", "cpu-minilm-dcl.yaml"])
def test_cpu_configs_share_the_simcse_protocol(name):
    """Same budget, data order, seed and model as the SimCSE CPU row; only the method part differs."""
    ours, simcse = _cpu_protocol(CONFIGS / "simcse_pp" / name), _cpu_protocol(CONFIGS / "simcse" / "cpu-minilm.yaml")
    for section in ("model", "data", "train"):
        assert ours[section] == simcse[section], section
    assert ours["method"] == "simcse++"


def test_cpu_ablation_rows_are_what_they_say():
    rows = {name: load_config(CONFIGS / "simcse_pp" / f"{name}.yaml").method_options
            for name in ("cpu-minilm", "cpu-minilm-off-info", "cpu-minilm-dcl")}
    assert rows["cpu-minilm"].get("off_dropout", True) and rows["cpu-minilm"]["loss_weights"]["dcl"] == 0.1
    assert rows["cpu-minilm-off-info"]["loss_weights"]["dcl"] == 0
    assert rows["cpu-minilm-dcl"]["off_dropout"] is False and rows["cpu-minilm-dcl"]["loss_weights"]["dcl"] == 0.1
