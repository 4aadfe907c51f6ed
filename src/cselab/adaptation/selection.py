"""How ``cselab adapt`` chooses the adapted model without labels, and the label-free scores it (and the domain study)
can watch on the held-out part of the user's text.

* ``fixed-budget``: the last step of the budget;
* ``distillation-loss`` (with a teacher): the step with the least distillation loss on the held-out text
  (:class:`HeldOutDistillationLoss`: the student's cosines of every pair of held-out sentences against the
  teacher's); the untouched model (step 0) is a candidate;
* ``guarded-distillation-loss`` (with a teacher): :class:`GuardedDistillationLoss`, the held-out distillation loss
  on two views of the held-out text, its lines and passages of them (up to :data:`GUARD_MAX_LENGTH` tokens); a step
  is a candidate only where neither view's loss is above the untouched model's, and of those the step with the least
  mean loss relative to the untouched model's is kept (step 0 when none is below it on both);
* ``teacher-agreement`` (with a teacher): the step whose cosines of held-out pairs agree best with the teacher's
  (Spearman x 100 between the student's and the teacher's cosines of each held-out sentence with its nearest held-out
  neighbour and with a random one); the untouched model (step 0) is a candidate.

:class:`HeldOutScores` are the held-out text's contrastive loss, alignment and uniformity, from views made of the text
(word deletion), so they mean the same for a model trained with dropout (SimCSE) and without (distillation):

* ``infonce``: the contrastive loss of the pairs ``(s, s')`` with every other held-out view as a negative
  (``losses.info_nce``, temperature 0.05, one batch of all held-out sentences); lower is better;
* ``alignment``: ``E ||f(s) - f(s')||^2`` (Wang & Isola); lower is better;
* ``uniformity``: ``log E exp(-2 ||f(s) - f(t)||^2)`` over pairs of distinct held-out sentences; lower is better.

Nothing here sees a label.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cselab.data.evalsets.sts import StsSubset, StsTask
from cselab.evaluation.alignment_uniformity import alignment, uniformity
from cselab.fileio import write_json_atomic
from cselab.losses.distillation import similarity_distillation_mse
from cselab.losses.info_nce import info_nce
from cselab.models.encoder import encoding_length
from cselab.vocabulary import ADAPT_SELECTIONS

SELECTIONS = ADAPT_SELECTIONS
FIXED_BUDGET, DISTILLATION_LOSS, TEACHER_AGREEMENT, GUARDED_DISTILLATION_LOSS = SELECTIONS
# the passages view of the guarded selection: as long as the documents a model is often asked to embed
GUARD_MAX_LENGTH = 256
SPLIT_SEED = 0  # the seed of the held-out pairs' random partners
DELETION, TEMPERATURE, VIEW_SEED = 0.1, 0.05, 0


def held_out_pairs(held_out: Sequence[str], teacher_vectors: np.ndarray, seed: int = SPLIT_SEED
                   ) -> tuple[list[str], list[str], np.ndarray]:
    """Each held-out sentence with its nearest held-out neighbour by the teacher and with a random other one;
    returns (first sentences, second sentences, the teacher's cosines)."""
    unit = teacher_vectors / np.clip(np.linalg.norm(teacher_vectors, axis=1, keepdims=True), 1e-12, None)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    nearest = cos.argmax(axis=1)
    rng = np.random.default_rng(seed)
    n = len(held_out)
    partner = (np.arange(n) + rng.integers(1, n, size=n)) % n  # never the sentence itself
    firsts, seconds, targets = [], [], []
    for i in range(n):
        for j in (int(nearest[i]), int(partner[i])):
            firsts.append(held_out[i])
            seconds.append(held_out[j])
            targets.append(float(unit[i] @ unit[j]))
    return firsts, seconds, np.asarray(targets)


def teacher_agreement_task(held_out: Sequence[str], teacher: Any, batch_size: int = 64) -> StsTask:
    """:func:`teacher_agreement_task_from_vectors` with the teacher run here on the held-out sentences."""
    vectors = teacher.encode(list(held_out), batch_size=batch_size).float().numpy()
    return teacher_agreement_task_from_vectors(held_out, vectors)


def teacher_agreement_task_from_vectors(held_out: Sequence[str], teacher_vectors: np.ndarray) -> StsTask:
    """The held-out pairs as an STS task whose gold scores are the teacher's cosines: the STS evaluator then
    scores a student by its agreement with the teacher (Spearman x 100)."""
    firsts, seconds, targets = held_out_pairs(held_out, np.asarray(teacher_vectors, dtype=np.float64))
    return StsTask("teacher-agreement", "dev", (StsSubset("held-out", firsts, seconds, targets),))


class HeldOutDistillationLoss:
    """The distillation loss on the held-out text, width-free: the mean squared difference between the student's and
    the teacher's cosines over every pair of held-out sentences (``losses.similarity_distillation_mse``; the teacher's
    vectors come from its pass over the text). Lower is better; the trainer's selection score is its negation."""

    primary = "held-out/-distillation-loss"

    def __init__(self, held_out: Sequence[str], teacher_vectors: Any, *, batch_size: int = 64,
                 max_length: int | None = None) -> None:
        if len(held_out) < 2:
            raise ValueError("the held-out distillation loss needs at least two sentences")
        self.sentences = list(held_out)
        self.teacher = torch.as_tensor(np.asarray(teacher_vectors, dtype=np.float32))
        self.batch_size = batch_size
        self.max_length = max_length  # the student's tokens per text (None: the length it trains at)

    def __call__(self, model: Any) -> dict[str, float]:
        return self.of_vectors(self.encode(model))

    def encode(self, model: Any) -> torch.Tensor:
        """The student's vectors of the held-out sentences, at the loss's length (float32)."""
        with torch.no_grad(), encoding_length(model, self.max_length):
            return torch.as_tensor(model.encode(self.sentences, batch_size=self.batch_size)).float()

    def of_vectors(self, student: torch.Tensor) -> dict[str, float]:
        """The loss of the student's vectors of the held-out sentences (:meth:`encode`), for a caller that reads
        other scores off the same vectors."""
        return {"distillation_loss": float(similarity_distillation_mse(student, self.teacher))}

    def primary_score(self, result: dict[str, float]) -> float:
        return -float(result["distillation_loss"])


class GuardedDistillationLoss:
    """The held-out distillation loss (:class:`HeldOutDistillationLoss`) on several views of the held-out text (its
    lines, and passages of them), each against the untouched model's: a step whose loss rose on any view scores below
    the untouched model, so it is never kept; otherwise its score is minus the mean of its losses relative to the
    untouched model's (step 0 scores -1).

    Why two views: a model trained on short lines can lose on long inputs while its loss on lines keeps falling; the
    guard asks it to be no further from the teacher on either.

    The untouched model's losses are the first scores taken (the trainer scores step 0 first whenever a selection has
    candidates); they are written to ``reference_file`` so that a resumed run compares with the same numbers."""

    primary = "held-out/-guarded-distillation-loss"

    def __init__(self, views: dict[str, tuple[Sequence[str], Any, int | None]], reference_file: str | Path, *,
                 batch_size: int = 64) -> None:
        """``views``: name -> (texts, the teacher's vectors of them, the student's tokens per text or None)."""
        if not views:
            raise ValueError("the guarded distillation loss needs at least one view of the held-out text")
        self.losses = {name: HeldOutDistillationLoss(units, vectors, batch_size=batch_size, max_length=length)
                       for name, (units, vectors, length) in views.items()}
        self.reference_file = Path(reference_file)
        self.reference: dict[str, float] | None = None
        if self.reference_file.is_file():
            saved = json.loads(self.reference_file.read_text(encoding="utf-8"))
            if set(saved) == set(self.losses):
                self.reference = {k: float(v) for k, v in saved.items()}

    def __call__(self, model: Any) -> dict[str, float]:
        result = {name: loss(model)["distillation_loss"] for name, loss in self.losses.items()}
        if self.reference is None:  # the first step scored is the untouched model
            self.reference = dict(result)
            write_json_atomic(self.reference_file, self.reference)
        return result

    def primary_score(self, result: dict[str, float]) -> float:
        if self.reference is None:
            raise RuntimeError("the guarded distillation loss scores a step only after the untouched model")
        return guarded_score(result, self.reference)


def teacher_vectors_by_view(teacher: str, views: dict[str, Sequence[str]], store_dir: str | Path | None,
                            **options: Any) -> dict[str, np.ndarray]:
    """The teacher's unit vectors of each view's texts (name -> ``[len(texts), d]``, in the texts' order): each view
    a pass of its own, assembled in ``store_dir`` (:func:`cselab.teacher.vectors.teacher_vectors_of_parts` with
    ``options``; ``None``: kept in the cache only). The guarded selection's run and the domain study's observer
    request the same passes, so whichever comes second reads them."""
    from cselab.teacher.vectors import teacher_vectors_of_parts

    names = list(views)
    vectors = teacher_vectors_of_parts(teacher, views, store_dir, **options)
    offsets = np.cumsum([0, *(len(views[name]) for name in names)])
    return {name: vectors[offsets[i]:offsets[i + 1]] for i, name in enumerate(names)}


def guarded_score(losses: dict[str, float], reference: dict[str, float]) -> float:
    """The guarded selection's score of a step (higher is better) from its held-out losses on each view and the
    untouched model's (``reference``): minus the mean ratio of the two, and below -1 (the untouched model's score)
    when any view's loss is above the untouched model's."""
    ratios = [losses[name] / max(reference[name], 1e-12) for name in reference]
    mean = sum(ratios) / len(ratios)
    return -(1.0 + mean) if any(r > 1.0 for r in ratios) else -mean


class HeldOutLoss:
    """What a fixed budget's single evaluation (the last step) records: the held-out text's InfoNCE loss
    (:class:`HeldOutScores`), negated so that higher is better. It selects nothing,
    since a fixed budget evaluates once, and it needs no labelled data (STS-B dev would need `cselab data fetch
    sts`); it has the trainer's selector interface (``__call__`` and ``primary_score``)."""

    primary = "held-out/-infonce"

    def __init__(self, held_out: Sequence[str]) -> None:
        self.scores = HeldOutScores(held_out)

    def __call__(self, model: Any) -> dict[str, float]:
        return self.scores(model)

    def primary_score(self, result: dict[str, float]) -> float:
        return -float(result["infonce"])


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
                 seed: int = VIEW_SEED, batch_size: int = 64) -> None:
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
