"""The papers' +UC ensemble: ``(1 - w) * A + w * B`` of two saved models, with ``w`` given or chosen on STS-B dev.

``combine="sum"`` (default) is the papers' weighted sum of the two vectors (equal sizes); ``combine="concat"``
combines them at the score level (cosine = ``(1 - w) cos_A + w cos_B``) so A and B may differ in size (see
:class:`~cselab.models.sentence_model.EnsembleModel`). ``combine="weights"`` mixes the two models' weights instead
(:func:`~cselab.models.weight_mix.mixed_weights`;
 WiSE-FT, Wortsman et al. 2022: a fine-tuned model mixed with the one it started from keeps
much of the fine-tuning's gain and gives back part of what it lost elsewhere): one model of B's kind and size,
served at one model's cost; A and B must be one architecture (an adapted model and the one it was adapted from).

Decisions
---------
* The papers fix ``w`` = 0.7 for their own pairs; for another pair (e.g. a twin adapted from a mean-pooled
  checkpoint plus that checkpoint) nothing says 0.7 is right, so ``w`` may be chosen on **STS-B dev** from a grid
  (never on test). Ties go to the smaller ``w`` (less of the outside model).
* The sweep encodes the dev sentences once per member and re-weights the cached embeddings through the same
  :class:`~cselab.models.sentence_model.EnsembleModel` and :class:`~cselab.evaluation.sts_evaluator.StsEvaluator`
  that score a saved ensemble, so the dev score of a grid point is the saved ensemble's dev score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from cselab.errors import CselabError
from cselab.models.weight_mix import mixed_weights

DEFAULT_GRID: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(11))


class _EncodedOnce(nn.Module):
    """A member whose embeddings of one list of sentences are computed once (the sweep re-weights them)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self._texts: tuple[str, ...] | None = None
        self._embeddings: Tensor | None = None

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False) -> Tensor:
        key = tuple(texts)
        if key != self._texts:
            self._texts, self._embeddings = key, self.model.encode(texts, batch_size=batch_size, progress=progress)
        assert self._embeddings is not None
        return self._embeddings

    @property
    def hidden_size(self) -> int:  # lets EnsembleModel refuse a sum of different sizes before any encoding
        return int(self.model.hidden_size)


@dataclass
class WeightChoice:
    """The ``w`` with the best STS-B dev score, and the dev score of every grid point."""

    weight: float
    dev: float
    dev_by_weight: dict[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "dev": self.dev,
                "dev_by_weight": {str(w): s for w, s in self.dev_by_weight.items()}}


def choose_weight(model_a: nn.Module, model_b: nn.Module, grid: Sequence[float] = DEFAULT_GRID, *,
                  task: str = "stsb", batch_size: int = 128, combine: str = "sum") -> WeightChoice:
    """The grid's ``w`` whose ``(1 - w) * A + w * B`` (combined by ``combine``) scores best on ``task``'s **dev**
    split."""
    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.models.sentence_model import EnsembleModel

    grid = sorted({float(w) for w in grid})
    if not grid or any(not 0.0 <= w <= 1.0 for w in grid):
        raise CselabError(f"ensemble weights must be in [0, 1], got {grid}")
    evaluator = StsEvaluator.from_names([task], ("dev",), batch_size=batch_size, primary=f"{task}/dev")
    if not evaluator.tasks:
        raise CselabError(f"{task} has no dev split to choose the ensemble weight on")
    members = [_EncodedOnce(model_a), _EncodedOnce(model_b)]
    dev_by_weight = {}
    with torch.inference_mode():
        for w in grid:
            model = EnsembleModel(members, [1.0 - w, w], combine=combine)
            dev_by_weight[w] = evaluator.primary_score(evaluator(model))
    best = max(grid, key=lambda w: (dev_by_weight[w], -w))
    return WeightChoice(best, dev_by_weight[best], dev_by_weight)


def _weights_mixed(model_a: str | Path, model_b: str | Path, weight: float) -> nn.Module:
    """Model B with the weights ``(1 - weight) * A + weight * B`` (its kind, pooler and length are B's)."""
    from cselab.models.sentence_model import load_model

    a, b = load_model(model_a, device="cpu"), load_model(model_b, device="cpu")
    if type(a) is not type(b):
        raise CselabError(f"{model_a} is a {type(a).__name__} and {model_b} a {type(b).__name__}: only models of "
                          "one kind mix their weights")
    b.load_state_dict(mixed_weights(a.state_dict(), b.state_dict(), weight), strict=True)
    return b


def ensemble(model_a: str | Path, model_b: str | Path, output_dir: str | Path, *, weight: float = 0.7,
             combine: str = "sum", extra: dict[str, Any] | None = None) -> Path:
    """Save ``(1 - weight) * model_a + weight * model_b`` as an EnsembleModel (the papers' +UC, w = 0.7), combined
    by ``combine`` ("sum": the papers'; "concat": members of any size), or with ``combine="weights"`` as one model
    whose weights are so mixed (:func:`~cselab.models.weight_mix.mixed_weights`)."""
    from cselab.fileio import DirectoryLock
    from cselab.models.sentence_model import EnsembleModel, load_model, save_model

    if not 0.0 <= weight <= 1.0:
        raise CselabError(f"ensemble weight must be in [0, 1], got {weight}")
    output_dir = Path(output_dir)

    def refuse_existing() -> None:  # like train: an existing directory (a model or anything else) is never replaced
        if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
            raise CselabError(f"{output_dir} already exists and is not empty; choose another --output or delete it")

    refuse_existing()
    if combine == "weights":
        model = _weights_mixed(model_a, model_b, weight)
        extra = {"weights_mixed": {"weight": weight}, **(extra or {})}  # the two models are its "sources"
    else:
        model = EnsembleModel([load_model(model_a), load_model(model_b)], [1.0 - weight, weight], combine=combine)
    # one writer: the lock sits beside the output (the output itself is renamed into place)
    with DirectoryLock(output_dir.parent, f"an ensemble save into {output_dir.name}", name=f".{output_dir.name}.lock"):
        refuse_existing()
        return save_model(model, output_dir, extra={"sources": [str(model_a), str(model_b)], **(extra or {})})


def ensemble_chosen_on_dev(model_a: str | Path, model_b: str | Path, output_dir: str | Path,
                           grid: Sequence[float] = DEFAULT_GRID, *, combine: str = "sum") -> tuple[Path, WeightChoice]:
    """Choose ``w`` on STS-B dev (:func:`choose_weight`), then save that ensemble with the sweep beside it."""
    from cselab.models.sentence_model import load_model

    choice = choose_weight(load_model(model_a), load_model(model_b), grid, combine=combine)
    return ensemble(model_a, model_b, output_dir, weight=choice.weight, combine=combine,
                    extra={"weight_chosen_on": "stsb/dev", **choice.to_dict()}), choice
