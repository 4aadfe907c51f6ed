"""SimCSE++ dimension-wise contrastive learning (DCL): contrast embedding dimensions, not sentences."""

from __future__ import annotations

import torch

from cselab.losses._checks import as_float32, check_matrix, check_positive, check_same_shape


def _standardise(z: torch.Tensor, eps: float) -> torch.Tensor:
    """``(z - mean) / sqrt(var + eps)`` per column, var with the N-1 estimator, no affine."""
    mean = z.mean(dim=0, keepdim=True)
    var = z.var(dim=0, unbiased=True, keepdim=True)
    return (z - mean) / torch.sqrt(var + eps)


def dimension_contrastive_loss(
    z1: torch.Tensor, z2: torch.Tensor, temperature: float = 5.0, eps: float = 1e-5
) -> torch.Tensor:
    """Dimension-wise contrastive loss of SimCSE++ (paper Eq. 5).

    Each dimension is standardised over the batch, ``zt[:, c] = (z[:, c] - mean_c) / sqrt(var_c + eps)``
    with the unbiased (N-1) variance and no affine parameters. Then (a d x d matrix)::

        S[c, e] = (1/B) * sum_i zt1[i, c] * zt2[i, e] / temperature
        L = mean_c ( -S[c, c] + logsumexp_e S[c, e] )

    i.e. cross-entropy where dimension c of view 1 must pick dimension c of view 2. The paper writes the
    plain sum over i; the 1/B (a batch-size-independent scale) is this project's spec (docs/methods.md#simcse-pp).

    Args:
        z1: ``[B, d]`` first dropout view (after the MLP), B >= 2.
        z2: ``[B, d]`` second dropout view.
        temperature: tau_DCL > 0 (5 in the paper).
        eps: > 0, added to the variance.

    Returns:
        float32 scalar.
    """
    check_matrix("z1", z1, min_rows=2)
    check_same_shape(("z1", "z2"), (z1, z2))
    check_positive("temperature", temperature)
    check_positive("eps", eps)
    batch = z1.shape[0]
    zt1 = _standardise(as_float32(z1), eps)
    zt2 = _standardise(as_float32(z2), eps)
    sim = zt1.T @ zt2 / (batch * temperature)  # [d, d]
    return (torch.logsumexp(sim, dim=1) - torch.diagonal(sim)).mean()
