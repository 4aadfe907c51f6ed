"""Training examples that hold related sentences: each sentence with its nearest neighbours by a model's cosine.

Distillation onto in-batch similarities (``methods/distill.py``) learns from the pairs a batch happens to hold;
in a shuffled batch of a few dozen sentences nearly every pair is unrelated (cosine near 0), while STS scores
related pairs. Grouping each sentence with its ``k`` nearest neighbours by the TEACHER's cosine puts graded,
related pairs into every batch. No labels are used: the neighbours come from the teacher's vectors of the
unlabelled training text.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def nearest_neighbours(vectors: torch.Tensor, k: int, chunk: int = 2048, blocks: Sequence[int] = ()) -> torch.Tensor:
    """``[N, k]`` indices of each row's ``k`` nearest OTHER rows by cosine, nearest first (ties: lower index).
    ``blocks``: row indices where a new block starts (increasing); each row's neighbours are then rows of its own
    block only.

    Computed ``chunk`` rows at a time, so the ``N x N`` cosine matrix is never held whole.
    """
    n = vectors.shape[0]
    starts = [0, *blocks, n]
    if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
        raise ValueError(f"blocks must be increasing indices between 1 and {n - 1}, got {list(blocks)}")
    smallest = min(b - a for a, b in zip(starts, starts[1:], strict=False))
    if not 0 < k < smallest:
        raise ValueError(f"k must be between 1 and the number of sentences of a block - 1 ({smallest - 1}), got {k}")
    unit = F.normalize(vectors.float(), dim=-1)
    block_of = torch.bucketize(torch.arange(n), torch.tensor(list(blocks), dtype=torch.long), right=True)
    out = torch.empty(n, k, dtype=torch.long)
    for start in range(0, n, chunk):
        block = unit[start:start + chunk] @ unit.T  # [c, N]
        rows = torch.arange(start, min(start + chunk, n))
        block[rows - start, rows] = float("-inf")  # never a sentence's own neighbour
        if blocks:
            block[block_of[rows, None] != block_of[None, :]] = float("-inf")  # nor a row of another block
        # a stable descending sort keeps the lower index first among equal cosines
        out[start:start + chunk] = torch.sort(block, dim=-1, descending=True, stable=True).indices[:, :k]
    return out


def neighbour_groups(sentences: Sequence[str], vectors: torch.Tensor, k: int) -> list[tuple[str, ...]]:
    """One example per sentence: ``(sentence, its k nearest neighbours...)`` by the cosine of ``vectors``."""
    if len(sentences) != vectors.shape[0]:
        raise ValueError(f"{len(sentences)} sentences but {vectors.shape[0]} vectors")
    neighbours = nearest_neighbours(vectors, k).tolist()
    return [(sentence, *(sentences[j] for j in row)) for sentence, row in zip(sentences, neighbours, strict=True)]
