"""Speed levers that must not change the maths: each against the slow path it replaces, or a hand computation."""

import math

import pytest
import torch

from cselab.training.config import load_config
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
    return [torch.tensor(v, dtype=torch.float64).view(p.shape) for v, p in zip(values, params)]


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
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
    expected = _adamw_by_hand(start, grads_per_step, lr=0.01, wd=0.1)
    for p, e in zip(params, expected):
        torch.testing.assert_close(p.detach().double(), e, rtol=1e-5, atol=1e-6)


def test_fused_and_per_tensor_adamw_agree_on_a_model():
    torch.manual_seed(1)
    models = [torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [build_optimizer(list(m.parameters()), load_config(None, ["train.lr=0.003", "train.weight_decay=0.01",
                                                                            f"train.fused_adamw={f}"]).train)
                  for m, f in zip(models, (True, False))]
    for _ in range(5):
        x = torch.randn(6, 8)
        for model, optimizer in zip(models, optimizers):
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
