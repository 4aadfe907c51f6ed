"""The encoder: an HF backbone, a pooler and an optional train-only MLP head.

One class serves every backbone family (BERT, RoBERTa, MPNet, ...): what differs between them (mask
token, special tokens) comes from the tokenizer, never from per-family code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from cselab.errors import CselabError, UsageError
from cselab.models import st_layout
from cselab.models.backbone import load_backbone
from cselab.models.kinds import register_kind
from cselab.models.poolers import check_pooler, pool
from cselab.models.prompts import PromptTemplate, pad_rows
from cselab.reporter import report

# poolers that sentence-transformers' own modules implement
ST_POOLERS = ("cls", "cls_before_pooler", "mean", "pooler", "first_last_avg")
HEAD_FILE = "train_head.safetensors"
# the cselab sentence-transformers module for encoders no standard module chain expresses (cselab.st_modules)
ST_ENCODER_MODULE = "cselab.st_modules.Encoder"


def max_positions(backbone: nn.Module) -> int | None:
    """How many tokens ``backbone`` can number: ``max_position_embeddings``, less the ``padding_idx + 1`` slots
    that RoBERTa-style embeddings (position ids start after the padding index) never use; None if unknown."""
    n = getattr(getattr(backbone, "config", None), "max_position_embeddings", None)
    if not isinstance(n, int):
        return None
    padding_idx = getattr(getattr(backbone, "embeddings", None), "padding_idx", None)
    return n - (padding_idx + 1) if isinstance(padding_idx, int) else n


def check_length(model: nn.Module, length: int, what: str) -> None:
    """Refuse an explicitly requested token length that some encoder of ``model`` has no positions for."""
    for module in model.modules():
        limit = getattr(module, "position_limit", None)
        if isinstance(module, Encoder) and limit is not None and length > limit:
            raise UsageError(f"{what} {length} is longer than the model's {limit} position embeddings; "
                              f"use at most {limit}")


class MLPHead(nn.Module):
    """SimCSE's train-only projection ``tanh(W x + b)`` (d -> d)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.dense(x))


@register_kind
class Encoder(nn.Module):
    """Backbone + pooler (+ train-only head, + optional prompt template).

    ``forward(features, apply_head=True)`` is the training path; :meth:`encode` is the inference path,
    which never applies the head (SimCSE's ``mlp_only_train``).
    """

    kind = "encoder"

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        *,
        pooler: str = "cls",
        max_length: int = 256,
        head: MLPHead | None = None,
        prompt: PromptTemplate | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooler = check_pooler(pooler)
        self.position_limit = max_positions(backbone)
        # a default length (256 for inference) is cut to what the backbone can number; an explicit one is
        # checked by the caller (check_length) so the user hears of it
        self.max_length = min(int(max_length), self.position_limit or int(max_length))
        self.head = head
        self.prompt = prompt
        # tokenised once: every batch reuses the template's ids
        self._compiled_prompt = prompt.compile(tokenizer) if prompt is not None else None
        if pooler == "mask" and tokenizer.mask_token_id is None:
            raise CselabError("pooler 'mask' needs a tokenizer with a mask token")

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        *,
        pooler: str = "cls",
        max_length: int = 256,
        with_head: bool = False,
        dropout: float | None = None,
        prompt: PromptTemplate | None = None,
    ) -> Encoder:
        """Load a backbone (local HF directory or hub name) and wrap it; ``with_head`` adds a fresh MLP."""
        backbone, tokenizer = load_backbone(name_or_path, dropout=dropout)
        head = MLPHead(backbone.config.hidden_size) if with_head else None
        return cls(backbone, tokenizer, pooler=pooler, max_length=max_length, head=head, prompt=prompt)

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # -- tokenisation -------------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str], max_length: int | None = None) -> dict[str, Tensor]:
        """Token ids and attention mask, padded to the longest row (dynamic padding).

        Built from :meth:`token_rows`, the one tokenisation path shared by training and :meth:`encode`.
        """
        return pad_rows(self.token_rows(texts, max_length), self.tokenizer.pad_token_id)

    def token_rows(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Unpadded token ids of each text (with special tokens / template)."""
        max_length = max_length or self.max_length
        if self._compiled_prompt is not None:
            return self._compiled_prompt.token_rows(self.tokenizer, texts, max_length)
        return self.tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]

    # -- forward ------------------------------------------------------------------------------------
    def hidden_states(self, features: dict[str, Tensor], *, all_layers: bool = True, **kwargs: Any) -> Any:
        """The backbone's outputs; with ``all_layers`` every layer's hidden states too."""
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "inputs_embeds")}
        return self.backbone(**inputs, output_hidden_states=all_layers, return_dict=True, **kwargs)

    def pool_outputs(self, outputs: Any, features: dict[str, Tensor]) -> Tensor:
        layers = outputs.hidden_states if outputs.hidden_states is not None else (outputs.last_hidden_state,)
        return pool(
            self.pooler,
            layers,
            features["attention_mask"],
            input_ids=features.get("input_ids"),
            backbone_pooler_output=getattr(outputs, "pooler_output", None),
            mask_token_id=self.tokenizer.mask_token_id,
        )

    def forward(self, features: dict[str, Tensor], *, apply_head: bool = False) -> Tensor:
        outputs = self.hidden_states(features, all_layers=self.pooler == "first_last_avg")
        pooled = self.pool_outputs(outputs, features)
        if apply_head and self.head is not None:
            return self.head(pooled)
        return pooled

    def forward_by_length(self, features: dict[str, Tensor], *, groups: int = 4) -> Tensor:
        """:meth:`forward` (no head) of a right-padded batch run as up to ``groups`` sub-batches of similar length,
        each padded only to its own longest row; the rows come back in the batch's order. Why: a batch whose rows
        were put together by meaning (a sentence and its neighbours) mixes short lines with long passages, and one
        long row would make every row pay for its padding. The result equals :meth:`forward`'s up to dropout."""
        mask = features["attention_mask"]
        rows = mask.shape[0]
        if groups <= 1 or rows <= 1:
            return self(features)
        lengths = mask.sum(dim=1).cpu()  # one device sync for the whole batch
        order = torch.argsort(lengths, descending=True)
        pooled = []
        for part in torch.tensor_split(order, min(groups, rows)):
            width = int(lengths[part[0]])  # the longest row of the part comes first
            index = part.to(mask.device)
            pooled.append(self({k: v[index, :width] for k, v in features.items()}))
        return torch.cat(pooled)[torch.argsort(order).to(mask.device)]

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 64,
        progress: bool = False,
        normalize: bool = False,
    ) -> Tensor:
        """Inference embeddings [N, d] (float32, CPU), in the order of ``texts``.

        Batches are formed from length-sorted texts (less padding), then the original order is restored; a batch
        of long texts holds fewer than ``batch_size`` (:func:`~cselab.runtime.memory.inference_batches`), so the
        memory held is the encoder's to bound, whatever the caller asks (the default recipe fitted its targets 64
        passages of 256 tokens at a time). With ``progress`` the reporter in effect shows a bar if it shows bars
        (:mod:`cselab.reporter`).
        """
        from cselab.runtime.memory import inference_batches

        was_training = self.training
        self.eval()
        rows = self.token_rows(texts)
        order: list[int] = []
        chunks = []
        device = self.device
        bar = report().bar(total=len(texts), desc="encode", unit="sent", show=progress)
        for idx in inference_batches([len(row) for row in rows], batch_size, getattr(self.backbone, "config", None)):
            order += idx
            features = {k: v.to(device)
                        for k, v in pad_rows([rows[i] for i in idx], self.tokenizer.pad_token_id).items()}
            chunks.append(self(features).float().cpu())
            bar.update(len(idx))
        bar.close()
        self.train(was_training)
        if not chunks:
            return torch.empty(0, self.hidden_size)
        sorted_emb = torch.cat(chunks)
        out = torch.empty_like(sorted_emb)
        out[torch.tensor(order)] = sorted_emb
        return torch.nn.functional.normalize(out, dim=-1) if normalize else out

    # -- persistence --------------------------------------------------------------------------------
    @staticmethod
    def card_summary(description: dict[str, Any]) -> str:
        prompt = description.get("prompt")
        text = f"one encoder, pooler `{description.get('pooler')}`, max length {description.get('max_length')}"
        return text + (f", prompt template `{prompt['text']}`." if prompt else ".")

    @staticmethod
    def needs_cselab_module(description: dict[str, Any]) -> bool:
        # sentence-transformers' own Pooling covers these; a prompt or the [MASK] pooler needs cselab's module
        return bool(description.get("prompt")) or description.get("pooler") not in ST_POOLERS

    def describe(self) -> dict[str, Any]:
        """The JSON-serialisable description stored in ``cselab.json``."""
        return {
            "kind": self.kind,
            "pooler": self.pooler,
            "max_length": self.max_length,
            "head": HEAD_FILE if self.head is not None else None,
            "prompt": self.prompt.to_dict() if self.prompt is not None else None,
        }

    def save_files(self, path: Path) -> None:
        """Backbone + tokenizer (HF layout), the train-only head, and the sentence-transformers modules."""
        from safetensors.torch import save_file

        self.backbone.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        if self.head is not None:
            save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}, path / HEAD_FILE)
        standard = self._standard_st_modules()
        if standard is None:
            st_layout.write_modules(path, [st_layout.StModule(ST_ENCODER_MODULE)])
        else:
            modules, transformer = standard
            st_layout.write_modules(path, modules, transformer=transformer)

    def _standard_st_modules(self) -> tuple[list[st_layout.StModule], dict[str, Any]] | None:
        """The chain of standard sentence-transformers modules that computes exactly :meth:`encode`, or None
        where there is none (a prompt template, mask pooling, a pooler layer whose activation is not tanh)."""
        if self.prompt is not None or self.pooler == "mask":
            return None
        d = self.hidden_size
        transformer = st_layout.transformer_config(self.max_length)
        if self.pooler in ("cls", "cls_before_pooler", "mean"):
            return [st_layout.StModule(st_layout.TRANSFORMER),
                    st_layout.pooling(d, "mean" if self.pooler == "mean" else "cls")], transformer
        if self.pooler == "pooler":
            # the backbone's pooler layer is tanh(W h_[CLS] + b): CLS pooling, then a Dense holding W, b with tanh
            layer = getattr(self.backbone, "pooler", None)
            dense, activation = getattr(layer, "dense", None), getattr(layer, "activation", None)
            if not isinstance(dense, nn.Linear) or not isinstance(activation, nn.Tanh):
                return None
            config = {"in_features": d, "out_features": dense.out_features, "bias": dense.bias is not None,
                      "activation_function": st_layout.TANH}
            weights = {"linear.weight": dense.weight, **({"linear.bias": dense.bias} if dense.bias is not None else {})}
            return [st_layout.StModule(st_layout.TRANSFORMER), st_layout.pooling(d, "cls"),
                    st_layout.StModule(st_layout.DENSE, "2_Dense", config, weights)], transformer
        if self.pooler == "first_last_avg":
            # (h_1 + h_L) / 2 is a layer average with weight 1 on layer 1 and layer L and 0 between, then mean
            layers = int(self.backbone.config.num_hidden_layers)
            weights = torch.zeros(layers)
            weights[0] = weights[-1] = 1.0
            config = {"word_embedding_dimension": d, "layer_start": 1, "num_hidden_layers": layers}
            return [st_layout.StModule(st_layout.TRANSFORMER),
                    st_layout.StModule(st_layout.WEIGHTED_LAYER_POOLING, "1_WeightedLayerPooling", config,
                                       {"layer_weights": weights}),
                    st_layout.pooling(d, "mean", "2_Pooling")], st_layout.transformer_config(
                        self.max_length, output_hidden_states=True)
        return None

    @classmethod
    def load_saved(cls, source: Path, description: dict[str, Any], *, pooler: str | None = None,
                   max_length: int | None = None) -> Encoder:
        """Load what :meth:`save_files` wrote; ``pooler``/``max_length`` override the saved ones."""
        from safetensors.torch import load_file

        prompt = PromptTemplate.from_dict(description["prompt"]) if description.get("prompt") else None
        encoder = cls.from_pretrained(
            source,
            pooler=pooler or description.get("pooler", "cls"),
            max_length=max_length or description.get("max_length", 256),
            prompt=prompt,
        )
        if description.get("head"):
            from safetensors import SafetensorError

            encoder.head = MLPHead(encoder.hidden_size)
            try:
                encoder.head.load_state_dict(load_file(source / str(description["head"])))
            except (OSError, RuntimeError, SafetensorError) as exc:
                raise CselabError(f"{source / str(description['head'])}: "
                                  f"the head's weights cannot be read ({exc})") from exc
        return encoder


@contextlib.contextmanager
def encoding_length(model: Any, max_length: int | None) -> Iterator[None]:
    """``model`` encodes up to ``max_length`` tokens inside the block (``None``: its own length), at most as many as
    its positions number: a model scored during training is set to the length it trains at, and long texts would be
    cut to it."""
    if max_length is None:
        yield
        return
    trained = model.max_length
    model.max_length = min(max_length, getattr(model, "position_limit", None) or max_length)
    try:
        yield
    finally:
        model.max_length = trained
