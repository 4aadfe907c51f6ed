"""Inference cost (GMACs for one sentence) and efficiency ``eta = score / GMAC`` (JTCSE Table VII).

The cost is *measured* from the model with :class:`torch.utils.flop_counter.FlopCounterMode`: one
forward pass of a single sentence (batch 1, ``seq_len`` tokens, attention mask all ones, no grad,
eval mode) is run and every counted floating-point operation is summed; MACs = FLOPs / 2 (the
counter counts a multiply-accumulate as 2 FLOPs). A twin / multi-tower model is a list of modules
and costs the sum of its members.

What is counted (measured on BERT-base, seq_len 64; see ``tests/test_analysis.py``):

* every matrix product: ``aten.mm``/``addmm``/``bmm``/``matmul`` -- the Q, K, V, output, FFN and
  pooler linear layers -- and the attention core ``Q K^T`` and ``P V`` (batched matmuls in the eager
  kernel, or the fused scaled-dot-product-attention kernels);
* the CPU fused kernel ``aten._scaled_dot_product_flash_attention_for_cpu`` (what ``sdpa`` runs on
  CPU) has no formula in torch's registry, so this module registers torch's own ``sdpa`` formula
  for it (and for ``_scaled_dot_product_fused_attention_overrideable``); without that the attention
  core would silently count 0 on CPU. With it, ``sdpa`` and ``eager`` give the same total;
* **not** counted (no FLOP formula in the counter, and negligible): the embedding lookup (a gather,
  no arithmetic), the embedding sum, LayerNorm, softmax, GELU/tanh, residual additions, dropout
  (identity in eval) and masking.
* the pooler (``BertPooler``: one 768x768 linear on [CLS], 0.00059 GMAC) is counted when the
  module has one and runs it.

BERT-base at 64 tokens: 5.4364 GMAC in the linear layers (12 x 453.0 M + 0.59 M pooler) plus
0.0755 GMAC of attention core = 5.5119 GMAC, within 2.1% of the 5.40 GMAC JTCSE reports. The paper
used ``thop``, which hooks ``nn.Module`` types (essentially the ``nn.Linear`` layers here) and does
not see the functional matmuls of the attention core; the linear-only part measured here, 5.436 GMAC
(10.87 for the twin vs the paper's 10.90), is the comparable figure (not verified against thop
itself, which is not a dependency). :attr:`CostReport.by_operator` keeps the split so either figure can be quoted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

__all__ = ["CostReport", "count_flops", "count_gmacs", "efficiency"]


def _sdpa_formula(
    query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any
) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _extra_formulas() -> dict[Any, Callable[..., int]]:
    """FLOP formulas for fused attention kernels missing from torch's registry."""
    from torch.utils.flop_counter import flop_registry

    out: dict[Any, Callable[..., int]] = {}
    for name in (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_fused_attention_overrideable",
    ):
        op = getattr(torch.ops.aten, name, None)
        if op is not None and op not in flop_registry:
            out[op] = _sdpa_formula
    return out


ForwardFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], Any]


def _default_forward(module: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
    return module(input_ids=input_ids, attention_mask=attention_mask)


def _vocab_size(module: nn.Module) -> int | None:
    config = getattr(module, "config", None)
    size = getattr(config, "vocab_size", None)
    if isinstance(size, int) and size > 0:
        return size
    get_emb = getattr(module, "get_input_embeddings", None)
    if callable(get_emb):
        emb = get_emb()
        if isinstance(emb, nn.Embedding):
            return emb.num_embeddings
    return None


@dataclass
class CostReport:
    """Measured inference cost of one sentence.

    ``gmacs``: total, summed over ``modules``; ``per_module``: GMACs of each member (twin -> 2
    entries); ``by_operator``: GMACs per aten operator summed over members (e.g.
    ``{"aten.addmm": 5.436, "aten.bmm": 0.0755}``); ``seq_len``/``batch_size``: the input counted.
    """

    gmacs: float
    per_module: list[float]
    by_operator: dict[str, float] = field(default_factory=dict)
    seq_len: int = 0
    batch_size: int = 1

    @property
    def gflops(self) -> float:
        """Total GFLOPs (= 2 x GMACs)."""
        return 2.0 * self.gmacs


def count_flops(
    module: nn.Module,
    seq_len: int = 64,
    *,
    batch_size: int = 1,
    forward: ForwardFn | None = None,
) -> tuple[int, dict[str, int]]:
    """FLOPs of one forward pass of ``module`` on a ``(batch_size, seq_len)`` input, measured with
    ``FlopCounterMode``. Returns ``(total_flops, flops_per_aten_operator)``.

    Inputs: token ids ``arange(seq_len) % vocab_size`` (ids do not change the count), attention mask
    all ones, on the module's device. ``forward(module, input_ids, attention_mask)`` overrides the
    default call ``module(input_ids=..., attention_mask=...)``. Runs under ``no_grad`` in eval mode;
    the module's train/eval mode is restored afterwards.
    """
    if seq_len < 1 or batch_size < 1:
        raise ValueError("seq_len and batch_size must be >= 1")
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    vocab = _vocab_size(module)
    ids = torch.arange(seq_len, device=device).expand(batch_size, seq_len)
    ids = ids % vocab if vocab else torch.zeros_like(ids)
    mask = torch.ones(batch_size, seq_len, dtype=torch.long, device=device)
    call = forward or _default_forward
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=_extra_formulas()) as counter:
            call(module, ids.contiguous(), mask)
    finally:
        module.train(was_training)
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return int(counter.get_total_flops()), by_op


def count_gmacs(
    model: nn.Module | Sequence[nn.Module],
    seq_len: int = 64,
    *,
    batch_size: int = 1,
    forward: ForwardFn | None = None,
) -> CostReport:
    """Inference cost in GMACs (10^9 multiply-accumulates) of ONE sentence of ``seq_len`` tokens.

    ``model``: an ``nn.Module`` callable as ``model(input_ids=..., attention_mask=...)`` (or via
    ``forward``), or a list of them -- a twin/multi-tower ensemble whose members all encode the
    sentence; their costs are summed. MACs = FLOPs / 2 as measured by :func:`count_flops`; the
    total is divided by ``batch_size`` so the figure is always per sentence. See the module
    docstring for what is and is not counted. JTCSE Table VII (5.40 GMAC single BERT-base, 10.90
    twin).
    """
    modules = [model] if isinstance(model, nn.Module) else list(model)
    if not modules:
        raise ValueError("count_gmacs needs at least one module")
    per_module: list[float] = []
    by_operator: dict[str, float] = {}
    for m in modules:
        total, by_op = count_flops(m, seq_len, batch_size=batch_size, forward=forward)
        per_module.append(total / 2.0 / 1e9 / batch_size)
        for op, n in by_op.items():
            by_operator[op] = by_operator.get(op, 0.0) + n / 2.0 / 1e9 / batch_size
    return CostReport(
        gmacs=float(sum(per_module)),
        per_module=per_module,
        by_operator=by_operator,
        seq_len=seq_len,
        batch_size=batch_size,
    )


def efficiency(score: float, gmacs: float | CostReport) -> float:
    """Inference efficiency ``eta = score / cost`` (JTCSE Sec. V-B, Table VII): the score (e.g. the
    7-STS average Spearman x 100) per GMAC of inference cost for one sentence."""
    cost = gmacs.gmacs if isinstance(gmacs, CostReport) else float(gmacs)
    if cost <= 0:
        raise ValueError(f"cost must be positive, got {cost}")
    return float(score) / cost
