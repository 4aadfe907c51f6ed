"""The sentence-transformers directory layout, written as plain JSON and safetensors.

Every model cselab saves is also a sentence-transformers model: a ``modules.json`` names the modules that
``SentenceTransformer(dir)`` chains, each with its config beside it. The files are written here by hand, not
through sentence-transformers' own ``save``, so that saving needs no sentence-transformers install (it is an
optional extra) and cselab's ``cselab.json`` stays the one description cselab itself loads from.

The standard module names are the ``sentence_transformers.models.*`` aliases, which sentence-transformers
5 and 6 both resolve; a cselab module (:mod:`cselab.st_modules`) is named by its full path, and
sentence-transformers loads it only with ``trust_remote_code=True``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
DENSE = "sentence_transformers.models.Dense"
WEIGHTED_LAYER_POOLING = "sentence_transformers.models.WeightedLayerPooling"
TANH = "torch.nn.modules.activation.Tanh"


@dataclass
class StModule:
    """One entry of ``modules.json``: its class, its sub-directory ('' = the model root) and its files."""

    type: str
    path: str = ""
    config: dict[str, Any] | None = None  # written to <path>/config.json
    weights: dict[str, Tensor] = field(default_factory=dict)  # written to <path>/model.safetensors


def transformer_config(max_length: int, **config_kwargs: Any) -> dict[str, Any]:
    """``sentence_bert_config.json`` of the Transformer module (``config_kwargs`` go to the HF config).

    The HF config options are stored under ``config_args``, the name sentence-transformers 5 reads and 6
    still maps to its ``config_kwargs``.
    """
    config: dict[str, Any] = {"max_seq_length": int(max_length), "do_lower_case": False}
    if config_kwargs:
        config["config_args"] = config_kwargs
    return config


def pooling(dimension: int, mode: str, path: str = "1_Pooling") -> StModule:
    """A Pooling module (``mode``: ``cls`` or ``mean``), in the boolean keys both major versions read."""
    config = {"word_embedding_dimension": int(dimension), "pooling_mode_cls_token": mode == "cls",
              "pooling_mode_mean_tokens": mode == "mean", "pooling_mode_max_tokens": False,
              "pooling_mode_mean_sqrt_len_tokens": False}
    return StModule(POOLING, path, config)


def write_modules(path: Path, modules: Sequence[StModule], *, transformer: dict[str, Any] | None = None) -> None:
    """Write ``modules.json`` and each module's files into the model directory ``path``."""
    from safetensors.torch import save_file

    entries = []
    for idx, module in enumerate(modules):
        entries.append({"idx": idx, "name": str(idx), "path": module.path, "type": module.type})
        folder = path / module.path
        folder.mkdir(parents=True, exist_ok=True)
        if module.config is not None:
            _write_json(folder / "config.json", module.config)
        if module.weights:
            save_file({k: v.detach().cpu().contiguous() for k, v in module.weights.items()},
                      folder / "model.safetensors")
    _write_json(path / "modules.json", entries)
    if transformer is not None:
        _write_json(path / "sentence_bert_config.json", transformer)


def _write_json(file: Path, data: Any) -> None:
    file.write_text(json.dumps(data, indent=2) + "\n")
