"""What the analysis reports read: models by name or directory, their member encoders, plot labels, and the
STS-B test data (the papers' data for alignment/uniformity, density and the default attention sentences).

A model reference is anything :func:`cselab.models.sentence_model.load_model` accepts, or an already built
sentence model. ``senteval_dir`` reads SentEval's copy of STS-B when given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from cselab.errors import CselabError
from cselab.training.run_directory import BEST_DIR, LAST_DIR

ModelRef = str | Path | nn.Module
DEFAULT_ATTENTION_SENTENCES = 256


def model_label(model: ModelRef) -> str:
    """A short name for plots: the directory name, with its parent for ``.../best`` and ``.../last``."""
    if isinstance(model, nn.Module):
        return type(model).__name__
    path = Path(str(model).rstrip("/"))
    if path.name in (BEST_DIR, LAST_DIR) and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or str(model)


def plot_labels(models: Sequence[ModelRef], labels: Sequence[str] | None) -> list[str]:
    """One distinct label per model: ``labels`` when given (as many as models), else :func:`model_label`."""
    if labels is not None:
        if len(labels) != len(models):
            raise CselabError(f"{len(labels)} labels for {len(models)} models")
        out = [str(x) for x in labels]
    else:
        out = [model_label(m) for m in models]
    seen: dict[str, int] = {}
    unique = []
    for label in out:  # plots and JSON are keyed by label: make them distinct
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return unique


def load_model_ref(model: ModelRef, pooler: str | None) -> nn.Module:
    """The sentence model a reference names (a built model is returned as is)."""
    if isinstance(model, nn.Module):
        return model
    from cselab.models.sentence_model import load_model

    return load_model(model, pooler=pooler)


def member_encoders(model: nn.Module) -> list[tuple[str, Any]]:
    """The encoders a sentence model runs at inference, with names: ``[("encoder", enc)]`` for a single
    encoder, ``encoder_1``/``encoder_2`` for a twin, ``member_<i>[/...]`` for an ensemble (recursively)."""
    from cselab.models.encoder import Encoder

    if isinstance(model, Encoder):
        return [("encoder", model)]
    if hasattr(model, "named_members"):
        return [(member_name + ("" if name == "encoder" else f"/{name}"), enc)
                for member_name, member in model.named_members() for name, enc in member_encoders(member)]
    raise CselabError(f"cannot find the encoders of a {type(model).__name__}; expected an encoder, twin or ensemble")


def model_kind(model: nn.Module) -> str:
    """The kind a model describes itself as (encoder, twin, ensemble), else its class name."""
    describe = getattr(model, "describe", None)
    return str(describe().get("kind", type(model).__name__)) if callable(describe) else type(model).__name__


def stsb_test_subset(senteval_dir: Path | None) -> Any:
    """The STS-B test pairs and gold scores (SentEval's copy when ``senteval_dir`` is given)."""
    from cselab.data.evalsets.sts import load_task

    return load_task("stsb", "test", senteval_dir=senteval_dir).subsets[0]


def stsb_test_sentences(limit: int | None = DEFAULT_ATTENTION_SENTENCES, *,
                        senteval_dir: Path | None = None) -> list[str]:
    """The first ``limit`` distinct STS-B test sentences in file order (sentence 1, then 2, of each pair)."""
    sub = stsb_test_subset(senteval_dir)
    ordered = list(dict.fromkeys(s for pair in zip(sub.sentences1, sub.sentences2, strict=True) for s in pair))
    return ordered if limit is None else ordered[:limit]


def encode_pairs(model: nn.Module, sub: Any, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings of both sides of every pair; each distinct sentence is encoded once."""
    sentences = list(dict.fromkeys([*sub.sentences1, *sub.sentences2]))
    index = {s: i for i, s in enumerate(sentences)}
    emb = model.encode(sentences, batch_size=batch_size)
    return emb[[index[s] for s in sub.sentences1]], emb[[index[s] for s in sub.sentences2]]


def stsb_spearman(emb1: torch.Tensor, emb2: torch.Tensor, gold: np.ndarray) -> float:
    """Spearman x 100 of the pair cosines against the gold scores (the STS evaluator's formula)."""
    from cselab.evaluation.scoring import pair_cosine, spearman100

    return spearman100(pair_cosine(emb1, emb2), np.asarray(gold, dtype=float))
