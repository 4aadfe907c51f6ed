"""Length-grouped batches (``train.length_group_window``): less padding per step, same sentences per window.

A batch is padded to its longest sentence, so with random batches ~23% of a MiniLM step's token slots
are padding (max_len 32, the default corpus). Grouping takes the epoch's shuffled order a window of W
batches at a time, sorts the window's sentences by length, cuts the sorted run into W batches and
shuffles those batches (seeded by seed, epoch and window, so a resumed run replays it exactly). Every
sentence is still seen once per epoch and each window holds the same sentences as without grouping; what
changes is which sentences share a batch — and in-batch negatives are then of similar length, which can
change what a contrastive method learns. That is why it is a switch, off by default.

Length is what ``measure`` says: the trainer passes the token count when the method has one encoder
(characters leave 15% of the slots padded where tokens leave ~3%; the tokenisation of a window is done
once per window), otherwise the number of characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from cselab.methods.base import character_lengths


def generator_seed(value: int) -> int:
    """``value`` as a seed torch's generators take (-2^63 to 2^64-1): unchanged there, so every run keeps its data
    order; a larger mix of a large ``train.seed`` (seed x 1,000,003 + epoch) is taken modulo 2^64 instead of
    failing."""
    return value if -(2**63) <= value < 2**64 else value % 2**64


def group_window(order: torch.Tensor, examples: Sequence[Any], *, position: int, batch_size: int, window: int,
                 seed: int, epoch: int, measure: Callable[[list[Any]], list[int]] = character_lengths) -> torch.Tensor:
    """``order`` with the window of batches holding batch ``position`` regrouped by length (the rest unchanged)."""
    first = (position // window) * window * batch_size
    last = min(first + window * batch_size, (len(order) // batch_size) * batch_size)
    members = order[first:last].tolist()
    lengths = dict(zip(members, measure([examples[i] for i in members]), strict=True))
    # stable sort: equal lengths keep their shuffled order
    members.sort(key=lengths.__getitem__)
    batches = [members[k : k + batch_size] for k in range(0, len(members), batch_size)]
    g = torch.Generator()
    g.manual_seed(generator_seed((seed * 1_000_003 + epoch) * 1_000_003 + position // window))
    shuffled = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
    grouped = order.clone()
    grouped[first:last] = torch.tensor([i for batch in shuffled for i in batch], dtype=order.dtype)
    return grouped
