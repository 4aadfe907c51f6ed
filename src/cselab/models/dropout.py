"""Dropout control: switching it off for one forward pass (SimCSE++'s off-dropout sampling) and back on
afterwards, and cheaper dropout masks for the training step (``model.dropout_masks: bits``, below).

In HF models dropout is not only ``nn.Dropout`` modules: attention layers pass their dropout
probability to the attention kernel only while *their own* ``training`` flag is set
(``dropout=0.0 if not self.training else self.dropout.p``), and some families keep that probability as
a plain float attribute. Every one of these reads the ``training`` flag of the module that applies it,
so the complete and family-independent switch is the ``training`` flag of every submodule. This is not
``torch.no_grad``: gradients flow through the dropout-free pass as usual.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from cselab.errors import CselabError


@contextmanager
def dropout_disabled(module: nn.Module) -> Iterator[nn.Module]:
    """Run the body with every dropout of ``module`` (all submodules) off; restore each flag afterwards.

    Each submodule gets back exactly the ``training`` flag it had before (also when the body raises),
    so a model that was partly in eval mode stays so.

    Example::

        with dropout_disabled(encoder):
            z0 = encoder(features, apply_head=True)   # deterministic, still differentiable
    """
    flags = [(m, m.training) for m in module.modules()]
    for m, _ in flags:
        m.training = False
    try:
        yield module
    finally:
        for m, was_training in flags:
            m.training = was_training


# HF attention layers that keep their dropout probability as a float (NomicBERT, ModernBERT) name it so
_FLOAT_DROPOUT_ATTRIBUTES = ("attention_dropout", "dropout")


def has_dropout(module: nn.Module) -> bool:
    """Whether training mode draws any dropout mask in ``module``: an ``nn.Dropout`` with ``p > 0``, or an
    attention layer's float dropout probability above 0 (read only while training, as above)."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            if m.p > 0:
                return True
            continue
        probabilities = (getattr(m, name, None) for name in _FLOAT_DROPOUT_ATTRIBUTES)
        if any(isinstance(p, float) and p > 0 for p in probabilities):
            return True
    return False


# -- cheaper dropout masks (model.dropout_masks: bits) ---------------------------------------------------
# torch's dropout draws a float per element (``bernoulli_``): 14% of a MiniLM SimCSE step on a CPU. One
# 64-bit random word gives FOUR 15-bit lanes instead (4x fewer draws), and a lane below
# ``round(p * 2**15)`` drops its element. The drop probability is thus p rounded to 1/32768 (0.1 ->
# 0.100006) and the kept elements are scaled by the exact inverse of the kept probability. The random
# stream differs from torch's, so this is a switch (off by default): old runs reproduce bit for bit only
# with torch's masks.
LANE_VALUES = 1 << 15
BITS_ATTENTION = "cselab_bits_dropout"


def bits_drop_threshold(p: float) -> int:
    """Lanes below this value drop their element (p rounded to a multiple of 1/32768)."""
    return round(p * LANE_VALUES)


def bits_keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> Tensor:
    """Boolean keep-mask of ``shape``: 15 random bits per element, four elements per 64-bit draw."""
    n = math.prod(shape)
    # random_() on int64 fills bits 0..62 uniformly (bit 63 is 0: masked off below with the sign bit)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_()
    lanes = words.view(torch.int16)[:n].view(shape) & 0x7FFF
    return lanes >= bits_drop_threshold(p)


def bits_dropout(x: Tensor, p: float) -> Tensor:
    """Inverted dropout of ``x`` with a :func:`bits_keep_mask` (differentiable; same expectation as ``x``)."""
    if p <= 0.0:
        return x
    threshold = bits_drop_threshold(p)
    if threshold >= LANE_VALUES:
        return torch.zeros_like(x)
    scale = LANE_VALUES / (LANE_VALUES - threshold)
    return x * bits_keep_mask(x.shape, p, x.device).to(x.dtype).mul_(scale)


class BitsDropout(nn.Dropout):
    """``nn.Dropout`` with :func:`bits_dropout` masks (same ``p``, same train/eval behaviour)."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return bits_dropout(x, self.p)


def bits_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                   dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Tensor, None]:
    """An HF attention function: PyTorch's SDPA without dropout; with dropout, the same maths written out
    (scores, mask, softmax, bits dropout, values), which is what SDPA itself runs on a CPU when dropout is on."""
    if dropout == 0.0:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=scaling,
                                      **kwargs)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # SDPA's convention: True = may attend
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    weights = bits_dropout(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


def register_bits_attention() -> None:
    """Make :data:`BITS_ATTENTION` an attention implementation HF models can be switched to (SDPA's masks)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(BITS_ATTENTION, bits_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(BITS_ATTENTION, sdpa_mask)


def use_dropout_masks(module: nn.Module, kind: str) -> int:
    """Switch every dropout of ``module`` to ``kind`` masks ('torch' changes nothing); returns how many.

    ``nn.Dropout`` modules become :class:`BitsDropout`; HF backbones whose attention goes through SDPA
    switch to :func:`bits_attention`, so the attention-probability dropout uses bits masks too.
    """
    if kind == "torch":
        return 0
    if kind != "bits":
        raise CselabError(f"unknown dropout_masks {kind!r}; choose 'torch' or 'bits'")
    register_bits_attention()
    switched = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                replacement = BitsDropout(child.p, child.inplace)
                replacement.train(child.training)
                setattr(parent, name, replacement)
                switched += 1
        config = getattr(parent, "config", None)
        if getattr(config, "_attn_implementation", None) == "sdpa":
            config._attn_implementation = BITS_ATTENTION
            switched += 1
    return switched
