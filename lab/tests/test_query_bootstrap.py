"""The per-query nDCG@10 and the paired bootstrap of lab.domain_study.query_bootstrap, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab.domain_study.query_bootstrap import ndcg_at_k, paired_bootstrap


def test_ndcg_of_two_queries_by_hand():
    similarity = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.8]])
    docs = ["d0", "d1", "d2"]
    relevant = [{"d1": 1}, {"d0": 1, "d2": 1}]
    # query 0: ranked d0, d2, d1: its one relevant document third, 1/log2(4) over an ideal of 1
    # query 1: ranked d1, d2 (the tie goes to the earlier document), d0: 1/log2(3) + 1/log2(4) over 1 + 1/log2(3)
    expected = [0.5, (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))]
    np.testing.assert_allclose(ndcg_at_k(similarity, docs, relevant), expected)
    # at a cutoff of 2, query 1 keeps d2 only, and query 0's document is cut off
    np.testing.assert_allclose(ndcg_at_k(similarity, docs, relevant, k=2),
                               [0.0, (1 / math.log2(3)) / (1 + 1 / math.log2(3))])


def test_the_bootstrap_of_a_constant_change_is_that_change():
    result = paired_bootstrap(np.full(40, -1.5), resamples=200)
    assert result == pytest.approx({"mean": -1.5, "low": -1.5, "high": -1.5, "below_zero": 1.0})


def test_the_bootstrap_interval_holds_the_mean_and_narrows_with_more_queries():
    rng = np.random.default_rng(3)
    few, many = rng.normal(1.0, 10.0, 25), rng.normal(1.0, 10.0, 2500)
    small, large = paired_bootstrap(few, resamples=2000), paired_bootstrap(many, resamples=2000)
    assert small["low"] < small["mean"] < small["high"] and large["low"] < large["mean"] < large["high"]
    assert large["high"] - large["low"] < (small["high"] - small["low"]) / 5  # sqrt(100) = 10 times narrower, about
    # the normal approximation: the standard error of 2500 draws of sd 10 is 0.2, so the interval is about +-0.39
    assert large["high"] - large["low"] == pytest.approx(2 * 1.96 * many.std() / 50, rel=0.15)
