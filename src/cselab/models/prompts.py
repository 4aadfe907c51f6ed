"""Prompt templates (CoT-BERT): the sentence is placed into a template and read at the last mask token.

A template is configuration: a string with one ``[X]`` (the sentence) and ``[MASK]`` placeholders, where
``[MASK]`` stands for whatever the tokenizer's mask token is (``[MASK]``, ``<mask>``, ...).
:meth:`PromptTemplate.compile` tokenises a template once for a tokenizer; the resulting
:class:`CompiledTemplate` builds the rows of a batch and CoT-BERT's empty ([PAD]-filled) templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from cselab.errors import CselabError

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

    def compile(self, tokenizer: Any) -> CompiledTemplate:
        """The template's token ids around the sentence for ``tokenizer`` (tokenised once, reused per batch)."""
        prefix, suffix = self._parts(tokenizer)
        return CompiledTemplate(prefix=tuple(prefix), suffix=tuple(suffix), pad_id=tokenizer.pad_token_id,
                                sentence_lead=self.sentence_lead)

    @property
    def sentence_lead(self) -> str:
        """``" "`` when the template has whitespace right before ``[X]``, else ``""``.

        That space is tokenised WITH the sentence, not with the prefix: byte-level BPE (RoBERTa) marks a
        word's leading space inside the word's token ("Ġword"), so a space tokenised alone at the end of
        the prefix would become a stray "Ġ" token and the first word would lose its space marker.
        WordPiece ignores the space either way.
        """
        before = self.text.split(SENTENCE_SLOT)[0]
        return " " if before[-1:].isspace() else ""

    def _parts(self, tokenizer: Any) -> tuple[list[int], list[int]]:
        """Token ids before and after the sentence, with the model's start and end tokens."""
        if tokenizer.mask_token is None:
            raise CselabError("prompt templates need a tokenizer with a mask token")
        prefix, suffix = self.text.replace(MASK_SLOT, tokenizer.mask_token).split(SENTENCE_SLOT)
        prefix = prefix.rstrip()  # the space before the sentence goes with the sentence (sentence_lead)
        start = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        end = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        pre = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix.strip() else []
        post = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix.strip() else []
        return start + pre, post + end


@dataclass(frozen=True)
class CompiledTemplate:
    """A template tokenised for one tokenizer: the ids before and after the sentence slot."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    pad_id: int
    sentence_lead: str = ""  # prepended to each sentence before tokenising (PromptTemplate.sentence_lead)

    def sentence_ids(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> list[list[int]]:
        """The sentences (each prefixed with ``sentence_lead``) tokenised WITHOUT special tokens, each
        truncated to ``max_length`` tokens; the template parts are not re-tokenised."""
        texts = [self.sentence_lead + t for t in texts] if self.sentence_lead else list(texts)
        return tokenizer(texts, add_special_tokens=False, truncation=True, max_length=max_length)["input_ids"]

    def token_rows(self, tokenizer: Any, texts: Sequence[str], max_length: int) -> list[list[int]]:
        """Unpadded id rows ``prefix + sentence + suffix`` of ``texts`` (sentences truncated to ``max_length``)."""
        return self.rows(self.sentence_ids(tokenizer, texts, max_length))

    def rows(self, sentence_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """``prefix + sentence + suffix`` for each sentence's ids (unpadded)."""
        return [[*self.prefix, *ids, *self.suffix] for ids in sentence_ids]

    def empty_rows(self, lengths: Sequence[int]) -> list[list[int]]:
        """CoT-BERT's empty templates: the sentence slot filled with ``n`` pad ids for each length ``n``.

        A row has exactly the length of the row of an ``n``-token sentence and the same ids at every
        position outside the slot, so with an attention mask of ones over the row (what :func:`pad_rows`
        gives) token positions line up with the sentence's row one to one. Models that number positions
        by counting non-pad ids (RoBERTa) would misnumber the slot; :mod:`cselab.methods.cot_bert` feeds
        these rows as embeddings so that every family numbers them sequentially.
        """
        return [[*self.prefix, *([self.pad_id] * int(n)), *self.suffix] for n in lengths]


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> dict[str, Tensor]:
    """Right-pad id rows to the longest one; the attention mask is 1 over each row's own length."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}
