"""JTCSE's cross-attention encoder layers (CAEL; JTCSE Eqs. 7-10, Fig. 4, docs/methods.md#jtcse).

**Decision (two streams per encoder):** from the first CAEL ``j0 = min(L)`` on, each encoder carries a
CROSS stream ``X_N`` beside its ordinary (primitive) stream ``P_N``. The primitive stream is the ordinary
forward pass and is never touched; the cross stream starts from it, ``X_N^{j0-1} = P_N^{j0-1}``
(``hidden_states[j0 - 1]``), and both encoders step it together, layer by layer, up to the last layer ``n``:

    j in L:     SA_N   = softmax(Q_N X_N^{j-1} (K_N X_N^{j-1})^T / sqrt(d_head) + mask)      (per head)
                ctx_N  = SA_N . (V_N' X_N'^{j-1})          (N' = the other encoder: ITS value weights)
                X_N^j  = encoder N's own attention-output block (residual X_N^{j-1}) and feed-forward on ctx_N
    j not in L: X_N^j  = Layer_N^j(X_N^{j-1})              (encoder N's ordinary layer on its cross stream)

and ``c_N = X_N^n[:, 0]`` (the last layer is always a CAEL). So every CAEL shapes ``c``: the cross context of
one CAEL is propagated into the next layers (the paper's Section VI-B; its Table IX changes with the CAEL
count). Only ``c`` comes from the cross stream; everything else (``h``, the pooler, inference, model
selection, the saved model) is the primitive stream. An earlier reading of ours treated each CAEL as a side
output of the primitive stream, so only the last CAEL reached the loss and the CAEL count changed nothing;
that reading is gone (``num_ca_layers: 1`` is the one case where both readings agree).

Gradients of the c-terms reach every layer ``>= j0`` of both encoders (own query/key/output/feed-forward, the
other's value) and, through ``P^{j0-1}``, the lower layers and the embeddings. Cost: ``n - j0 + 1`` extra layer
passes per encoder per step (forward and backward); on all-MiniLM-L6-v2 (6 layers, B 64, 32 tokens) a stage-2
step counts 1.03x / 1.70x / 1.87x the FLOPs of a TNCSE step with 1 / 3 / 6 CAELs.

Both kinds of step compose the layer's own modules of transformers 5.x BERT/RoBERTa-like layers (found at
``backbone.encoder.layer``): a CAEL uses ``layer.attention.self.{query,key,value}`` (and its attention-probability
dropout), ``layer.attention.output(context, residual)`` and ``layer.feed_forward_chunk(attention_output)``; a
non-CAEL step calls the layer itself with the attention mask the backbone builds for it. No layer code is
copied and no hooks are installed. Only the attention product is written here, because no module of the layer
mixes one encoder's probabilities with another's values. At the last layer only the first token is needed, and
every part of a layer after the attention probabilities is position-wise, so the last CAEL computes the query
of the first token only (``cls_only=True``; exact, and much cheaper than the whole sequence).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from cselab.errors import CselabError


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
    """One CAEL step ``X_q^j``: layer ``layer_q`` with its values replaced by ``layer_v``'s values of ``states_v``.

    Args:
        layer_q: layer ``j`` of the querying encoder (its query/key, output block and feed-forward are used).
        states_q: ``[N, T, d]`` its cross-stream input ``X_q^{j-1}`` (also the residual).
        layer_v: layer ``j`` of the other encoder (only its value projection is used).
        states_v: ``[N, T, d]`` the other encoder's cross-stream input ``X_v^{j-1}`` (same token ids).
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


def layer_attention_mask(backbone: nn.Module, embeddings: Tensor, attention_mask: Tensor) -> Any:
    """The attention mask ``backbone``'s own forward hands its layers (format set by its attention implementation).

    ``embeddings`` is the embedding output ``[N, T, d]`` (``hidden_states[0]``); it only supplies shape and dtype.
    """
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=backbone.config, inputs_embeds=embeddings, attention_mask=attention_mask)


def cross_stream_cls(
    backbone_1: nn.Module,
    backbone_2: nn.Module,
    hidden_1: tuple[Tensor, ...],
    hidden_2: tuple[Tensor, ...],
    attention_mask: Tensor,
    num_ca_layers: int,
) -> tuple[Tensor, Tensor]:
    """``(c_I, c_II)``: the first token ``[N, d]`` of each encoder's cross stream after the last layer.

    Args:
        backbone_1, backbone_2: the two encoders' backbones (same depth and hidden size), in the mode the step
            needs (training mode applies the layers' dropout in the cross stream too).
        hidden_1, hidden_2: their ``hidden_states`` tuples ``(embeddings, layer 1, ..., layer n)`` from the
            ordinary (primitive) forward passes over the same token ids; ``hidden_k[j0 - 1]`` starts the stream.
        attention_mask: ``[N, T]`` 0/1 padding mask of the shared token ids.
        num_ca_layers: number of CAELs (>= 1, must divide the number of layers).
    """
    layers_1, layers_2 = encoder_layers(backbone_1), encoder_layers(backbone_2)
    if len(layers_1) != len(layers_2):
        raise CselabError(f"the twin encoders have {len(layers_1)} and {len(layers_2)} layers; CAELs need equal depth")
    n_layers = len(layers_1)
    positions = cael_positions(n_layers, num_ca_layers)
    if not positions:
        raise CselabError("the cross stream needs at least one cross-attention layer (num_ca_layers >= 1)")
    first = positions[0]
    x_1, x_2 = hidden_1[first - 1], hidden_2[first - 1]
    masks = None  # the ordinary layers' masks, built once and only if a non-CAEL layer is in the stream
    for j in range(first, n_layers + 1):
        layer_1, layer_2 = layers_1[j - 1], layers_2[j - 1]
        if j in positions:
            last = j == n_layers
            # both read the previous states of both streams, so neither is updated before the other is computed
            x_1, x_2 = (cross_layer(layer_1, x_1, layer_2, x_2, attention_mask, cls_only=last),
                        cross_layer(layer_2, x_2, layer_1, x_1, attention_mask, cls_only=last))
        else:
            if masks is None:
                masks = (layer_attention_mask(backbone_1, hidden_1[0], attention_mask),
                         layer_attention_mask(backbone_2, hidden_2[0], attention_mask))
            x_1, x_2 = layer_1(x_1, masks[0]), layer_2(x_2, masks[1])
    return x_1[:, 0], x_2[:, 0]
