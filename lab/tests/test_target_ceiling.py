"""The target-ceiling diagnostic's two pieces against hand-made values: the leading directions it shares with
``pca_rotation`` (of an uncentred second moment whose eigenvectors are known), and a cosine Spearman computed pair
by pair with scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from cselab.methods.distill import leading_directions
from lab.domain_study.target_ceiling import cosine_spearman


def test_the_leading_directions_are_the_largest_second_moments_first():
    # rows along the axes with energies 9 (axis 2), 4 (axis 0) and 1 (axis 1): the two leading directions are axes 2, 0
    unit = np.array([[2.0, 0, 0], [0, 1.0, 0], [0, 0, 3.0]])
    basis = leading_directions(torch.from_numpy(unit), 2).numpy()
    assert basis.shape == (3, 2)
    np.testing.assert_allclose(np.abs(basis), [[0, 1], [0, 0], [1, 0]], atol=1e-12)


def test_cosine_spearman_is_scipys_over_each_pairs_cosine():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(12, 5)), rng.normal(size=(12, 5))
    gold = rng.uniform(0, 5, size=12).tolist()
    cosines = [float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b, strict=True)]
    assert cosine_spearman(a, b, gold) == pytest.approx(100 * spearmanr(cosines, gold).statistic, abs=1e-9)
