"""Unsupervised SimCSE (docs/methods.md#simcse): two dropout views of each sentence, InfoNCE between them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from cselab.losses import info_nce
from cselab.methods.base import Method, StepContext, register_method
from cselab.models.encoder import Encoder


def build_encoder(config: Any, backbone: str | None = None) -> Encoder:
    """The trainable encoder of a run: train-only MLP head exactly when the pooler is ``cls``."""
    model = config.model
    return Encoder.from_pretrained(
        backbone or model.backbone,
        pooler=model.pooler,
        max_length=model.eval_max_length,
        with_head=model.pooler == "cls",
        dropout=model.dropout,
    )


def duplicate(features: dict[str, Tensor]) -> dict[str, Tensor]:
    """[x; x]: both dropout views of a batch in ONE forward pass of 2B rows."""
    import torch

    return {k: torch.cat([v, v]) for k, v in features.items()}


@register_method
class SimCSE(Method):
    name = "simcse"
    terms = ("info_nce",)
    rows_per_example = 2  # two dropout views of each sentence

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.encoder = build_encoder(config)

    def collate(self, examples: Sequence[str]) -> dict[str, Any]:
        return self.encoder.tokenize(examples, max_length=self.config.model.max_length)

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        z1, z2 = self.encoder(duplicate(batch), apply_head=True).chunk(2)
        return {"z1": z1, "z2": z2}

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        return {"info_nce": info_nce(embeddings["z1"], embeddings["z2"], self.options.temperature)}

    def inference_model(self) -> Encoder:
        return self.encoder
