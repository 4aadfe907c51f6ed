"""TNCSE stage 2 (docs/methods.md#tncse; TNCSE Eqs. 4-8): twin encoders with a tensor-norm constraint.

Two encoders E_I and E_II, each loaded from a stage-1 SimCSE model directory (``method_options.encoder_1``
and ``encoder_2``; the pipeline in :mod:`cselab.training.pipeline` trains them and fills these in), are
trained together. Both see identical token ids (the tokenizer of encoder 1; the vocabularies must match).
Each sentence is encoded twice by each encoder with dropout on, as ONE 2B forward pass per encoder, giving
the last-layer CLS vectors ``hI, hI+, hII, hII+`` (no MLP) and their pooler outputs ``P = P_k(h)``, where
``P_k`` is encoder k's trained stage-1 MLP (``tanh(W h + b)``, ``train_head.safetensors``).

Loss terms (names = ``loss_weights`` keys; weight 0 switches a term off and it is not computed):

- ``nce``   = ``L_NCE(hI, hI+) + L_NCE(hII, hII+)`` (Eq. 4);
- ``icnce`` = ``X(hI-stack, hII-stack)``: cross-encoder InfoNCE over the 2B-row stacks (Eq. 5), the positive of
  row k is the OTHER dropout copy of the same sentence in the other encoder, the same-copy partner is masked;
- ``ictn``  = ``L_TN(I, II+) + L_TN(II, I+)`` (Eqs. 6-7) with the cosine clamped at ``cos_floor`` (1e-4).

Every embedding entering a loss is gathered over data-parallel ranks (global in-batch negatives; the
per-row ICTN mean is then the global mean too). The inference model is :class:`TwinModel`: ``h_I + h_II``,
the sum of the two last-layer CLS vectors without pooler (the MLPs are saved with each encoder for reuse).

**Decisions** (also in docs/methods.md#tncse):
- A stage-1 model without a trained MLP is an error, unless ``allow_backbone_pooler: true``, which uses the
  backbone's own pooler layer (BERT's ``pooler.dense`` + tanh) as ``P`` instead.
- ``h`` is always the first token of the last layer; ``model.pooler`` must be ``cls``/``cls_before_pooler``.
  ``model.backbone`` is not used (the encoders come from ``encoder_1``/``encoder_2``); ``model.dropout`` is
  the stage-2 dropout of both encoders. TNCSE's presets use its reference code's values (0.00025 BERT, 0.0175
  RoBERTa; the paper's text gives none); JTCSE's keep the backbone's own 0.1.
- The MLPs ``P`` stay trainable in stage 2 (they only receive gradient from ICTN).
- ICNCE uses encoder I as the query side (Eq. 5 as written); JTCSE adds the random side R.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from torch import Tensor

from cselab.config.stages import PipelineSpec
from cselab.errors import CselabError
from cselab.losses import cross_encoder_info_nce, info_nce, interaction_tensor_norm_loss
from cselab.methods.base import Method, MethodOptions, StepContext, register_method
from cselab.methods.simcse import duplicate
from cselab.models.encoder import HEAD_FILE, Encoder, MLPHead
from cselab.models.sentence_model import TwinModel, read_description


class TNCSEOptions(MethodOptions):
    encoder_1: str | None = Field(None, description="stage-1 model directory of encoder I (set by the pipeline)")
    encoder_2: str | None = Field(None, description="stage-1 model directory of encoder II (set by the pipeline)")
    allow_backbone_pooler: bool = Field(False,
                                        description="use the backbone's pooler as P when a stage-1 model has no MLP")
    cos_floor: float = Field(1e-4, gt=0.0, le=1.0, description="ICTN: lower clamp of the cosine inside the log")
    pipeline: PipelineSpec | None = Field(None, description="stage-1 recipe, read by cselab.training.pipeline")


def load_twin_encoder(path: str | Path, *, max_length: int, dropout: float | None,
                      allow_backbone_pooler: bool = False) -> Encoder:
    """A stage-1 encoder with its trained MLP as ``head`` (the pooler ``P`` of stage 2).

    Raises :class:`CselabError` if the directory has no MLP and ``allow_backbone_pooler`` is off, or if the
    fallback is requested but the backbone has no pooler layer either.
    """
    from safetensors.torch import load_file

    path = Path(path)
    description = read_description(path) if path.is_dir() else None
    if description is not None and description.get("kind") != "encoder":
        raise CselabError(f"{path} holds a {description.get('kind')!r} model; a twin member must be a single encoder")
    encoder = Encoder.from_pretrained(path, pooler="cls", max_length=max_length, dropout=dropout)
    head_name = (description or {}).get("head")
    if head_name:
        encoder.head = MLPHead(encoder.hidden_size)
        encoder.head.load_state_dict(load_file(str(path / head_name)))
    elif not allow_backbone_pooler:
        raise CselabError(
            f"{path} has no trained MLP ({HEAD_FILE}): TNCSE/JTCSE use each stage-1 encoder's MLP as its pooler P. "
            "Train stage 1 with model.pooler=cls, or set method_options.allow_backbone_pooler=true to use the "
            "backbone's own pooler layer"
        )
    elif getattr(encoder.backbone, "pooler", None) is None:
        raise CselabError(f"{path} has neither a trained MLP ({HEAD_FILE}) nor a backbone pooler layer to use as P")
    return encoder


@dataclass
class TwinViews:
    """One step's forward passes: per encoder the HF outputs over the 2B batch ``[x; x]``, the CLS vectors
    ``h`` ``[2B, d]`` (rows ``0..B-1`` dropout copy 1, ``B..2B-1`` copy 2) and the pooler outputs ``p``."""

    features: dict[str, Tensor]
    outputs: tuple[Any, Any]
    h: tuple[Tensor, Tensor]
    p: tuple[Tensor, Tensor] | None


def global_stack(embeddings: dict[str, Tensor], name: str) -> Tensor:
    """The gathered copies ``<name>a``, ``<name>b`` ``[B, d]`` -> the ``[2B, d]`` stack (copy 1 rows of every
    rank, then copy 2 rows)."""
    return torch.cat([embeddings[name + "a"], embeddings[name + "b"]])


def split_copies(out: dict[str, Tensor], name: str, stack: Tensor) -> None:
    """Store a local ``[2b, d]`` two-copy stack as ``<name>a`` (copy 1) and ``<name>b`` (copy 2), rows per example."""
    out[name + "a"], out[name + "b"] = stack.chunk(2)


@register_method
class TNCSE(Method):
    name = "tncse"
    terms = ("nce", "icnce", "ictn")
    Options = TNCSEOptions
    two_stage = True
    in_batch_negatives = True
    preset_dir = "tncse"
    views = 4  # two views through each of the twin encoders

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        options = self.options
        if not options.encoder_1 or not options.encoder_2:
            raise CselabError(
                f"method {self.name!r} needs two stage-1 models: set method_options.encoder_1 and encoder_2, or "
                "give a method_options.pipeline block and run the two-stage pipeline (cselab train runs it)"
            )
        if config.model.pooler not in ("cls", "cls_before_pooler"):
            raise CselabError(f"method {self.name!r} trains the first-token (CLS) vector; model.pooler must be cls")
        common = {"max_length": config.model.eval_max_length, "dropout": config.model.dropout,
                  "allow_backbone_pooler": options.allow_backbone_pooler}
        self.encoder_1 = load_twin_encoder(options.encoder_1, **common)
        self.encoder_2 = load_twin_encoder(options.encoder_2, **common)
        if self.encoder_1.hidden_size != self.encoder_2.hidden_size:
            raise CselabError(f"the twin encoders have hidden sizes {self.encoder_1.hidden_size} and "
                              f"{self.encoder_2.hidden_size}; h_I + h_II needs equal ones")
        if self.encoder_1.tokenizer.get_vocab() != self.encoder_2.tokenizer.get_vocab():
            raise CselabError("the twin encoders have different vocabularies; both must read the same token ids")

    @property
    def encoders(self) -> tuple[Encoder, Encoder]:
        return self.encoder_1, self.encoder_2

    def collate(self, examples: Sequence[str]) -> dict[str, Any]:
        return self.encoder_1.tokenize(examples, max_length=self.config.model.max_length)

    # -- forward --------------------------------------------------------------------------------------
    def twin_views(self, batch: dict[str, Tensor], *, with_pooler: bool) -> TwinViews:
        """Both dropout copies through both encoders (one 2B pass each); ``P`` only when asked for."""
        features = duplicate(batch)
        outputs = tuple(encoder.hidden_states(features) for encoder in self.encoders)
        h = tuple(out.hidden_states[-1][:, 0] for out in outputs)
        p = None
        if with_pooler:
            p = tuple(
                encoder.head(hk) if encoder.head is not None else out.pooler_output
                for encoder, out, hk in zip(self.encoders, outputs, h, strict=True)
            )
        return TwinViews(features, outputs, h, p)

    # -- embeddings and losses ------------------------------------------------------------------------
    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        views = self.twin_views(batch, with_pooler=self.active("ictn"))
        out: dict[str, Tensor] = {}
        for k, h in enumerate(views.h, start=1):
            split_copies(out, f"h{k}", h)
        if views.p is not None:
            for k, p in enumerate(views.p, start=1):
                split_copies(out, f"p{k}", p)
        out.update(self.side_embeddings(views))
        return out

    def side_embeddings(self, views: TwinViews) -> dict[str, Tensor]:
        """Further per-row outputs of the passes (JTCSE's cross branch); none for TNCSE."""
        return {}

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        h_1, h_2 = global_stack(embeddings, "h1"), global_stack(embeddings, "h2")
        tau = self.options.temperature
        terms: dict[str, Tensor] = {}
        if self.active("nce"):
            terms["nce"] = info_nce(*h_1.chunk(2), tau) + info_nce(*h_2.chunk(2), tau)
        if self.active("icnce"):
            terms["icnce"] = self.interaction_nce(h_1, h_2, embeddings, ctx)
        if self.active("ictn"):
            p_1, p_2 = global_stack(embeddings, "p1"), global_stack(embeddings, "p2")
            terms["ictn"] = interaction_tensor_norm_loss(
                *h_1.chunk(2), *h_2.chunk(2), *p_1.chunk(2), *p_2.chunk(2), cos_floor=self.options.cos_floor
            )
        return terms

    def interaction_nce(self, h_1: Tensor, h_2: Tensor, embeddings: dict[str, Tensor], ctx: StepContext) -> Tensor:
        """ICNCE (Eq. 5) on the global stacks ``[2B, d]``; encoder I is the query side."""
        return cross_encoder_info_nce(h_1, h_2, self.options.temperature)

    def inference_model(self) -> TwinModel:
        return TwinModel(self.encoder_1, self.encoder_2)
