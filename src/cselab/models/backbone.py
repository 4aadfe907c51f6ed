"""Loading HF backbones and tokenizers: local directories, cselab's fetched models, or hub names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from cselab.errors import CselabError
from cselab.paths import resolve_model_path

# Config attribute names of the dropout probabilities across the families we support.
_DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def quiet_transformers() -> None:
    """Silence transformers' per-load progress bars and info logs (we print our own progress)."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def load_backbone(name_or_path: str | Path, *, dropout: float | None = None) -> tuple[nn.Module, Any]:
    """Load ``(model, tokenizer)``; weights only from safetensors so nothing is unpickled.

    Raises a one-line :class:`CselabError` when the path is not a readable model directory and the name
    cannot be loaded from a hub either.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    quiet_transformers()
    source = resolve_model_path(name_or_path)
    local = Path(source).exists()
    if local and not (Path(source) / "config.json").is_file():
        raise CselabError(f"{source} is not a model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(source)
        if dropout is not None:
            for key in _DROPOUT_KEYS:
                if hasattr(config, key):
                    setattr(config, key, float(dropout))
        model = AutoModel.from_pretrained(source, config=config, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except CselabError:
        raise
    except Exception as exc:  # transformers raises many types; the user needs one line
        where = "directory" if local else "name (not a local path; no hub reachable?)"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CselabError(f"cannot load model {name_or_path!s} as a {where}: {first}") from exc
    return model, tokenizer


def supports_rows_at(backbone: nn.Module) -> bool:
    """Whether :func:`last_layer_at` knows the backbone's layers (the BERT layout: BERT, RoBERTa, ...)."""
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return False
    last = layers[-1]
    return all(hasattr(last, name) for name in ("attention", "intermediate", "output")) and all(
        hasattr(last.attention, name) for name in ("self", "output"))


def last_layer_at(backbone: nn.Module, inputs: dict[str, Tensor], positions: Tensor) -> Tensor:
    """The last layer's hidden state at ONE position per row ([B, d]), that layer computed only there.

    A reader of one token per row (CoT-BERT's last [MASK]) needs from the last layer only that token's
    query, attention output and feed-forward; the keys and values of every position come from the layer
    below. The first L-1 layers run as HF runs them; the last layer reuses its own modules (projections,
    dropouts, LayerNorms, activation), so in eval mode the result equals the full forward's row. With
    dropout on, the masks are drawn for the computed rows only: same distribution, another random stream.
    """
    import torch

    layers = backbone.encoder.layer
    backbone.encoder.layer = layers[:-1]
    try:
        below = backbone(**inputs, return_dict=True).last_hidden_state  # [B, T, d] from layer L-1
    finally:
        backbone.encoder.layer = layers
    layer = layers[-1]
    attention = layer.attention.self
    batch, width, hidden = below.shape
    heads = attention.num_attention_heads
    head_size = hidden // heads
    at = below[torch.arange(batch, device=below.device), positions]  # [B, d]
    query = attention.query(at).view(batch, 1, heads, head_size).transpose(1, 2)
    key = attention.key(below).view(batch, width, heads, head_size).transpose(1, 2)
    value = attention.value(below).view(batch, width, heads, head_size).transpose(1, 2)
    allowed = inputs["attention_mask"].bool()[:, None, None, :]
    dropout = attention.dropout.p if attention.training else 0.0
    if backbone.config._attn_implementation == _bits_attention_name():
        from cselab.models.dropout import bits_attention

        context, _ = bits_attention(attention, query, key, value, allowed, dropout=dropout, scaling=attention.scaling)
    else:
        context = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=allowed, dropout_p=dropout, scale=attention.scaling).transpose(1, 2)
    attended = layer.attention.output(context.reshape(batch, hidden), at)
    return layer.output(layer.intermediate(attended), attended)


def _bits_attention_name() -> str:
    from cselab.models.dropout import BITS_ATTENTION

    return BITS_ATTENTION
