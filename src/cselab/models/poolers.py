"""Poolers: how a sentence vector is read off an encoder's hidden states (docs/methods.md#building-blocks).

``cls`` and ``cls_before_pooler`` read the same vector (the first token of the last layer); they differ
only in whether the train-only MLP head is applied during training, which the :class:`Encoder` decides.
"""

from __future__ import annotations

import torch
from torch import Tensor

from cselab.errors import CselabError, UsageError
from cselab.vocabulary import POOLERS


def check_pooler(name: str) -> str:
    """Return ``name`` if it is a known pooler, else raise a one-line :class:`~cselab.errors.UsageError`."""
    if name not in POOLERS:
        raise UsageError(f"unknown pooler {name!r}; choose one of: {', '.join(POOLERS)}")
    return name


def masked_mean(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Mean of ``hidden`` [B, T, d] over the positions where ``attention_mask`` [B, T] is 1."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def last_token_position(input_ids: Tensor, token_id: int) -> Tensor:
    """Index of the LAST occurrence of ``token_id`` in each row of ``input_ids`` [B, T].

    Raises if a row does not contain the token (a prompt template without the mask token).
    """
    hits = input_ids == token_id
    if not bool(hits.any(dim=1).all()):
        raise CselabError("mask pooling needs the tokenizer's mask token in every input (check the prompt template)")
    positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
    return torch.where(hits, positions, torch.full_like(positions, -1)).amax(dim=1)


def pool(
    name: str,
    hidden_states: tuple[Tensor, ...],
    attention_mask: Tensor,
    *,
    input_ids: Tensor | None = None,
    backbone_pooler_output: Tensor | None = None,
    mask_token_id: int | None = None,
) -> Tensor:
    """Read one vector per sentence.

    ``hidden_states`` is the backbone's tuple (embeddings, layer 1, ..., layer n); only ``first_last_avg``
    needs more than its last element.
    """
    last = hidden_states[-1]
    if name in ("cls", "cls_before_pooler"):
        return last[:, 0]
    if name == "mean":
        return masked_mean(last, attention_mask)
    if name == "first_last_avg":
        # SimCSE's definition: average of the first layer's and the last layer's token states, then mean-pool
        return masked_mean((hidden_states[1] + last) / 2, attention_mask)
    if name == "pooler":
        if backbone_pooler_output is None:
            raise CselabError("pooler 'pooler' needs a backbone with a pooler layer (this one has none)")
        return backbone_pooler_output
    if name == "mask":
        if input_ids is None or mask_token_id is None:
            raise CselabError("pooler 'mask' needs input ids and a tokenizer with a mask token")
        rows = torch.arange(last.shape[0], device=last.device)
        return last[rows, last_token_position(input_ids, mask_token_id)]
    raise UsageError(f"unknown pooler {name!r}; choose one of: {', '.join(POOLERS)}")
