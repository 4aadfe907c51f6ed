"""JTCSE stage 2 (docs/methods.md#jtcse; JTCSE Eqs. 7-14): TNCSE + cross-attention encoder layers (CAEL).

Everything of :class:`~cselab.methods.tncse.TNCSE` (two stage-1 encoders, ``nce``, ICTN = the paper's
``L_ICTM``, the twin inference ``h_I + h_II``) plus:

- CAELs at ``L = {j : j mod k == 0}``, ``k = n_layers / num_ca_layers`` (:mod:`cselab.models.cross_attention`).
  From the first CAEL on, each encoder carries a cross stream beside its ordinary one: at a CAEL its own
  attention probabilities weight the OTHER encoder's values (of the other's cross stream), at any other layer
  its ordinary layer runs on the cross stream; ``cI``, ``cII`` are the first token of the cross streams after
  the last layer (``[2B, d]`` stacks, both dropout copies). Training only: the saved model is two plain encoders.
- IC-InfoNCE (Eq. 12): ``L_ICNCE = R * (X(hI, hII) + X(cI, cII)) + (1 - R) * (X(hII, hI) + X(cII, cI))`` with
  ``R ~ Bernoulli(0.5)`` drawn once per step from the run's seeded generator (so a resumed run draws the same
  R), which decides which encoder is the query side. ``X`` is TNCSE's cross-encoder InfoNCE.

Loss-term names are TNCSE's (``nce``, ``icnce``, ``ictn``) so one ablation grid serves both methods. The
h-terms (``nce``, ``ictn``, the h-part of ``icnce``), the pooler, inference and dev selection read only the
ordinary stream, so they do not depend on the CAEL count; the c-part of ``icnce`` does.

**Decisions:**
- Two streams per encoder (docs/methods.md#jtcse, corrected; the paper's Fig. 4 passes both the primitive and the
  cross-attention last hidden state through IC-InfoNCE and its Section VI-B propagates the cross context to the
  next layer). An earlier version made the cross branch a side output of the ordinary stream, so only the last
  CAEL reached the loss; ``num_ca_layers: 1`` is the only count where the two agree.
- ``num_ca_layers: 0`` switches the cross stream off and JTCSE is then EXACTLY TNCSE, ICNCE with a fixed
  query side included (no R is drawn): the paper's "w/o CAEL" column is TNCSE. Default 6 (paper's best for
  12 layers); it must divide the backbone's depth (e.g. 1, 2, 3 or 6 for the 6-layer MiniLM).
- Only the selected side of the R-mixture is computed (R is 0 or 1, so the value and gradient are identical).
- Stage-2 dropout: JTCSE's released scripts set none, so its presets keep the backbone's own 0.1 (TNCSE's
  presets use TNCSE's reference values instead).
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field
from torch import Tensor

from cselab.losses import cross_encoder_info_nce
from cselab.methods.base import StepContext, register_method
from cselab.methods.tncse import TNCSE, TNCSEOptions, TwinViews, global_stack, split_copies
from cselab.models.cross_attention import cael_positions, cross_stream_cls, encoder_layers


class JTCSEOptions(TNCSEOptions):
    num_ca_layers: int = Field(6, ge=0, description="number of cross-attention encoder layers; 0 = TNCSE")


def draw_query_side(generator: torch.Generator) -> int:
    """``R ~ Bernoulli(0.5)`` from the run's generator: 1 = encoder I queries, 0 = encoder II queries."""
    return int(torch.randint(0, 2, (), generator=generator))


@register_method
class JTCSE(TNCSE):
    name = "jtcse"
    preset_dir = "jtcse"
    Options = JTCSEOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        for encoder in self.encoders:  # validate the CAEL layout up front, not at the first step
            cael_positions(len(encoder_layers(encoder.backbone)), self.options.num_ca_layers)

    def cross_views(self, views: TwinViews) -> tuple[Tensor, Tensor]:
        """``(c_I, c_II)`` ``[2b, d]``: the cross streams' first tokens, started from this step's ordinary passes."""
        return cross_stream_cls(
            self.encoder_1.backbone, self.encoder_2.backbone,
            views.outputs[0].hidden_states, views.outputs[1].hidden_states,
            views.features["attention_mask"], self.options.num_ca_layers,
        )

    def side_embeddings(self, views: TwinViews) -> dict[str, Tensor]:
        """``cI``, ``cII`` (:meth:`cross_views`) as per-row copies ``c1a`` ... ``c2b``."""
        if self.options.num_ca_layers == 0 or not self.active("icnce"):
            return {}
        c_1, c_2 = self.cross_views(views)
        out: dict[str, Tensor] = {}
        split_copies(out, "c1", c_1)
        split_copies(out, "c2", c_2)
        return out

    def interaction_nce(self, h_1: Tensor, h_2: Tensor, embeddings: dict[str, Tensor], ctx: StepContext) -> Tensor:
        if self.options.num_ca_layers == 0:
            return super().interaction_nce(h_1, h_2, embeddings, ctx)
        r = draw_query_side(ctx.generator)
        c_1, c_2 = global_stack(embeddings, "c1"), global_stack(embeddings, "c2")
        tau = self.options.temperature
        if r == 1:
            return cross_encoder_info_nce(h_1, h_2, tau) + cross_encoder_info_nce(c_1, c_2, tau)
        return cross_encoder_info_nce(h_2, h_1, tau) + cross_encoder_info_nce(c_2, c_1, tau)
