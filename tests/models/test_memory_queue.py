"""HippocampusQueue: FIFO order (newest first), overflow, forgetting coefficients, no gradient,
state round-trip, and use with the hippocampus loss."""

from __future__ import annotations

import io
import math

import pytest
import torch

from cselab.losses import hippocampus_info_nce
from cselab.models.memory_queue import HippocampusQueue


def batch(start: int, n: int, dim: int = 2) -> torch.Tensor:
    """Rows whose first column is start, start+1, ... so that order can be read back."""
    first = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(1)
    return torch.cat([first, torch.full((n, dim - 1), -1.0)], dim=1)


def ids(queue: HippocampusQueue) -> list[int]:
    return [int(v) for v in queue.embeddings[:, 0].tolist()]


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, "4"])
def test_rejects_bad_capacity(capacity):
    with pytest.raises(ValueError, match="capacity"):
        HippocampusQueue(capacity)


def test_rejects_bad_dim_and_width():
    with pytest.raises(ValueError, match="dim"):
        HippocampusQueue(4, dim=0)
    q = HippocampusQueue(4, dim=3)
    with pytest.raises(ValueError, match="width 3"):
        q.enqueue(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="2-D"):
        q.enqueue(torch.zeros(3))


def test_empty_queue():
    q = HippocampusQueue(416, dim=8)
    assert len(q) == 0
    assert q.embeddings.shape == (0, 8)
    assert q.forgetting_coefficients(64, 0.002).shape == (0,)


def test_order_and_size_after_several_enqueues_with_overflow():
    q = HippocampusQueue(5)
    q.enqueue(batch(10, 2))
    assert ids(q) == [10, 11] and len(q) == 2
    q.enqueue(batch(20, 2))
    assert ids(q) == [20, 21, 10, 11] and len(q) == 4
    q.enqueue(batch(30, 2))  # overflow: the oldest entry (11) is dropped
    assert ids(q) == [30, 31, 20, 21, 10] and len(q) == 5
    q.enqueue(batch(40, 3))
    assert ids(q) == [40, 41, 42, 30, 31] and len(q) == 5
    q.enqueue(batch(50, 7))  # larger than the capacity: its first rows are kept
    assert ids(q) == [50, 51, 52, 53, 54] and len(q) == 5
    assert q.embeddings.shape == (5, 2) and q.dim == 2


def test_forgetting_coefficients_follow_eq4():
    q = HippocampusQueue(5)
    for start in (10, 20, 30):
        q.enqueue(batch(start, 2))
    # m = 1..5, N = 2: ceil(m/2) = 1, 1, 2, 2, 3.
    p = q.forgetting_coefficients(batch_size=2, lam=0.1)
    assert p.dtype == torch.float32
    assert p.tolist() == pytest.approx([0.9, 0.9, 0.8, 0.8, 0.7], abs=1e-7)
    # Only as many coefficients as entries.
    q2 = HippocampusQueue(5)
    q2.enqueue(batch(0, 3))
    assert q2.forgetting_coefficients(2, 0.1).tolist() == pytest.approx([0.9, 0.9, 0.8], abs=1e-7)


def test_forgetting_coefficients_paper_defaults():
    q = HippocampusQueue(416, dim=4)
    for s in range(8):
        q.enqueue(torch.randn(64, 4, generator=torch.Generator().manual_seed(s)))
    assert len(q) == 416
    p = q.forgetting_coefficients(64, 0.002)
    expected = [1 - 0.002 * math.ceil(m / 64) for m in range(1, 417)]
    assert p.tolist() == pytest.approx(expected, abs=1e-7)
    assert p[0].item() == pytest.approx(0.998) and p[-1].item() == pytest.approx(0.986)


def test_forgetting_coefficients_validate():
    q = HippocampusQueue(5)
    q.enqueue(batch(0, 5))
    with pytest.raises(ValueError, match="> 0"):
        q.forgetting_coefficients(2, 0.5)  # 1 - 0.5 * 3 < 0
    with pytest.raises(ValueError, match="batch_size"):
        q.forgetting_coefficients(0, 0.1)
    with pytest.raises(ValueError, match="lam"):
        q.forgetting_coefficients(2, -0.1)


def test_entries_carry_no_gradient_and_are_float32():
    x = torch.randn(3, 4, requires_grad=True)
    y = (x * 2).to(torch.bfloat16)
    q = HippocampusQueue(8)
    q.enqueue(y)
    emb = q.embeddings
    assert emb.requires_grad is False and emb.grad_fn is None
    assert emb.dtype == torch.float32
    assert torch.allclose(emb, y.detach().float())
    # The stored entries are a copy: later changes to the source do not leak in.
    with torch.no_grad():
        x.add_(100.0)
    assert torch.allclose(q.embeddings, y.detach().float())


def test_enqueue_does_not_modify_previously_returned_tensor():
    q = HippocampusQueue(3)
    q.enqueue(batch(0, 3))
    before = q.embeddings
    snapshot = before.clone()
    q.enqueue(batch(10, 2))
    assert torch.equal(before, snapshot)
    assert ids(q) == [10, 11, 0]


def test_state_dict_round_trip():
    q = HippocampusQueue(5)
    q.enqueue(batch(10, 2))
    q.enqueue(batch(20, 2))
    state = q.state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)

    restored = HippocampusQueue(5)
    restored.load_state_dict(loaded)
    assert len(restored) == 4 and restored.dim == 2
    assert torch.equal(restored.embeddings, q.embeddings)
    loaded["embeddings"].zero_()  # loading copied the entries
    assert torch.equal(restored.embeddings, q.embeddings)
    # Both continue identically.
    q.enqueue(batch(30, 2))
    restored.enqueue(batch(30, 2))
    assert ids(restored) == ids(q) == [30, 31, 20, 21, 10]
    # The saved state is a copy, not a view of the live queue, whatever happens to it later.
    assert [int(v) for v in state["embeddings"][:, 0].tolist()] == [20, 21, 10, 11]
    live = q.state_dict()
    live["embeddings"].zero_()
    assert ids(q) == ids(restored) == [30, 31, 20, 21, 10]


def test_state_dict_of_fresh_queue_and_mismatches():
    fresh = HippocampusQueue(4)
    other = HippocampusQueue(4)
    other.load_state_dict(fresh.state_dict())
    assert len(other) == 0
    with pytest.raises(ValueError, match="capacity"):
        HippocampusQueue(6).load_state_dict(fresh.state_dict())
    full = HippocampusQueue(4)
    full.enqueue(batch(0, 2, dim=3))
    with pytest.raises(ValueError, match="dim"):
        HippocampusQueue(4, dim=2).load_state_dict(full.state_dict())
    with pytest.raises(ValueError, match="missing"):
        HippocampusQueue(4).load_state_dict({"capacity": 4})


def test_queue_feeds_the_hippocampus_loss():
    g = torch.Generator().manual_seed(0)
    q = HippocampusQueue(6)
    q.enqueue(torch.randn(3, 4, generator=g))
    q.enqueue(torch.randn(3, 4, generator=g))
    h = torch.randn(3, 4, generator=g)
    hp = torch.randn(3, 4, generator=g)
    p = q.forgetting_coefficients(3, 0.2)  # [0.8]*3 + [0.6]*3
    tau = 0.5
    cos = torch.nn.functional.cosine_similarity
    H, HP, Q = h.double(), hp.double(), q.embeddings.double()
    expected = 0.0
    for i in range(3):
        denom = sum(math.exp(cos(H[i], HP[j], dim=0).item() / tau) for j in range(3))
        denom += sum(p[m].item() * math.exp(cos(H[i], Q[m], dim=0).item() / tau) for m in range(6))
        expected += -math.log(math.exp(cos(H[i], HP[i], dim=0).item() / tau) / denom)
    expected /= 3
    got = hippocampus_info_nce(h, hp, q.embeddings, p, tau).item()
    assert got == pytest.approx(expected, abs=2e-5)
