"""The inference batch a memory budget allows (by hand), and the C allocator's settings (glibc only, once, and never
over a user's own MALLOC_* tunables)."""

import os
import platform
from types import SimpleNamespace

import pytest

from cselab.runtime import allocator, memory
from cselab.runtime.memory import ACTIVATION_BUDGET, inference_batch_size, inference_batches, inference_bytes_per_token

MPNET = SimpleNamespace(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)


def test_inference_bytes_of_mpnet_at_384_tokens_by_hand():
    # one layer at a time: 12 heads x 384 keys x 2 floats, and 4 x 768 + 2 x 3072 floats
    assert inference_bytes_per_token(MPNET, 384) == 12 * 384 * 2 * 4 + (4 * 768 + 2 * 3072) * 4 == 73_728


def test_inference_batch_is_cut_to_the_budget_and_the_heap_and_never_raised():
    per_sequence = 73_728 * 384
    assert ACTIVATION_BUDGET // per_sequence == 9  # the budget alone would allow 9 passages
    # one layer's scores, 12 x 384 x 384 floats = 6.75 MiB a passage: 4 stay under 32 MiB, 5 do not
    assert inference_batch_size(64, MPNET, 384) == 4
    assert inference_batch_size(64, MPNET, 64) == 64  # short lines: neither limit binds (18 KiB of scores a line)
    assert inference_batch_size(2, MPNET, 384) == 2  # a smaller batch asked for stays
    assert inference_batch_size(64, MPNET, 384, budget=1) == 1


def test_inference_batches_hold_each_batch_to_its_own_width():
    assert memory.INFERENCE_BUDGET == 32 * 2**20
    # by hand, at 32 MiB: a 384-token passage holds 73,728 x 384 = 28.3 MB (1 a batch); one of 200 tokens
    # (12 x 200 x 8 + 36,864) x 200 = 11.2 MB (2); a line of 20, 775,680 bytes (43)
    lengths = [10, 384, 5, 384, 200, 384, 384, 384]  # longest first, ties in the order given
    assert list(inference_batches(lengths, 64, MPNET)) == [[1], [3], [5], [6], [7], [4, 0], [2]]
    assert [len(b) for b in inference_batches([20] * 70, 64, MPNET)] == [43, 27]
    assert [len(b) for b in inference_batches([20] * 70, 16, MPNET)] == [16] * 4 + [6]  # never more than asked
    assert [len(b) for b in inference_batches([20] * 70, 64, None)] == [64, 6]  # no config known: as asked
    assert list(inference_batches([], 64, MPNET)) == []


def test_an_encoder_runs_long_texts_a_few_at_a_time_with_the_same_vectors(tiny_bert_dir, monkeypatch):
    import torch

    from cselab.models.sentence_model import load_model

    model = encoder = load_model(str(tiny_bert_dir), pooler="mean")
    texts = ["word " * 40, "a b", "word " * 30 + "end", "c", "word " * 35, "d e f"]
    alone = torch.cat([model.encode([t], batch_size=1) for t in texts])  # no padding at all: the reference
    # a budget that lets 2 texts of 20 tokens or more through at once, and every shorter batch whole
    monkeypatch.setattr(memory, "inference_batch_size",
                        lambda asked, config, width, budget: 2 if width >= 20 else asked)
    seen = []
    forward = encoder.forward
    monkeypatch.setattr(encoder, "forward", lambda features, **kw: seen.append(len(features["input_ids"]))
                        or forward(features, **kw))
    batched = model.encode(texts, batch_size=64)
    # three long texts, two a batch: the second batch starts at the third long one (2), the third is short (whole)
    assert seen == [2, 2, 2]
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-4)


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(allocator, "_TUNED", None)
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_glibc_gets_both_thresholds_once(fresh):
    assert allocator.tune_allocator() == {"mmap_threshold": 32 * 2**20, "trim_threshold": 256 * 2**20}
    assert allocator.tune_allocator() is allocator.tune_allocator()  # once per process


def test_a_users_own_malloc_tunables_are_left_alone(fresh, monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    assert allocator.tune_allocator() == {}


def test_onednn_keeps_64_primitives_unless_the_user_said(monkeypatch):
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY"):
        monkeypatch.delenv(name, raising=False)
    assert allocator.bound_onednn_cache() == 64
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024")
    assert allocator.bound_onednn_cache() is None
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "1024"
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    monkeypatch.setenv("DNNL_PRIMITIVE_CACHE_CAPACITY", "8")
    assert allocator.bound_onednn_cache() is None
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
