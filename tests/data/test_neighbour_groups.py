"""Nearest-neighbour groups of the training text, pinned to a brute-force numpy loop and hand cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cselab.data.text.neighbour_groups import nearest_neighbours, neighbour_groups


def _brute_force(vectors: np.ndarray, k: int) -> list[list[int]]:
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    out = []
    for i in range(len(unit)):
        cos = [(float(unit[i] @ unit[j]), j) for j in range(len(unit)) if j != i]
        out.append([j for _, j in sorted(cos, key=lambda c: (-c[0], c[1]))[:k]])
    return out


@pytest.mark.parametrize(("n", "k", "chunk"), [(11, 3, 4), (6, 5, 100), (9, 1, 1)])
def test_nearest_neighbours_match_a_loop_whatever_the_chunk(n, k, chunk):
    vectors = torch.randn(n, 5, generator=torch.Generator().manual_seed(n))
    got = nearest_neighbours(vectors, k, chunk=chunk).tolist()
    assert got == _brute_force(vectors.double().numpy(), k)


def test_nearest_neighbours_hand_case_with_ties_and_scale():
    # rows 0, 1 and 3 point the same way (any length), row 2 is orthogonal, row 4 at 45 degrees
    vectors = torch.tensor([[1.0, 0], [2, 0], [0, 1], [0.5, 0], [1, 1]])
    assert nearest_neighbours(vectors, 2).tolist() == [[1, 3], [0, 3], [4, 0], [0, 1], [0, 1]]


def test_neighbour_groups_are_sentences_with_their_neighbours():
    sentences = ["a", "b", "c", "d", "e"]
    vectors = torch.tensor([[1.0, 0], [2, 0], [0, 1], [0.5, 0], [1, 1]])
    assert neighbour_groups(sentences, vectors, 1) == [("a", "b"), ("b", "a"), ("c", "e"), ("d", "a"), ("e", "a")]
    with pytest.raises(ValueError, match="5 sentences but 4 vectors"):
        neighbour_groups(sentences, vectors[:4], 1)
    for k in (0, 5):
        with pytest.raises(ValueError, match="k must be between 1 and"):
            nearest_neighbours(vectors, k)


@pytest.mark.parametrize(("blocks", "chunk"), [([4], 3), ([3, 8], 100), ([5], 1)])
def test_neighbours_within_blocks_match_a_loop_over_each_block(blocks, chunk):
    vectors = torch.randn(11, 5, generator=torch.Generator().manual_seed(7))
    got = nearest_neighbours(vectors, 2, chunk=chunk, blocks=blocks).tolist()
    expected = []
    for start, end in zip([0, *blocks], [*blocks, 11], strict=True):  # each block alone, indices shifted back
        expected += [[start + j for j in row] for row in _brute_force(vectors[start:end].double().numpy(), 2)]
    assert got == expected


def test_neighbours_within_blocks_refuse_bad_blocks():
    vectors = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="increasing"):
        nearest_neighbours(vectors, 1, blocks=[3, 3])
    with pytest.raises(ValueError, match="of a block"):
        nearest_neighbours(vectors, 2, blocks=[2])  # a block of 2 has one other row
