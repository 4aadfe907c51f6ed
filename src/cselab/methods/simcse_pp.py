"""SimCSE++ (docs/methods.md#simcse-pp, seed paper 002): off-dropout negatives and dimension-wise contrast.

Two loss terms, each usable alone (the paper's ablation rows "+Off-Info" and "+DCL", Table 3):

- ``info_nce``: with ``off_dropout: true`` (default) the off-dropout InfoNCE of paper Eq. 3 -- positive
  pair = the two dropout views ``z1, z2``, negatives = a THIRD encoding ``z0`` of the batch with every
  dropout switched off (gradients on, dropout restored afterwards); with ``off_dropout: false`` the plain
  SimCSE InfoNCE ``L_NCE(z1, z2)``.
- ``dcl``: the dimension-wise contrastive loss of paper Eq. 5 on ``z1, z2`` with ``dcl_temperature``.

Total ``L = w_info_nce * info_nce + w_dcl * dcl`` with default weights {info_nce: 1, dcl: 0.1} (Eq. 6,
lambda = 0.1). Rows of the ablation:

- SimCSE++:           defaults.
- +Off-Info only:     ``loss_weights: {dcl: 0}``.
- +DCL only:          ``off_dropout: false`` (SimCSE InfoNCE + 0.1 * DCL).

Decisions:

- ``offdropout_scale``: ``negatives`` (default) is the paper's Eq. 3 (m multiplies the sum of the
  off-dropout negatives); ``positive`` is the reference code's variant (m scales the positive logit
  inside and outside the log-sum-exp). Both coincide for m = 1.
- ``z0`` goes through the same train-only MLP as the dropout views (the paper's z is the training
  representation); the off-dropout pass switches off every dropout of the encoder (see
  :mod:`cselab.models.dropout`), the dropout views use one 2B forward pass as in SimCSE.
- Weights given in ``loss_weights`` are merged over the defaults, so ``{info_nce: 2}`` keeps dcl at 0.1.
- Under data parallelism all three views are gathered before the losses (global negatives, and the
  DCL batch statistics are those of the global batch).
- Gradient caching (``train.chunk_size``) is exact for DCL too: the losses are always computed on the
  embeddings of the WHOLE batch (cached, with gradient), so DCL's per-dimension batch statistics and their
  gradient are those of the full batch; only the encoder passes are chunked.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from torch import Tensor

from cselab.losses import dimension_contrastive_loss, info_nce, offdropout_info_nce
from cselab.methods.base import MethodOptions, StepContext, register_method
from cselab.methods.simcse import SimCSE
from cselab.models.dropout import dropout_disabled

DEFAULT_WEIGHTS = {"info_nce": 1.0, "dcl": 0.1}


class SimCSEPPOptions(MethodOptions):
    off_dropout: bool = Field(True,
                              description="negatives from a dropout-free third pass (Eq. 3); false = SimCSE InfoNCE")
    m: float = Field(0.9, gt=0, description="trade-off factor m of Eq. 3")
    offdropout_scale: Literal["negatives", "positive"] = Field(
        "negatives", description="'negatives' = paper Eq. 3; 'positive' = reference code (m scales the positive)"
    )
    dcl_temperature: float = Field(5.0, gt=0, description="tau_DCL of Eq. 5")
    dcl_eps: float = Field(1e-5, gt=0, description="epsilon added to the per-dimension variance in DCL")
    loss_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS), description="info_nce, dcl (lambda); 0 switches a term off"
    )

    @field_validator("loss_weights")
    @classmethod
    def _merge_defaults(cls, value: dict[str, float]) -> dict[str, float]:
        return {**DEFAULT_WEIGHTS, **value}


@register_method
class SimCSEPP(SimCSE):
    """SimCSE's encoder, batches and inference model; only the loss terms differ."""

    name = "simcse++"
    terms = ("info_nce", "dcl")
    Options = SimCSEPPOptions
    preset_dir = "simcse_pp"
    aliases = ("simcse_pp", "simcse-pp", "simcsepp")
    views = 3  # the two dropout views and the off-dropout one

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        views = super().embed(batch)
        if self.active("info_nce") and self.options.off_dropout:
            with dropout_disabled(self.encoder):
                views["z0"] = self.encoder(batch, apply_head=True)
        return views

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        opts = self.options
        z1, z2 = embeddings["z1"], embeddings["z2"]
        terms: dict[str, Tensor] = {}
        if self.active("info_nce"):
            if opts.off_dropout:
                terms["info_nce"] = offdropout_info_nce(
                    z1, z2, embeddings["z0"], opts.temperature, m=opts.m, scale=opts.offdropout_scale
                )
            else:
                terms["info_nce"] = info_nce(z1, z2, opts.temperature)
        if self.active("dcl"):
            terms["dcl"] = dimension_contrastive_loss(z1, z2, opts.dcl_temperature, eps=opts.dcl_eps)
        return terms
