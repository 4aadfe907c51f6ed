"""Prompt templates (CoT-BERT): the sentence is placed into a template and read at the last mask token.

A template is configuration: a string with one ``[X]`` (the sentence) and ``[MASK]`` placeholders, where
``[MASK]`` stands for whatever the tokenizer's mask token is (``[MASK]``, ``<mask>``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..errors import CselabError

SENTENCE_SLOT = "[X]"
MASK_SLOT = "[MASK]"


@dataclass(frozen=True)
class PromptTemplate:
    """One template, e.g. ``The sentence of "[X]" means [MASK], so it can be summarized as [MASK].``"""

    text: str

    def __post_init__(self) -> None:
        if self.text.count(SENTENCE_SLOT) != 1:
            raise CselabError(f"a prompt template needs exactly one {SENTENCE_SLOT}: {self.text!r}")
        if MASK_SLOT not in self.text:
            raise CselabError(f"a prompt template needs at least one {MASK_SLOT}: {self.text!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptTemplate:
        return cls(text=data["text"])

    def _parts(self, tokenizer: Any) -> tuple[list[int], list[int]]:
        """Token ids before and after the sentence, with the model's start and end tokens."""
        if tokenizer.mask_token is None:
            raise CselabError("prompt templates need a tokenizer with a mask token")
        prefix, suffix = self.text.replace(MASK_SLOT, tokenizer.mask_token).split(SENTENCE_SLOT)
        start = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        end = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        pre = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix.strip() else []
        post = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix.strip() else []
        return start + pre, post + end

    def token_rows(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> tuple[list[list[int]], list[int], int]:
        """Unpadded id rows, the sentence length of each row, and the prefix length.

        The sentence is tokenised WITHOUT special tokens and truncated to ``max_length`` tokens; the
        template parts are tokenised once.
        """
        prefix, suffix = self._parts(tokenizer)
        sentences = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_length)
        rows, lengths = [], []
        for ids in sentences["input_ids"]:
            rows.append(prefix + ids + suffix)
            lengths.append(len(ids))
        return rows, lengths, len(prefix)

    def tokenize(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> dict[str, Tensor]:
        """Padded ``input_ids``/``attention_mask`` of the templated sentences (pad to the longest row)."""
        rows, _, _ = self.token_rows(tokenizer, texts, max_length)
        return pad_rows(rows, tokenizer.pad_token_id)


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> dict[str, Tensor]:
    """Right-pad id rows to the longest one."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}
