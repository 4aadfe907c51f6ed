"""Gradient caching (train.chunk_size): a cached step's parameter gradients equal the plain step's, for the
in-batch-negative losses (SimCSE, SimCSE++ with DCL's whole-batch statistics, IFCL with its queue), and the
dropout masks of each chunk's second pass are those of its first."""

import pytest
import torch

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.training.trainer import Trainer
from tests.helpers import write_corpus


def _trainer(tmp_path, name, overrides):
    config = load_config(None, [*overrides, f"train.output_dir={tmp_path / name}", "train.eval_at_start=false"])
    return Trainer(config)


def _grads(trainer):
    return {n: p.grad.clone() for n, p in trainer.method.named_parameters() if p.grad is not None}


def _assert_same(cached, plain, atol=1e-6, rtol=1e-5):
    assert cached.keys() == plain.keys()
    for name in plain:
        assert torch.allclose(cached[name], plain[name], atol=atol, rtol=rtol), (
            name, float((cached[name] - plain[name]).abs().max()))
    assert max(float(g.abs().max()) for g in plain.values()) > 1e-4


def _pair(tmp_path, tiny_bert_dir, extra, corpus=True):
    data = [f"data.corpus={write_corpus(tmp_path / 'corpus.txt', n=128)}"] if corpus else []
    base = [f"model.backbone={tiny_bert_dir}", *data, "train.batch_size=64", "model.max_length=16",
            "model.dropout=0.0", "train.seed=5", *extra]
    plain = _trainer(tmp_path, "plain", base)
    cached = _trainer(tmp_path, "cached", [*base, "train.chunk_size=16"])
    cached.method.load_state_dict(plain.method.state_dict())  # the same weights (the MLP head is drawn per run)
    return plain, cached


@pytest.mark.parametrize("extra", [
    ["method=simcse"],
    ["method=simcse++"],  # off-dropout InfoNCE + DCL: DCL's per-dimension mean/variance over the whole batch
])
def test_cached_b64_in_chunks_of_16_equals_the_plain_b64_step(tiny_bert_dir, tmp_path, extra):
    plain, cached = _pair(tmp_path, tiny_bert_dir, extra)
    batch = plain.batch_at(0)
    plain_values = plain.compute_gradients(batch)
    cached_values = cached.compute_gradients(batch)
    assert torch.allclose(cached_values["loss"], plain_values["loss"], atol=1e-6)
    _assert_same(_grads(cached), _grads(plain))


def test_cached_ifcl_step_with_queue_equals_the_plain_step(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "en.txt", n=128)
    german = write_corpus(tmp_path / "de.txt", n=128, seed=1)
    extra = ["method=ifcl", f"method_options.parallel.source={corpus}", f"method_options.parallel.target={german}",
             "method_options.queue_size=128", "train.length_group_window=null"]  # the batches it was tuned on
    plain, cached = _pair(tmp_path, tiny_bert_dir, extra, corpus=False)
    for step in range(2):  # the second step reads the 64 anchors the first one queued
        batch = plain.batch_at(step)
        plain_values, cached_values = plain.compute_gradients(batch), cached.compute_gradients(batch)
        assert torch.allclose(cached_values["loss"], plain_values["loss"], atol=1e-6)
        _assert_same(_grads(cached), _grads(plain))
        for trainer in (plain, cached):
            trainer.optimizer.step()
            trainer.optimizer.zero_grad(set_to_none=True)
            trainer.method.after_step()
        assert torch.allclose(cached.method.queue.embeddings, plain.method.queue.embeddings, atol=1e-6)
    assert len(plain.method.queue) == 128


def test_second_pass_replays_each_chunks_dropout_masks(tiny_bert_dir, tmp_path):
    """With dropout on, the cached step equals a step that keeps every chunk's graph (same random stream), which
    only holds if each chunk's second pass draws the masks of its first."""
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    overrides = [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=32",
                 "model.max_length=16", "model.dropout=0.3", "train.chunk_size=8"]
    trainer = _trainer(tmp_path, "run", overrides)
    method = trainer.method.train()  # dropout on (run() does this; from_pretrained leaves eval mode)
    batch = trainer.batch_at(0)
    chunks = method.split_batch(batch, 8)
    assert len(chunks) == 4 and [len(c["input_ids"]) for c in chunks] == [8] * 4

    torch.manual_seed(123)
    parts = [method.embed(chunk) for chunk in chunks]  # graphs kept, masks drawn in this order
    embeddings = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    reference_loss = method.weighted_loss(method.loss_from_embeddings(embeddings, trainer._context()))
    reference_loss.backward()
    reference = _grads(trainer)
    trainer.optimizer.zero_grad(set_to_none=True)

    torch.manual_seed(123)
    values = trainer.compute_gradients(batch)
    assert torch.allclose(values["loss"], reference_loss.detach(), atol=1e-6)
    _assert_same(_grads(trainer), reference)
    # the masks matter: another random stream gives another gradient
    trainer.optimizer.zero_grad(set_to_none=True)
    torch.manual_seed(124)
    trainer.compute_gradients(batch)
    other = _grads(trainer)
    assert not all(torch.allclose(other[n], reference[n], atol=1e-6) for n in reference)


def test_chunk_size_on_a_method_without_the_split_is_one_error(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    with pytest.raises(CselabError, match="train.chunk_size: method 'cot-bert'"):
        _trainer(tmp_path, "run", ["method=cot-bert", f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}",
                                   "model.pooler=mask", "train.batch_size=8", "train.chunk_size=4"])
