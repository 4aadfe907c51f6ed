"""Speed levers that must not change the maths: each against the slow path it replaces, or a hand computation."""

import math

import pytest
import torch

from cselab.config.run_config import load_config
from cselab.training.trainer import build_optimizer


def _adamw_by_hand(params, grads_per_step, lr, wd, betas=(0.9, 0.999), eps=1e-8):
    """AdamW (decoupled weight decay, bias-corrected moments) element by element, in float64."""
    values = [p.detach().double().flatten().tolist() for p in params]
    m = [[0.0] * len(v) for v in values]
    v2 = [[0.0] * len(v) for v in values]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            flat = g.double().flatten().tolist()
            for j, gj in enumerate(flat):
                values[i][j] *= 1 - lr * wd
                m[i][j] = betas[0] * m[i][j] + (1 - betas[0]) * gj
                v2[i][j] = betas[1] * v2[i][j] + (1 - betas[1]) * gj * gj
                m_hat = m[i][j] / (1 - betas[0] ** t)
                v_hat = v2[i][j] / (1 - betas[1] ** t)
                values[i][j] -= lr * m_hat / (math.sqrt(v_hat) + eps)
    return [torch.tensor(v, dtype=torch.float64).view(p.shape) for v, p in zip(values, params, strict=True)]


@pytest.mark.parametrize("fused", [True, False])
def test_adamw_update_matches_a_hand_computation(fused):
    torch.manual_seed(0)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    start = [p.detach().clone() for p in params]
    grads_per_step = [[torch.randn(s) for s in shapes] for _ in range(4)]
    tc = load_config(None, ["train.lr=0.01", "train.weight_decay=0.1", f"train.fused_adamw={fused}"]).train
    optimizer = build_optimizer(params, tc)
    assert optimizer.defaults["fused"] is (True if fused else None)
    for grads in grads_per_step:
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        optimizer.step()
    expected = _adamw_by_hand(start, grads_per_step, lr=0.01, wd=0.1)
    for p, e in zip(params, expected, strict=True):
        torch.testing.assert_close(p.detach().double(), e, rtol=1e-5, atol=1e-6)


def test_fused_and_per_tensor_adamw_agree_on_a_model():
    torch.manual_seed(1)
    models = [torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [build_optimizer(list(m.parameters()), load_config(None, ["train.lr=0.003", "train.weight_decay=0.01",
                                                                            f"train.fused_adamw={f}"]).train)
                  for m, f in zip(models, (True, False), strict=True)]
    for _ in range(5):
        x = torch.randn(6, 8)
        for model, optimizer in zip(models, optimizers, strict=True):
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# -- dropout masks ------------------------------------------------------------------------------------
def _lanes_by_hand(seed: int, n: int) -> list[int]:
    """The 15-bit lanes of ``n`` elements from the same random words, split with Python integers."""
    torch.manual_seed(seed)
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_().tolist()
    lanes = []
    for i in range(n):
        word = words[i // 4] % (1 << 64)  # two's complement -> unsigned
        lanes.append((word >> (16 * (i % 4))) & 0x7FFF)  # little-endian int16 lanes, sign bit dropped
    return lanes


def test_bits_dropout_matches_a_per_element_computation():
    from cselab.models.dropout import bits_dropout

    x = torch.randn(3, 7, requires_grad=True)
    torch.manual_seed(5)
    y = bits_dropout(x, 0.1)
    lanes = _lanes_by_hand(5, x.numel())
    threshold = round(0.1 * 32768)
    assert threshold == 3277
    scale = 32768 / (32768 - 3277)
    expected = [v * scale if lane >= threshold else 0.0 for v, lane in zip(x.detach().flatten().tolist(), lanes,
                                                                            strict=True)]
    torch.testing.assert_close(y.detach().flatten(), torch.tensor(expected))
    y.sum().backward()
    torch.testing.assert_close(x.grad.flatten(), torch.tensor([scale if lane >= threshold else 0.0 for lane in lanes]))


def test_bits_dropout_drops_p_of_the_elements_and_keeps_the_mean():
    from cselab.models.dropout import bits_dropout

    torch.manual_seed(0)
    x = torch.ones(1_000_000)
    y = bits_dropout(x, 0.1)
    dropped = float((y == 0).float().mean())
    # binomial sd of the fraction: sqrt(0.1 * 0.9 / 1e6) = 0.0003
    assert abs(dropped - 3277 / 32768) < 0.0015
    assert abs(float(y.mean()) - 1.0) < 0.005
    assert torch.equal(bits_dropout(x, 0.0), x)


def _tiny_backbone(path, implementation="sdpa"):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, attn_implementation=implementation)


def _batch():
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def test_sdpa_attention_equals_eager_attention(tiny_bert_dir):
    eager, sdpa = _tiny_backbone(tiny_bert_dir, "eager").eval(), _tiny_backbone(tiny_bert_dir, "sdpa").eval()
    assert sdpa.config._attn_implementation == "sdpa"
    with torch.no_grad():
        a, b = eager(**_batch()).last_hidden_state, sdpa(**_batch()).last_hidden_state
    mask = _batch()["attention_mask"].bool()
    torch.testing.assert_close(a[mask], b[mask], rtol=1e-5, atol=1e-5)


def test_bits_attention_is_the_attention_formula_with_bits_masks():
    from cselab.models.dropout import bits_attention

    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 4, 5) for _ in range(3))
    allowed = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    allowed[1, :, :, 3] = False  # the second row's last token is padding
    module = torch.nn.Module()
    # without dropout: PyTorch's SDPA
    out, _ = bits_attention(module, q, k, v, allowed, dropout=0.0, scaling=0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.5)
    torch.testing.assert_close(out, expected.transpose(1, 2))
    # with dropout: softmax of the masked scores, each weight kept (and rescaled) by its 15-bit lane
    torch.manual_seed(9)
    out, _ = bits_attention(module, q, k, v, allowed, dropout=0.25, scaling=0.5)
    lanes = torch.tensor(_lanes_by_hand(9, 2 * 3 * 4 * 4)).view(2, 3, 4, 4)
    keep = (lanes >= round(0.25 * 32768)).float() * (32768 / (32768 - 8192))
    scores = (q @ k.transpose(2, 3)) * 0.5
    scores[1, :, :, 3] = float("-inf")
    expected = (torch.softmax(scores, dim=-1) * keep) @ v
    torch.testing.assert_close(out, expected.transpose(1, 2))


def test_torch_masks_are_torch_stream_bit_for_bit(tiny_bert_dir, sts_home, tmp_path):
    from cselab.models.dropout import BitsDropout
    from cselab.training.trainer import Trainer
    from tests.helpers import write_corpus

    corpus = write_corpus(tmp_path / "corpus.txt")
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=8",
                                f"train.output_dir={tmp_path / 'run'}", "model.pooler=mean",
                                "model.dropout_masks=torch"])
    assert load_config(None, []).model.dropout_masks == "bits"  # the default; the research presets pin torch
    trainer = Trainer(config)
    backbone = trainer.method.encoder.backbone.train()
    assert not any(isinstance(m, BitsDropout) for m in backbone.modules())
    reference = _tiny_backbone(tiny_bert_dir).train()  # plain HF model: torch's nn.Dropout and SDPA dropout
    torch.manual_seed(3)
    ours = backbone(**_batch()).last_hidden_state
    torch.manual_seed(3)
    theirs = reference(**_batch()).last_hidden_state
    assert torch.equal(ours, theirs)


def test_bits_masks_switch_every_dropout_and_only_in_training(tiny_bert_dir, tmp_path):
    from cselab.models.dropout import BITS_ATTENTION, BitsDropout, use_dropout_masks

    model, plain = _tiny_backbone(tiny_bert_dir), _tiny_backbone(tiny_bert_dir)
    n_dropout = sum(type(m) is torch.nn.Dropout for m in model.modules())
    assert use_dropout_masks(model, "bits") == n_dropout + 1  # every nn.Dropout and the attention implementation
    assert sum(type(m) is torch.nn.Dropout for m in model.modules()) == 0
    assert sum(isinstance(m, BitsDropout) for m in model.modules()) == n_dropout
    assert model.config._attn_implementation == BITS_ATTENTION
    model.eval(), plain.eval()
    with torch.no_grad():  # no dropout: exactly the same function
        torch.testing.assert_close(model(**_batch()).last_hidden_state, plain(**_batch()).last_hidden_state)
    model.train()
    torch.manual_seed(4)
    first = model(**_batch()).last_hidden_state
    torch.manual_seed(4)
    assert torch.equal(first, model(**_batch()).last_hidden_state), "bits masks follow the seed"
    torch.manual_seed(4)
    assert not torch.equal(first, plain.train()(**_batch()).last_hidden_state), "and differ from torch's stream"
    # a saved model does not carry the training-only attention implementation
    model.save_pretrained(tmp_path / "saved")
    assert BITS_ATTENTION not in (tmp_path / "saved" / "config.json").read_text()
    assert use_dropout_masks(plain, "torch") == 0


# -- length-grouped batches ---------------------------------------------------------------------------
def test_length_grouping_regroups_each_window_and_keeps_its_sentences():
    from cselab.training.length_grouping import group_window
    from cselab.training.trainer import epoch_order

    examples = ["x" * (1 + (7 * i) % 23) for i in range(50)]  # lengths 1..23, mixed
    order = epoch_order(len(examples), seed=3, epoch=0)
    batch, window = 4, 3
    seen = []
    for position in range(len(examples) // batch):
        grouped = group_window(order, examples, position=position, batch_size=batch, window=window, seed=3, epoch=0)
        start = (position // window) * window * batch
        end = min(start + window * batch, 48)
        # the window holds the same sentences as the shuffled order; everything outside it is untouched
        assert sorted(grouped[start:end].tolist()) == sorted(order[start:end].tolist())
        assert torch.equal(grouped[:start], order[:start]) and torch.equal(grouped[end:], order[end:])
        # its batches are consecutive runs of the window's lengths sorted by hand
        lengths = sorted(len(examples[i]) for i in order[start:end].tolist())
        runs = [lengths[k : k + batch] for k in range(0, len(lengths), batch)]
        mine = grouped[position * batch : (position + 1) * batch].tolist()
        assert sorted(len(examples[i]) for i in mine) in runs
        seen += mine
        # the same (seed, epoch, window) always gives the same batches
        again = group_window(order, examples, position=position, batch_size=batch, window=window, seed=3, epoch=0)
        assert torch.equal(grouped, again)
    assert sorted(seen) == sorted(order[:48].tolist())  # each sentence once per epoch


def test_length_grouping_cuts_padding_in_the_trainer(tiny_bert_dir, sts_home, tmp_path):
    from cselab.training.trainer import Trainer
    from tests.helpers import write_corpus

    corpus = write_corpus(tmp_path / "corpus.txt")
    padded = {}
    for window in ("null", 4):
        config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=8",
                                    f"train.output_dir={tmp_path / 'run'}", f"train.length_group_window={window}"])
        trainer = Trainer(config)
        masks = [trainer.batch_at(step)["attention_mask"] for step in range(8)]
        padded[window] = sum(int((m == 0).sum()) for m in masks)
    assert padded[4] < 0.6 * padded["null"]  # character length orders tokens closely, not exactly


def test_length_grouping_needs_sentences():
    from cselab.errors import CselabError
    from cselab.training.length_grouping import group_window

    with pytest.raises(CselabError, match="sentences"):
        group_window(torch.arange(4), [("a", "b")] * 4, position=0, batch_size=2, window=2, seed=0, epoch=0)


# -- CoT-BERT: the last layer only at the read rows ---------------------------------------------------
COT_SENTENCES = ["a man plays the guitar .", "the dog runs", "two women walk in the park with a big dog .",
                 "the cat eats", "a child rides a horse on the road"]


def _cot(model_dir, *overrides):
    from cselab.methods.base import build_method

    family = "roberta" if "roberta" in str(model_dir) else "bert"
    config = load_config(None, [f"model.backbone={model_dir}", "model.pooler=mask", "model.max_length=16",
                                "model.dropout=0.0", f"method_options.templates={family}", *overrides],
                         method="cot-bert")
    torch.manual_seed(0)
    return build_method(config)


@pytest.mark.parametrize("masks", ["torch", "bits"])
def test_cot_bert_read_rows_only_is_the_same_loss_and_gradients(tiny_model_dir, masks):
    from cselab.methods.base import StepContext
    from cselab.models.backbone import supports_rows_at
    from cselab.models.dropout import use_dropout_masks
    from cselab.runtime.distributed import DistributedContext

    old, new = _cot(tiny_model_dir), _cot(tiny_model_dir, "method_options.read_rows_only=true")
    new.load_state_dict(old.state_dict())
    for method in (old, new):
        use_dropout_masks(method, masks)
        method.train()  # dropout 0.0: training mode, deterministic
    assert supports_rows_at(new.encoder.backbone)
    batch = old.collate(COT_SENTENCES)
    ctx = StepContext(dist=DistributedContext(), step=0, generator=torch.Generator())
    r_old, r_new = old.representations(batch), new.representations(batch)
    torch.testing.assert_close(r_new, r_old, atol=2e-5, rtol=1e-4)
    loss_old = old.loss_terms(batch, ctx)["extended_info_nce"]
    loss_new = new.loss_terms(batch, ctx)["extended_info_nce"]
    torch.testing.assert_close(loss_new, loss_old, atol=1e-5, rtol=1e-5)
    loss_old.backward(), loss_new.backward()
    for (name, a), (_, b) in zip(old.named_parameters(), new.named_parameters(), strict=True):
        if a.grad is None:
            assert b.grad is None or not b.grad.any(), name
            continue
        torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-3, msg=name)


def test_cot_bert_read_rows_only_with_dropout_keeps_the_training_graph(tiny_bert_dir):
    method = _cot(tiny_bert_dir, "method_options.read_rows_only=true", "model.dropout=0.3")
    method.train()
    batch = method.collate(COT_SENTENCES)
    a, b = method.representations(batch), method.representations(batch)
    assert a.requires_grad and not torch.allclose(a, b), "dropout is on in the computed rows"
    a.sum().backward()
    last = method.encoder.backbone.encoder.layer[-1]
    assert last.output.dense.weight.grad.abs().sum() > 0 and last.attention.self.query.weight.grad.abs().sum() > 0
