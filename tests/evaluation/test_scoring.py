"""STS scoring: 'all' vs 'mean' vs 'wmean' against independent computations on synthetic data."""

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from cselab.evaluation.scoring import pair_cosine, rounded_average, score_subsets


def spearman_by_ranks(x, y):
    """Independent Spearman: Pearson correlation of average ranks (handles ties)."""
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1]) * 100


@pytest.fixture
def subsets():
    rng = np.random.default_rng(0)
    gold = {"a": rng.uniform(0, 5, 30), "b": rng.uniform(0, 5, 10), "c": rng.integers(0, 6, 20).astype(float)}
    # different offsets per subset make 'all' differ clearly from the subset mean
    pred = {k: 0.1 * v + rng.normal(0, 0.3, len(v)) + off
            for (k, v), off in zip(gold.items(), (0.0, 1.0, -0.5), strict=True)}
    return pred, gold


def test_all_is_one_spearman_over_the_concatenation(subsets):
    pred, gold = subsets
    score = score_subsets(pred, gold)
    expected = spearman_by_ranks(np.concatenate(list(pred.values())), np.concatenate(list(gold.values())))
    assert score.all == pytest.approx(expected, abs=1e-9)


def test_mean_and_wmean(subsets):
    pred, gold = subsets
    score = score_subsets(pred, gold)
    per = {k: spearman_by_ranks(pred[k], gold[k]) for k in gold}
    assert score.subsets == pytest.approx(per)
    assert score.mean == pytest.approx(sum(per.values()) / 3)
    assert score.wmean == pytest.approx((30 * per["a"] + 10 * per["b"] + 20 * per["c"]) / 60)
    assert score.n == 60
    # the three aggregates really differ on this data, so none can stand in for another
    assert len({round(score.all, 6), round(score.mean, 6), round(score.wmean, 6)}) == 3


def test_single_subset_all_equals_mean():
    pred, gold = {"x": np.array([0.1, 0.5, 0.3, 0.9])}, {"x": np.array([1.0, 3.0, 2.0, 4.0])}
    score = score_subsets(pred, gold)
    assert score.all == pytest.approx(100.0) and score.mean == pytest.approx(100.0)


def test_pair_cosine_hand_values():
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0], [3.0, 4.0]])
    b = torch.tensor([[0.0, 2.0], [2.0, 2.0], [4.0, 3.0]])
    np.testing.assert_allclose(pair_cosine(a, b), [0.0, 1.0, 24 / 25], atol=1e-12)


def test_rounded_average_rounds_each_task_first():
    # 70.004 -> 70.00 and 80.006 -> 80.01 before averaging
    assert rounded_average([70.004, 80.006]) == pytest.approx((70.0 + 80.01) / 2)
