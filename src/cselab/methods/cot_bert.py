"""CoT-BERT (docs/methods.md#cot-bert, seed paper 004): two-stage prompts, extended InfoNCE, [PAD] denoising.

Each sentence is placed into three templates (anchor, positive, hard negative; paper Table 1) and read at
the LAST mask token. The three templated batches are encoded as ONE forward pass of 3B rows.

- **[PAD] template denoising** (paper 3.3; ``denoise: true``): for a template and a sentence of n tokens,
  the empty template is the same id row with the sentence replaced by n pad ids, attention mask 1 over
  the whole row. Its last-mask vector ``h_hat(n)`` is subtracted: ``r = h - h_hat(n)``. The empty
  templates are encoded in the training step with gradients and dropout on, once per step per template
  and ONLY for the lengths present in the batch (the reference encodes every length up to 80 each step;
  the maths for the rows of the batch is the same). Denoising is training-only. The empty rows are
  sorted by length and encoded in ``denoise_chunks`` passes, each cut to its own width: right padding
  does not change the attended positions' outputs, so this only saves the padded tokens' compute.
- **Train-only MLP** (``mlp: true``) applied after the subtraction, as SimCSE's ``mlp_only_train``.
- **Extended InfoNCE** (Eq. 3) over ``r, r+, r-``; ``template_negatives: false`` drops its third block
  ``cos(r+_i, r-_j)`` (Table 4 ablation).
- **Inference**: an :class:`~cselab.models.encoder.Encoder` with ``prompt`` = the anchor template and
  pooler ``mask``, no denoising, no MLP. It is the saved model, so ``load_model(dir).encode(texts)`` and
  ``cselab eval`` template the sentences themselves.

Templates are configuration: ``templates`` names a set in ``cselab/templates/cot_bert.yaml`` (``bert``,
``roberta``) or is a mapping ``{anchor, positive, negative}``; the mask token comes from the tokenizer.

Decisions:

- Position alignment of the empty templates. BERT numbers positions 0..T-1 whatever the ids are, but
  RoBERTa-family models number them by counting NON-pad ids, which would give the pad-filled slot the
  padding position and shift every suffix token by n. The empty rows are therefore fed as
  ``inputs_embeds`` (the word embeddings of exactly the same ids): from embeddings every HF family
  numbers positions sequentially, which is exactly the numbering the sentence's row gets (a templated
  row has no pad id before its end). No per-family code.
- One extended-InfoNCE term, ``extended_info_nce`` (so ``loss_weights`` only scales it).
- The method requires ``model.pooler: mask`` and says so rather than silently overriding the config.
- Under data parallelism r, r+ and r- are gathered before the loss; the empty templates are per rank
  (they only depend on the rank's own lengths).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from cselab.errors import CselabError
from cselab.losses import extended_info_nce
from cselab.methods.base import Method, MethodOptions, StepContext, register_method
from cselab.models.backbone import last_layer_at, supports_rows_at
from cselab.models.encoder import Encoder
from cselab.models.poolers import last_token_position
from cselab.models.prompts import PromptTemplate, pad_rows

TEMPLATE_ROLES = ("anchor", "positive", "negative")
TEMPLATE_FILE = "cot_bert.yaml"


class TemplateSet(BaseModel):
    """The three CoT-BERT templates (each with one ``[X]`` and at least one ``[MASK]``)."""

    model_config = ConfigDict(extra="forbid")
    anchor: str
    positive: str
    negative: str

    def templates(self) -> tuple[PromptTemplate, PromptTemplate, PromptTemplate]:
        return tuple(PromptTemplate(getattr(self, role)) for role in TEMPLATE_ROLES)  # type: ignore[return-value]


@cache
def shipped_template_sets() -> dict[str, TemplateSet]:
    """The template sets shipped with cselab (package data ``templates/cot_bert.yaml``)."""
    text = resources.files("cselab").joinpath("templates", TEMPLATE_FILE).read_text(encoding="utf-8")
    return {name: TemplateSet.model_validate(entry) for name, entry in yaml.safe_load(text).items()}


def resolve_template_set(spec: str | TemplateSet) -> TemplateSet:
    """A shipped set by name, or the given set."""
    if isinstance(spec, TemplateSet):
        return spec
    sets = shipped_template_sets()
    if spec not in sets:
        choices = ", ".join(sorted(sets))
        raise CselabError(f"config: unknown CoT-BERT template set {spec!r}; choose one of: {choices} "
                          "or give {anchor, positive, negative}")
    return sets[spec]


class CoTBertOptions(MethodOptions):
    templates: str | TemplateSet = Field(
        "bert", description="set name in templates/cot_bert.yaml, or {anchor, positive, negative}"
    )
    template_negatives: bool = Field(True, description="keep the extended InfoNCE's cos(r+, r-) block (Eq. 3)")
    denoise: bool = Field(True, description="[PAD] template denoising r = h - h_hat(n) during training")
    mlp: bool = Field(True, description="train-only MLP on r (not used at inference)")
    denoise_chunks: int = Field(
        4, ge=1, description="forward passes the empty templates are split into by length (less padding; same maths)"
    )
    read_rows_only: bool = Field(
        False, description="compute the last layer only at the read [MASK] of each row (same maths, ~14% fewer "
                           "FLOPs; dropout masks are drawn for fewer elements, so another random stream)")


@register_method
class CoTBert(Method):
    name = "cot-bert"
    terms = ("extended_info_nce",)
    Options = CoTBertOptions
    in_batch_negatives = True
    preset_dir = "cot_bert"
    aliases = ("cot_bert", "cotbert")
    views = 3  # the anchor, positive and negative templates
    template_tokens = 20  # the templates' own tokens around each sentence

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if config.model.pooler != "mask":
            raise CselabError(
                f"config: cot-bert reads the last mask token; set model.pooler: mask (got {config.model.pooler!r})"
            )
        anchor, positive, negative = resolve_template_set(self.options.templates).templates()
        self.encoder = Encoder.from_pretrained(
            config.model.backbone,
            pooler="mask",
            max_length=config.model.eval_max_length,
            with_head=self.options.mlp,
            dropout=config.model.dropout,
            prompt=anchor,
        )
        tokenizer = self.encoder.tokenizer
        self.compiled = tuple(t.compile(tokenizer) for t in (anchor, positive, negative))
        if len({t.sentence_lead for t in self.compiled}) != 1:  # one tokenisation of the sentences serves all three
            raise CselabError("config: the CoT-BERT templates must agree on whether a space precedes [X]")

    def collate(self, examples: Sequence[str]) -> dict[str, Any]:
        """3B template rows (anchor block, positive block, negative block) and, when denoising, the empty
        templates of the batch's distinct lengths (3K rows, template-major) with each sentence's index k."""
        tokenizer = self.encoder.tokenizer
        sentences = self.compiled[0].sentence_ids(tokenizer, examples, self.config.model.max_length)
        batch: dict[str, Any] = pad_rows([row for t in self.compiled for row in t.rows(sentences)],
                                         tokenizer.pad_token_id)
        if self.options.denoise:
            lengths = [len(ids) for ids in sentences]
            distinct = sorted(set(lengths))
            empty = pad_rows([row for t in self.compiled for row in t.empty_rows(distinct)], tokenizer.pad_token_id)
            batch["empty_input_ids"], batch["empty_attention_mask"] = empty["input_ids"], empty["attention_mask"]
            position = {n: k for k, n in enumerate(distinct)}
            batch["length_index"] = torch.tensor([position[n] for n in lengths], dtype=torch.long)
            batch["empty_order"], batch["empty_chunks"] = self._length_chunks(
                empty["attention_mask"].sum(dim=1).tolist())
        return batch

    def _length_chunks(self, widths: list[int]) -> tuple[Tensor, list[tuple[int, int, int]]]:
        """Empty rows sorted by width and split into ``denoise_chunks`` groups, each ``(start, stop, width)``
        in that order. Planned here, on the host, so the training step never reads sizes off the device."""
        order = sorted(range(len(widths)), key=widths.__getitem__)
        bounds = torch.arange(len(order)).tensor_split(min(self.options.denoise_chunks, len(order)))
        chunks = [(int(g[0]), int(g[-1]) + 1, widths[order[int(g[-1])]]) for g in bounds]
        return torch.tensor(order, dtype=torch.long), chunks

    def template_bias(self, batch: dict[str, Any]) -> Tensor:
        """``h_hat`` for every one of the 3B rows: the last-mask vector of its template's empty row of the
        same length ([3B, d]); with gradients and dropout as the encoder currently is."""
        ids, mask, order = batch["empty_input_ids"], batch["empty_attention_mask"], batch["empty_order"]
        # rows grouped by length, each group cut to its own width: right padding never changes the
        # outputs at the attended positions, so this only saves the padded tokens' compute
        states = [self._last_mask_states(ids[order[a:b], :width], mask[order[a:b], :width])
                  for a, b, width in batch["empty_chunks"]]
        h_hat = torch.cat(states)[torch.argsort(order)]  # [3K, d], back in template-major order
        n_templates = len(self.compiled)
        distinct = h_hat.shape[0] // n_templates
        template = torch.arange(n_templates, device=ids.device).unsqueeze(1)
        return h_hat[(template * distinct + batch["length_index"].unsqueeze(0)).reshape(-1)]

    def _last_mask_states(self, ids: Tensor, mask: Tensor) -> Tensor:
        # fed as embeddings so that every family numbers positions sequentially (module docstring)
        embeds = self.encoder.backbone.get_input_embeddings()(ids)
        return self._read({"inputs_embeds": embeds, "attention_mask": mask}, ids)

    def _read(self, inputs: dict[str, Tensor], ids: Tensor) -> Tensor:
        """The last-[MASK] vector of each row; with ``read_rows_only`` the last layer runs at that row only."""
        if self.options.read_rows_only and supports_rows_at(self.encoder.backbone):
            return last_layer_at(self.encoder.backbone, inputs,
                                 last_token_position(ids, self.encoder.tokenizer.mask_token_id))
        outputs = self.encoder.hidden_states(inputs, all_layers=False)
        return self.encoder.pool_outputs(outputs, {"input_ids": ids, "attention_mask": inputs["attention_mask"]})

    def representations(self, batch: dict[str, Any]) -> Tensor:
        """Training representations of the 3B rows: ``MLP(h - h_hat)`` (each part as configured)."""
        h = self._read({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}, batch["input_ids"])
        if self.options.denoise:
            h = h - self.template_bias(batch)
        return self.encoder.head(h) if self.encoder.head is not None else h

    @property
    def supports_gradient_cache(self) -> bool:
        return False  # a batch is 3B template rows (anchor, positive, negative blocks): it cannot be cut by example

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        r, r_pos, r_neg = self.representations(batch).chunk(3)
        return {"r": r, "r_pos": r_pos, "r_neg": r_neg}

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        loss = extended_info_nce(embeddings["r"], embeddings["r_pos"], embeddings["r_neg"], self.options.temperature,
                                 self.options.template_negatives)
        return {"extended_info_nce": loss}

    def inference_model(self) -> Encoder:
        return self.encoder
