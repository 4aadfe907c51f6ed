"""The inference batch a memory budget allows (by hand), and the C allocator's settings (glibc only, once, and never
over a user's own MALLOC_* tunables)."""

import platform
from types import SimpleNamespace

import pytest

from cselab.runtime import allocator
from cselab.runtime.memory import ACTIVATION_BUDGET, inference_batch_size, inference_bytes_per_token

MPNET = SimpleNamespace(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)


def test_inference_bytes_of_mpnet_at_384_tokens_by_hand():
    # one layer at a time: 12 heads x 384 keys x 2 floats, and 4 x 768 + 2 x 3072 floats
    assert inference_bytes_per_token(MPNET, 384) == 12 * 384 * 2 * 4 + (4 * 768 + 2 * 3072) * 4 == 73_728


def test_inference_batch_is_cut_to_the_budget_and_the_heap_and_never_raised():
    per_sequence = 73_728 * 384
    assert ACTIVATION_BUDGET // per_sequence == 18  # the budget alone would allow 18 passages
    # one layer's scores, 12 x 384 x 384 floats = 6.75 MiB a passage: 4 stay under 32 MiB, 5 do not
    assert inference_batch_size(64, MPNET, 384) == 4
    assert inference_batch_size(64, MPNET, 64) == 64  # short lines: neither limit binds (18 KiB of scores a line)
    assert inference_batch_size(2, MPNET, 384) == 2  # a smaller batch asked for stays
    assert inference_batch_size(64, MPNET, 384, budget=1) == 1


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(allocator, "_TUNED", None)
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_glibc_gets_both_thresholds_once(fresh):
    assert allocator.tune_allocator() == {"mmap_threshold": 32 * 2**20, "trim_threshold": 512 * 2**20}
    assert allocator.tune_allocator() is allocator.tune_allocator()  # once per process


def test_a_users_own_malloc_tunables_are_left_alone(fresh, monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    assert allocator.tune_allocator() == {}
