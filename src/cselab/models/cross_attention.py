"""JTCSE's cross-attention encoder layers (CAEL; JTCSE Eqs. 7-10, METHODS.md section 6).

At a CAEL ``j`` encoder I attends with ITS OWN attention probabilities over encoder II's values:

    SA_I   = softmax(Q_I HD_I^{j-1} (K_I HD_I^{j-1})^T / sqrt(d_head) + mask)      (per head)
    CACT_I = SA_I . (V_II HD_II^{j-1})
    C_I^j  = the rest of encoder I's layer j (output projection, residual with HD_I^{j-1}, LayerNorm,
             feed-forward, LayerNorm) applied to CACT_I

(symmetrically for II). The branch is computed AFTER the two ordinary forward passes from their
``hidden_states`` (the input of layer ``j`` is ``hidden_states[j - 1]``) by composing the layer's own
modules, for BERT- and RoBERTa-like layers of transformers 5.x: ``layer.attention.self.{query,key,value}``
(and its attention-probability dropout), ``layer.attention.output(context, residual)`` and
``layer.feed_forward_chunk(attention_output)``. No layer code is copied and no hooks are installed; the
layers are found at ``backbone.encoder.layer``.

**Decision (METHODS.md):** the cross branch is a side output: it does not feed the next layer, and
``c_I = C_I^{last CAEL}[:, 0]``. Consequences, both exact: (1) only the LAST CAEL enters the loss, and since
``n_layers mod k == 0`` that is always the last layer ``n``; CAELs before it would produce outputs that
nothing reads, so they are not computed (``num_ca_layers`` is validated, and ``0`` switches the branch off);
(2) every part of a layer after the attention probabilities is position-wise, so ``C[:, 0]`` needs the query
of the first token only (``cls_only=True``), which is much cheaper than the whole sequence and gives the
same values.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import CselabError


def cael_positions(n_layers: int, num_ca_layers: int) -> tuple[int, ...]:
    """CAEL positions ``L = {j in 1..n : j mod k == 0}`` with ``k = n_layers / num_ca_layers`` (JTCSE Eq. 7).

    1-based layer indices; ``num_ca_layers == 0`` gives no CAEL. ``num_ca_layers`` must divide ``n_layers``.
    """
    if n_layers < 1:
        raise CselabError(f"a backbone needs at least one layer, got {n_layers}")
    if num_ca_layers < 0:
        raise CselabError(f"num_ca_layers must be >= 0, got {num_ca_layers}")
    if num_ca_layers == 0:
        return ()
    if num_ca_layers > n_layers or n_layers % num_ca_layers:
        divisors = [d for d in range(1, n_layers + 1) if n_layers % d == 0]
        raise CselabError(
            f"num_ca_layers {num_ca_layers} does not divide the {n_layers} layers of the backbone; "
            f"choose one of: 0 (off), {', '.join(map(str, divisors))}"
        )
    k = n_layers // num_ca_layers
    return tuple(j for j in range(1, n_layers + 1) if j % k == 0)


def encoder_layers(backbone: nn.Module) -> nn.ModuleList:
    """The transformer layers of a BERT/RoBERTa-like backbone (``backbone.encoder.layer``)."""
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise CselabError(
            f"{type(backbone).__name__} has no encoder.layer list; cross-attention layers need a BERT- or "
            "RoBERTa-like backbone"
        )
    return layers


def additive_attention_mask(attention_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """``[N, T]`` 0/1 padding mask -> ``[N, 1, 1, T]`` additive mask (0 keep, dtype minimum for padding)."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def _split_heads(x: Tensor, head_size: int) -> Tensor:
    """``[N, T, H * d_head]`` -> ``[N, H, T, d_head]``."""
    return x.view(*x.shape[:-1], -1, head_size).transpose(1, 2)


def cross_layer(
    layer_q: nn.Module,
    states_q: Tensor,
    layer_v: nn.Module,
    states_v: Tensor,
    attention_mask: Tensor,
    *,
    cls_only: bool = False,
) -> Tensor:
    """``C_q^j``: layer ``layer_q`` with its values replaced by ``layer_v``'s values of ``states_v``.

    Args:
        layer_q: layer ``j`` of the querying encoder (its query/key, output block and feed-forward are used).
        states_q: ``[N, T, d]`` its input hidden states ``HD_q^{j-1}``.
        layer_v: layer ``j`` of the other encoder (only its value projection is used).
        states_v: ``[N, T, d]`` the other encoder's input hidden states ``HD_v^{j-1}`` (same token ids).
        attention_mask: ``[N, T]`` 0/1 padding mask of the (shared) token ids.
        cls_only: compute the output for the first token only (``[N, 1, d]``); exact, see the module notes.

    Returns:
        ``[N, T, d]`` (or ``[N, 1, d]``). With ``layer_v is layer_q`` and ``states_v is states_q`` and dropout
        off this equals the layer's ordinary output.
    """
    if states_q.shape != states_v.shape:
        raise CselabError(f"the two encoders' hidden states differ in shape: {tuple(states_q.shape)} vs "
                          f"{tuple(states_v.shape)} (the twins must share hidden size and token ids)")
    attention_q = layer_q.attention.self
    head_size = int(attention_q.attention_head_size)
    if int(layer_v.attention.self.attention_head_size) != head_size:
        raise CselabError("the two encoders have different attention head sizes; cross-attention needs equal ones")
    queries_from = states_q[:, :1] if cls_only else states_q
    query = _split_heads(attention_q.query(queries_from), head_size)
    key = _split_heads(attention_q.key(states_q), head_size)
    value = _split_heads(layer_v.attention.self.value(states_v), head_size)
    scaling = float(getattr(attention_q, "scaling", head_size**-0.5))
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    scores = scores + additive_attention_mask(attention_mask, scores.dtype)
    probs = torch.softmax(scores, dim=-1)
    dropout = getattr(attention_q, "dropout", None)
    if isinstance(dropout, nn.Module):
        probs = dropout(probs)  # the layer's own attention dropout (active only in training mode)
    context = torch.matmul(probs, value.to(probs.dtype)).transpose(1, 2).reshape(*queries_from.shape[:-1], -1)
    attention_output = layer_q.attention.output(context, queries_from)
    return layer_q.feed_forward_chunk(attention_output)


def cross_cls(
    backbone_1: nn.Module,
    backbone_2: nn.Module,
    hidden_1: tuple[Tensor, ...],
    hidden_2: tuple[Tensor, ...],
    attention_mask: Tensor,
    num_ca_layers: int,
) -> tuple[Tensor, Tensor]:
    """``(c_I, c_II)``: first-token outputs ``[N, d]`` of the cross branch at the last CAEL.

    Args:
        backbone_1, backbone_2: the two encoders' backbones (same depth and hidden size).
        hidden_1, hidden_2: their ``hidden_states`` tuples ``(embeddings, layer 1, ..., layer n)`` from the
            ordinary forward passes over the same token ids.
        attention_mask: ``[N, T]``.
        num_ca_layers: number of CAELs (>= 1, must divide the number of layers).
    """
    layers_1, layers_2 = encoder_layers(backbone_1), encoder_layers(backbone_2)
    if len(layers_1) != len(layers_2):
        raise CselabError(f"the twin encoders have {len(layers_1)} and {len(layers_2)} layers; CAELs need equal depth")
    positions = cael_positions(len(layers_1), num_ca_layers)
    if not positions:
        raise CselabError("cross_cls needs at least one cross-attention layer (num_ca_layers >= 1)")
    j = positions[-1]
    c_1 = cross_layer(layers_1[j - 1], hidden_1[j - 1], layers_2[j - 1], hidden_2[j - 1], attention_mask, cls_only=True)
    c_2 = cross_layer(layers_2[j - 1], hidden_2[j - 1], layers_1[j - 1], hidden_1[j - 1], attention_mask, cls_only=True)
    return c_1[:, 0], c_2[:, 0]
