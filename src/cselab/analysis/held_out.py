"""Label-free scores of an encoder on a held-out part of the user's own text (candidate selection criteria).

Each held-out sentence ``s`` is paired with a view ``s'``: ``s`` with a seeded fraction of its words deleted
(:func:`deletion_view`; the same views at every call, so the scores of two training steps compare). Then, on the
L2-normalised embeddings:

* ``infonce``: the contrastive loss of the pairs ``(s, s')`` with every other held-out view as a negative
  (``losses.info_nce``, temperature 0.05, one batch of all held-out sentences); lower is better;
* ``alignment``: ``E ||f(s) - f(s')||^2`` (Wang & Isola); lower is better;
* ``uniformity``: ``log E exp(-2 ||f(s) - f(t)||^2)`` over pairs of distinct held-out sentences; lower is better.

The views come from the text, not from dropout, so the scores mean the same for a model trained with dropout
(SimCSE) and without (distillation). Nothing here sees a label.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from cselab.analysis.alignment_uniformity import alignment, uniformity
from cselab.losses.info_nce import info_nce

DELETION, TEMPERATURE, SEED = 0.1, 0.05, 0


def deletion_view(sentence: str, ratio: float, rng: random.Random) -> str:
    """``sentence`` with each whitespace-separated word deleted with probability ``ratio`` (at least one word
    is kept, and at least one deleted when the sentence has two or more words and ``ratio > 0``)."""
    words = sentence.split()
    if len(words) < 2 or ratio <= 0:
        return sentence
    keep = [rng.random() >= ratio for _ in words]
    if all(keep):
        keep[rng.randrange(len(words))] = False
    if not any(keep):
        keep[rng.randrange(len(words))] = True
    return " ".join(w for w, k in zip(words, keep, strict=True) if k)


class HeldOutScores:
    """``HeldOutScores(sentences)(model) -> {"infonce": ..., "alignment": ..., "uniformity": ...}``.

    ``model`` is anything with ``encode(texts, batch_size=...)`` returning a ``[N, d]`` tensor (a cselab encoder).
    """

    def __init__(self, sentences: Sequence[str], *, deletion: float = DELETION, temperature: float = TEMPERATURE,
                 seed: int = SEED, batch_size: int = 64) -> None:
        if len(sentences) < 2:
            raise ValueError("held-out scores need at least two sentences")
        rng = random.Random(seed)
        self.sentences = list(sentences)
        self.views = [deletion_view(s, deletion, rng) for s in self.sentences]
        self.temperature, self.batch_size = temperature, batch_size

    def __call__(self, model: Any) -> dict[str, float]:
        with torch.no_grad():
            a = torch.as_tensor(model.encode(self.sentences, batch_size=self.batch_size)).float()
            b = torch.as_tensor(model.encode(self.views, batch_size=self.batch_size)).float()
        return {"infonce": float(info_nce(a, b, self.temperature)), "alignment": alignment(a, b),
                "uniformity": uniformity(a)}
