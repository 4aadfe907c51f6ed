"""Attention analyses of BERT-like encoders: CLS energy weight, attention sink, heat maps, norms.

Paper references
----------------
* JTCSE (seed 000), Eq. 6 and Discussion: the CLS energy weight

      E_CLS = ||h_cls||_2 / ||H_-||_F

  computed on the *context tensor* of a layer's self-attention, i.e. the attention-weighted values
  ``softmax(Q K^T / sqrt(d) + mask) V`` with the heads concatenated, **before** the output
  projection (``BertSelfOutput.dense``). ``h_cls`` is the context vector of position 0 and ``H_-``
  the matrix of the context vectors of every other non-padding token (the final [SEP] included).
  The paper reports it per layer and averaged over layers (Fig. 10: mean E_CLS vs STS score).
* JTCSE Sec. "attention sink" / Fig. 9: in deep layers BERT-like models put most attention on the
  final [SEP] or the final punctuation instead of [CLS]. :func:`attention_sink_statistics`
  measures, per layer, the attention *received* by [CLS], by the final [SEP] and by the final
  punctuation token (mean over heads and over non-padding query tokens).
* TNCSE (seed 001), Discussion "Why pooler output": the last hidden state has almost constant
  L2 norm (LayerNorm), the pooler output has a norm that varies; :func:`norm_statistics`.

How the context tensor is obtained
----------------------------------
A forward hook on every self-attention module (``BertSelfAttention``, ``RobertaSelfAttention``,
... -- any module whose class name ends in ``SelfAttention`` and that owns ``query``/``key``/
``value`` linears) records the module's output. In transformers 5.x these modules return
``(context, attn_weights)`` where ``context`` is exactly ``softmax(QK^T/sqrt(d)+mask) V`` with heads
concatenated, shape ``(B, T, hidden)``, and the output projection lives in the sibling
``*SelfOutput`` module. Hooking is preferred over recomputing Q, K, V from ``hidden_states``
because it reads the tensor the model really used, whatever the attention kernel (eager, sdpa,
flash), the position-embedding type or the scaling; a recomputation would have to duplicate all of
that and could silently drift from the model. (The test suite checks the hooked tensor against an
explicit recomputation from ``hidden_states`` with the layer's query/key/value modules.)

Attention *weights* are only materialised by the eager kernel (sdpa returns ``None``), so when
they are needed the model is switched to ``attn_implementation="eager"`` for the duration of the
forward pass with ``PreTrainedModel.set_attn_implementation`` and switched back afterwards
(:func:`eager_attention`). The model is also put in eval mode (no dropout) for the pass and its
previous mode restored.

Modules of custom encoders (e.g. JTCSE's cross-attention layers) can be passed explicitly as
``attention_modules``; their output must be the context tensor or a tuple
``(context, attn_weights, ...)``.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from cselab.errors import CselabError
from cselab.research.reporting.plots import plot_attention_heatmap

__all__ = [
    "AttentionAnalysis",
    "AttentionSinkStats",
    "AttentionTrace",
    "CLSEnergy",
    "NormStatistics",
    "analyze_attention",
    "attention_received",
    "attention_sink_statistics",
    "cls_energy_from_contexts",
    "cls_energy_weight",
    "eager_attention",
    "final_token_positions",
    "find_self_attention_modules",
    "model_norm_statistics",
    "norm_statistics",
    "punctuation_token_ids",
    "sentence_attention_heatmap",
    "trace_attention",
]


# --------------------------------------------------------------------------------------------------
# collecting context tensors and attention weights
# --------------------------------------------------------------------------------------------------


def find_self_attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of a BERT/RoBERTa-like encoder, in layer order.

    Selected: modules whose class name ends in ``SelfAttention`` and that have ``query``, ``key``
    and ``value`` :class:`torch.nn.Linear` children (``BertSelfAttention``,
    ``RobertaSelfAttention``, ...). Cross-attention modules are not selected. Order is
    ``model.modules()`` order, i.e. layer 0 first.
    """
    found = []
    for module in model.modules():
        if not type(module).__name__.endswith("SelfAttention"):
            continue
        if all(isinstance(getattr(module, n, None), nn.Linear) for n in ("query", "key", "value")):
            found.append(module)
    return found


@contextmanager
def eager_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Context manager: every Hugging Face ``PreTrainedModel`` inside ``model`` (``model`` itself
    included) uses ``attn_implementation="eager"`` inside the block -- the only kernel that returns
    attention probabilities -- and gets its previous implementation back on exit."""
    from transformers import PreTrainedModel

    changed: list[tuple[Any, str]] = []
    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            previous = getattr(module.config, "_attn_implementation", None)
            if previous != "eager":
                module.set_attn_implementation("eager")
                if previous is not None:
                    changed.append((module, previous))
    try:
        yield model
    finally:
        for module, previous in reversed(changed):
            module.set_attn_implementation(previous)


@dataclass
class AttentionTrace:
    """What one forward pass of the encoder exposed, per self-attention layer.

    ``contexts[l]``: ``(B, T, hidden)`` context tensor of layer ``l`` (before the output
    projection); ``attentions[l]``: ``(B, heads, T, T)`` attention probabilities (query x key) of
    layer ``l``, or ``None`` when weights were not requested; ``input_ids``/``attention_mask``:
    ``(B, T)``, the batch that produced them. All tensors are detached float32/long on CPU.
    """

    contexts: list[torch.Tensor]
    attentions: list[torch.Tensor] | None
    input_ids: torch.Tensor
    attention_mask: torch.Tensor


def _hooked_forward(model: nn.Module, modules: Sequence[nn.Module], input_ids: torch.Tensor,
                    attention_mask: torch.Tensor, *, with_weights: bool
                    ) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor | None]]:
    """One forward pass (no grad, eval mode) with a hook on each of ``modules``: the context tensor and the attention
    probabilities (None where a module returned none) each module gave, by its index."""
    contexts: dict[int, torch.Tensor] = {}
    weights: dict[int, torch.Tensor | None] = {}

    def make_hook(index: int):
        def hook(_module: nn.Module, _args: Any, output: Any) -> None:
            ctx = output[0] if isinstance(output, tuple) else output
            w = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            contexts[index] = ctx.detach().reshape(ctx.shape[0], ctx.shape[1], -1).float().cpu()
            weights[index] = None if w is None else w.detach().float().cpu()

        return hook

    handles = [m.register_forward_hook(make_hook(i)) for i, m in enumerate(modules)]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if with_weights:
                with eager_attention(model):
                    model(input_ids=input_ids, attention_mask=attention_mask)
            else:
                model(input_ids=input_ids, attention_mask=attention_mask)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return contexts, weights


def trace_attention(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    with_weights: bool = True,
    attention_modules: Sequence[nn.Module] | None = None,
) -> AttentionTrace:
    """Run ``model(input_ids=..., attention_mask=...)`` once (no grad, eval mode) and record each
    self-attention layer's context tensor and, if ``with_weights``, its attention probabilities.

    ``input_ids``/``attention_mask``: ``(B, T)``. ``attention_modules`` overrides
    :func:`find_self_attention_modules`. See the module docstring for why a forward hook is used.
    Raises :class:`CselabError` if no attention module is found, or if weights were requested and a
    module did not return them.
    """
    modules = list(attention_modules) if attention_modules is not None else find_self_attention_modules(model)
    if not modules:
        raise CselabError(
            f"no self-attention modules found in {type(model).__name__}; pass attention_modules explicitly"
        )
    contexts, weights = _hooked_forward(model, modules, input_ids, attention_mask, with_weights=with_weights)
    if len(contexts) != len(modules):
        raise CselabError(f"only {len(contexts)} of {len(modules)} attention modules ran in the forward pass")
    attentions: list[torch.Tensor] | None = None
    if with_weights:
        missing = [i for i in range(len(modules)) if weights[i] is None]
        if missing:
            raise CselabError(
                f"attention layers {missing} returned no attention weights even with eager attention"
            )
        attentions = [weights[i] for i in range(len(modules))]  # type: ignore[misc]
    return AttentionTrace(
        contexts=[contexts[i] for i in range(len(modules))],
        attentions=attentions,
        input_ids=input_ids.detach().cpu(),
        attention_mask=attention_mask.detach().cpu(),
    )


# --------------------------------------------------------------------------------------------------
# CLS energy weight
# --------------------------------------------------------------------------------------------------


def _mask_or_ones(mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor:
    if mask is None:
        return torch.ones(batch, length, dtype=torch.bool)
    m = mask.detach().cpu().bool()
    if m.shape != (batch, length):
        raise ValueError(f"attention_mask must have shape {(batch, length)}, got {tuple(m.shape)}")
    return m


def cls_energy_weight(context: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """CLS energy weight of each sentence for one layer (JTCSE Eq. 6).

    ``context``: ``(B, T, D)`` context tensor (heads concatenated, before the output projection);
    ``attention_mask``: ``(B, T)``, 1 for real tokens (all ones if ``None``). Returns a ``(B,)``
    float64 tensor ``||context[b, 0]||_2 / ||context[b, others]||_F`` where ``others`` are the
    non-padding positions except 0. A sentence with no other token gives ``nan``.
    """
    if context.dim() != 3:
        raise ValueError(f"context must have shape (B, T, D), got {tuple(context.shape)}")
    ctx = context.detach().cpu().double()
    batch, length, _ = ctx.shape
    others = _mask_or_ones(attention_mask, batch, length).clone()
    others[:, 0] = False
    num = ctx[:, 0].norm(p=2, dim=-1)
    den = (ctx.pow(2).sum(-1) * others).sum(-1).sqrt()
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, math.nan))


@dataclass
class CLSEnergy:
    """CLS energy weights of an encoder on a set of sentences.

    ``per_sentence``: ``(layers, N)`` array of E_CLS; ``per_layer``: its mean over sentences
    (layer 0 first); ``mean``: the mean of ``per_layer`` (the "average CLS energy weight" of JTCSE
    Fig. 10).
    """

    per_layer: list[float]
    mean: float
    per_sentence: np.ndarray

    @classmethod
    def from_per_sentence(cls, per_sentence: np.ndarray) -> CLSEnergy:
        """Build from a ``(layers, N)`` array of per-sentence values (nan entries are ignored)."""
        arr = np.asarray(per_sentence, dtype=float)
        per_layer = [float(v) for v in np.nanmean(arr, axis=1)]
        return cls(per_layer=per_layer, mean=float(np.mean(per_layer)), per_sentence=arr)


def cls_energy_from_contexts(
    contexts: Sequence[torch.Tensor], attention_mask: torch.Tensor | None = None
) -> CLSEnergy:
    """E_CLS per layer and averaged over layers from per-layer ``(B, T, D)`` context tensors
    (e.g. :attr:`AttentionTrace.contexts`). JTCSE Eq. 6 / Fig. 10."""
    rows = [cls_energy_weight(c, attention_mask).numpy() for c in contexts]
    return CLSEnergy.from_per_sentence(np.stack(rows, axis=0))


# --------------------------------------------------------------------------------------------------
# attention sink
# --------------------------------------------------------------------------------------------------


def attention_received(attention: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention received by every key position, averaged over heads and over non-padding queries.

    ``attention``: ``(B, heads, T, T)`` probabilities (rows = queries, columns = keys, each row sums
    to 1); ``attention_mask``: ``(B, T)``. Returns ``(B, T)`` float64 with
    ``r[b, j] = mean_{h, q valid} attention[b, h, q, j]``; for every sentence ``sum_j r[b, j] = 1``.
    """
    if attention.dim() != 4:
        raise ValueError(f"attention must have shape (B, heads, T, T), got {tuple(attention.shape)}")
    a = attention.detach().cpu().double().mean(dim=1)  # (B, Tq, Tk)
    batch, length, _ = a.shape
    q = _mask_or_ones(attention_mask, batch, length).double()
    return (a * q[:, :, None]).sum(dim=1) / q.sum(dim=1, keepdim=True).clamp_min(1.0)


def final_token_positions(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    sep_token_id: int | None = None,
    punctuation_ids: Iterable[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of the final [SEP] and of the final punctuation token of each sentence.

    ``input_ids``/``attention_mask``: ``(B, T)``. The final [SEP] is the last non-padding position
    whose id is ``sep_token_id``, or simply the last non-padding position when ``sep_token_id`` is
    ``None`` (BERT's [SEP] / RoBERTa's ``</s>``). The final punctuation is the token right before
    that [SEP] if its id is in ``punctuation_ids``. Returns two ``(B,)`` long tensors, ``-1`` where
    there is no such token.
    """
    ids = input_ids.detach().cpu()
    batch, length = ids.shape
    mask = _mask_or_ones(attention_mask, batch, length)
    pos = torch.arange(length).expand(batch, length)
    candidates = mask if sep_token_id is None else mask & (ids == sep_token_id)
    sep = torch.where(candidates, pos, torch.full_like(pos, -1)).max(dim=1).values
    punct = torch.full((batch,), -1, dtype=torch.long)
    if punctuation_ids is not None:
        pset = torch.tensor(sorted(set(int(i) for i in punctuation_ids)), dtype=ids.dtype)
        prev = (sep - 1).clamp_min(0)
        prev_ids = ids.gather(1, prev[:, None]).squeeze(1)
        prev_ok = (sep >= 1) & mask.gather(1, prev[:, None]).squeeze(1) & torch.isin(prev_ids, pset)
        punct = torch.where(prev_ok, prev, punct)
    return sep, punct


@dataclass
class AttentionSinkStats:
    """Attention received per layer (layer 0 first) by [CLS], the final [SEP] and the final
    punctuation token, averaged over heads, non-padding queries and sentences.

    ``uniform`` is what any token would receive if attention were uniform (mean over sentences of
    1 / #tokens), a reference level. ``punct`` averages only the ``n_with_punct`` sentences that end
    with punctuation (``nan`` if none). ``*_per_sentence`` are the ``(layers, N)`` raw values
    (``nan`` for a missing token).
    """

    cls: list[float]
    sep: list[float]
    punct: list[float]
    uniform: float
    n_sentences: int
    n_with_punct: int
    cls_per_sentence: np.ndarray
    sep_per_sentence: np.ndarray
    punct_per_sentence: np.ndarray

    @classmethod
    def from_per_sentence(
        cls_, cls: np.ndarray, sep: np.ndarray, punct: np.ndarray, n_tokens: np.ndarray
    ) -> AttentionSinkStats:
        """Build from ``(layers, N)`` per-sentence arrays and the ``(N,)`` token counts."""

        def layer_means(arr: np.ndarray) -> list[float]:
            out = []
            for row in np.asarray(arr, dtype=float):
                ok = ~np.isnan(row)
                out.append(float(row[ok].mean()) if ok.any() else math.nan)
            return out

        punct = np.asarray(punct, dtype=float)
        return cls_(
            cls=layer_means(cls),
            sep=layer_means(sep),
            punct=layer_means(punct),
            uniform=float(np.mean(1.0 / np.asarray(n_tokens, dtype=float))),
            n_sentences=int(np.asarray(n_tokens).size),
            n_with_punct=int((~np.isnan(punct[0])).sum()) if punct.size else 0,
            cls_per_sentence=np.asarray(cls, dtype=float),
            sep_per_sentence=np.asarray(sep, dtype=float),
            punct_per_sentence=punct,
        )


def _sink_rows(
    attentions: Sequence[torch.Tensor], attention_mask: torch.Tensor, sep: torch.Tensor, punct: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cls_rows, sep_rows, punct_rows = [], [], []
    rows = torch.arange(sep.shape[0])
    for att in attentions:
        r = attention_received(att, attention_mask)
        cls_rows.append(r[:, 0].numpy())
        sep_rows.append(torch.where(sep >= 0, r[rows, sep.clamp_min(0)], math.nan).numpy())
        punct_rows.append(torch.where(punct >= 0, r[rows, punct.clamp_min(0)], math.nan).numpy())
    return np.stack(cls_rows), np.stack(sep_rows), np.stack(punct_rows)


def attention_sink_statistics(
    attentions: Sequence[torch.Tensor],
    attention_mask: torch.Tensor,
    input_ids: torch.Tensor,
    *,
    sep_token_id: int | None = None,
    punctuation_ids: Iterable[int] | None = None,
) -> AttentionSinkStats:
    """Per-layer attention received by [CLS] (position 0), the final [SEP] and the final
    punctuation token (JTCSE "attention sink", Fig. 9).

    ``attentions``: per layer ``(B, heads, T, T)`` probabilities; ``attention_mask``/``input_ids``:
    ``(B, T)``. For each sentence the received attention is :func:`attention_received` (mean over
    heads and non-padding queries); it is then averaged over sentences. Token positions come from
    :func:`final_token_positions`.
    """
    mask = attention_mask.detach().cpu()
    sep, punct = final_token_positions(
        input_ids, mask, sep_token_id=sep_token_id, punctuation_ids=punctuation_ids
    )
    c, s, p = _sink_rows(attentions, mask, sep, punct)
    return AttentionSinkStats.from_per_sentence(c, s, p, mask.bool().sum(dim=1).numpy())


def punctuation_token_ids(tokenizer: Any) -> set[int]:
    """Ids of the vocabulary entries that are pure punctuation (after stripping the word-piece
    markers ``##``, ``Ġ`` and ``▁``), e.g. ``.``, ``!``, ``?``, ``Ġ.``. Works for BERT (WordPiece) and
    RoBERTa (byte-level BPE) tokenizers."""
    punct = set(string.punctuation)
    out = set()
    for token, idx in tokenizer.get_vocab().items():
        core = token.removeprefix("##").lstrip("Ġ▁")
        if core and all(ch in punct for ch in core):
            out.add(int(idx))
    return out


# --------------------------------------------------------------------------------------------------
# one-call analysis
# --------------------------------------------------------------------------------------------------


@dataclass
class AttentionAnalysis:
    """CLS energy weights and attention-sink statistics of one encoder on a set of sentences."""

    energy: CLSEnergy
    sink: AttentionSinkStats
    num_layers: int


def analyze_attention(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    sep_token_id: int | None = None,
    punctuation_ids: Iterable[int] | None = None,
    batch_size: int = 32,
    attention_modules: Sequence[nn.Module] | None = None,
) -> AttentionAnalysis:
    """E_CLS per layer (and mean) and attention received by [CLS]/[SEP]/final punctuation per layer
    for the sentences in ``input_ids``/``attention_mask`` (``(N, T)``, processed in chunks of
    ``batch_size``, eager attention, eval mode, no grad). Every sentence counts equally.
    JTCSE Eq. 6, Figs. 9-10."""
    punct_ids = None if punctuation_ids is None else set(punctuation_ids)
    energy_rows, cls_rows, sep_rows, punct_rows, n_tokens = [], [], [], [], []
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    for start in range(0, input_ids.shape[0], batch_size):
        ids = input_ids[start : start + batch_size]
        mask = attention_mask[start : start + batch_size]
        trace = trace_attention(
            model, ids.to(device), mask.to(device), with_weights=True, attention_modules=attention_modules
        )
        energy_rows.append(
            np.stack([cls_energy_weight(c, trace.attention_mask).numpy() for c in trace.contexts])
        )
        sep, punct = final_token_positions(
            trace.input_ids, trace.attention_mask, sep_token_id=sep_token_id, punctuation_ids=punct_ids
        )
        c, s, p = _sink_rows(trace.attentions or [], trace.attention_mask, sep, punct)
        cls_rows.append(c)
        sep_rows.append(s)
        punct_rows.append(p)
        n_tokens.append(trace.attention_mask.bool().sum(dim=1).numpy())
    if not energy_rows:
        raise ValueError("analyze_attention needs at least one sentence")
    energy = CLSEnergy.from_per_sentence(np.concatenate(energy_rows, axis=1))
    sink = AttentionSinkStats.from_per_sentence(
        np.concatenate(cls_rows, axis=1),
        np.concatenate(sep_rows, axis=1),
        np.concatenate(punct_rows, axis=1),
        np.concatenate(n_tokens),
    )
    return AttentionAnalysis(energy=energy, sink=sink, num_layers=len(energy.per_layer))


# --------------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------------


def sentence_attention_heatmap(
    model: nn.Module,
    tokenizer: Any,
    sentence: str,
    path: str | Path,
    *,
    layers: Sequence[int] | None = None,
    attention_modules: Sequence[nn.Module] | None = None,
) -> Path:
    """Tokenise ``sentence``, run the encoder (eager attention) and draw its head-averaged attention.

    ``layers=None``: one panel, the mean over all layers and heads; otherwise one panel per listed
    layer index (0-based, negative counts from the end; panels are titled with 1-based layer
    numbers, "layer 12 of 12" being the last). JTCSE Fig. 9. Returns the written path.
    """
    enc = tokenizer(sentence, return_tensors="pt")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    trace = trace_attention(
        model,
        enc["input_ids"].to(device),
        enc["attention_mask"].to(device),
        attention_modules=attention_modules,
    )
    assert trace.attentions is not None
    per_layer = torch.stack([a[0].mean(dim=0) for a in trace.attentions])  # (L, T, T)
    n_layers = per_layer.shape[0]
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    if layers is None:
        data = per_layer.mean(dim=0)
        titles = [f"mean over {n_layers} layers and all heads"]
    else:
        idx = [i if i >= 0 else n_layers + i for i in layers]
        bad = [i for i in layers if not -n_layers <= i < n_layers]
        if bad:
            raise CselabError(f"layer indices {bad} out of range for a {n_layers}-layer model")
        data = per_layer[idx]
        titles = [f"layer {i + 1} of {n_layers} (mean over heads)" for i in idx]
    return plot_attention_heatmap(data, tokens, path, panel_titles=titles, title=f'"{sentence}"')


# --------------------------------------------------------------------------------------------------
# norm statistics (TNCSE)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormStatistics:
    """L2-norm statistics of the last-layer [CLS] hidden state vs the pooler output.

    ``*_std`` are sample standard deviations (ddof=1; 0 for a single sentence) and ``*_cv`` the
    coefficients of variation std / mean: a small CV means the norm carries little information.
    """

    n: int
    cls_mean: float
    cls_std: float
    cls_min: float
    cls_max: float
    cls_cv: float
    pooled_mean: float
    pooled_std: float
    pooled_min: float
    pooled_max: float
    pooled_cv: float


def _describe(norms: np.ndarray) -> tuple[float, float, float, float, float]:
    mean = float(norms.mean())
    std = float(norms.std(ddof=1)) if norms.size > 1 else 0.0
    return mean, std, float(norms.min()), float(norms.max()), std / mean if mean else math.nan


def norm_statistics(hidden: torch.Tensor, pooled: torch.Tensor) -> NormStatistics:
    """Mean/std/min/max/CV of the L2 norms of the [CLS] last hidden state and of the pooler output.

    ``hidden``: ``(N, T, D)`` last hidden state (position 0 is taken) or ``(N, D)`` CLS vectors;
    ``pooled``: ``(N, D)`` pooler output. TNCSE Discussion ("Why choose pooler output"): LayerNorm
    keeps the last hidden state's norm nearly constant (14-16 for SimCSE-BERT), whereas the pooler
    output keeps norm features.
    """
    h = hidden.detach().cpu().double()
    if h.dim() == 3:
        h = h[:, 0]
    p = pooled.detach().cpu().double()
    if h.dim() != 2 or p.dim() != 2 or h.shape[0] != p.shape[0]:
        raise ValueError(f"incompatible shapes: hidden {tuple(hidden.shape)}, pooled {tuple(pooled.shape)}")
    c = _describe(h.norm(dim=-1).numpy())
    q = _describe(p.norm(dim=-1).numpy())
    return NormStatistics(h.shape[0], *c, *q)


def model_norm_statistics(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, batch_size: int = 64
) -> NormStatistics:
    """Run a Hugging Face encoder with a pooler (eval mode, no grad, chunks of ``batch_size``) on
    ``(N, T)`` inputs and return :func:`norm_statistics` of ``last_hidden_state[:, 0]`` vs
    ``pooler_output``. Raises :class:`CselabError` if the model returns no pooler output."""
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    hs, ps = [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, input_ids.shape[0], batch_size):
                out = model(
                    input_ids=input_ids[start : start + batch_size].to(device),
                    attention_mask=attention_mask[start : start + batch_size].to(device),
                )
                pooled = getattr(out, "pooler_output", None)
                if pooled is None:
                    raise CselabError(
                        f"{type(model).__name__} returned no pooler_output (built without a pooler?)"
                    )
                hs.append(out.last_hidden_state[:, 0].cpu())
                ps.append(pooled.cpu())
    finally:
        model.train(was_training)
    return norm_statistics(torch.cat(hs), torch.cat(ps))
