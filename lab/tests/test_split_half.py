"""The split-half measure against hand-worked lines and ranks."""

import numpy as np

from lab.domain_study.split_half import reciprocal_ranks, split_halves


def test_split_halves_cuts_at_the_middle_word_and_drops_short_and_repeated_lines() -> None:
    lines = ["one two three four five", "too short", "one two three four five", "a b c d"]
    first, second = split_halves(lines, min_words=4, limit=10)
    assert first == ["one two", "a b"]
    assert second == ["three four five", "c d"]


def test_split_halves_draws_the_limit_in_first_seen_order() -> None:
    lines = [f"w{i} x y z" for i in range(50)]
    first, _ = split_halves(lines, min_words=4, limit=5, seed=3)
    assert len(first) == 5
    drawn = [int(text.split()[0][1:]) for text in first]
    assert drawn == sorted(drawn)
    assert first == split_halves(lines, min_words=4, limit=5, seed=3)[0]


def test_reciprocal_ranks_by_hand() -> None:
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    documents = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6]])
    # query 0: own 1.0, best -> rank 1; query 1: own 0.8, doc 2 0.6, doc 0 0.0 -> rank 1;
    # query 2: own 0.8, doc 0 1.0 above it -> rank 2
    assert np.allclose(reciprocal_ranks(queries, documents), [1.0, 1.0, 0.5])


def test_a_tie_with_the_right_document_counts_against_it() -> None:
    queries = np.array([[1.0, 0.0], [1.0, 0.0]])
    documents = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert np.allclose(reciprocal_ranks(queries, documents), [0.5, 0.5])
