"""What gets saved, loaded, evaluated and exported: a model that turns sentences into vectors.

Kinds (``cselab.json`` ``kind``): ``encoder`` (one encoder, possibly prompted), ``twin`` (sum of two
encoders, TNCSE/JTCSE) and ``ensemble`` (weighted sum of members, +UC). Weights are safetensors, the
description is JSON and the tokenizer is ``tokenizer.json``: loading never unpickles anything.
A single ``cls``/``mean`` encoder directory is at the same time a sentence-transformers model directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import CselabError
from ..fileio import fresh_sibling, replace_directory
from .backbone import resolve_model_path
from .encoder import HEAD_FILE, Encoder, MLPHead
from .prompts import PromptTemplate

DESCRIPTION_FILE = "cselab.json"
# sentence-transformers pooling modes we can read and write
_ST_POOLING = {"cls": "pooling_mode_cls_token", "cls_before_pooler": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}


class TwinModel(nn.Module):
    """Two encoders whose inference output is the sum ``h_I + h_II`` (TNCSE/JTCSE)."""

    kind = "twin"
    member_overrides = ("pooler", "max_length")  # load_model overrides passed on to the members

    def __init__(self, first: Encoder, second: Encoder) -> None:
        super().__init__()
        self.encoders = nn.ModuleList([first, second])

    @classmethod
    def from_members(cls, members: Sequence[nn.Module], description: dict[str, Any]) -> TwinModel:
        return cls(*members)

    def named_members(self) -> list[tuple[str, nn.Module]]:
        return [(f"encoder_{i + 1}", e) for i, e in enumerate(self.encoders)]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False) -> Tensor:
        return sum(e.encode(texts, batch_size=batch_size, progress=progress) for e in self.encoders)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "members": [name for name, _ in self.named_members()]}


class EnsembleModel(nn.Module):
    """Weighted sum of member models' embeddings (the papers' +UC ensemble)."""

    kind = "ensemble"
    member_overrides = ("max_length",)  # members may be of different kinds: their poolers stay as saved

    def __init__(self, members: Sequence[nn.Module], weights: Sequence[float]) -> None:
        super().__init__()
        if len(members) != len(weights) or not members:
            raise CselabError("an ensemble needs one weight per member and at least one member")
        self.members = nn.ModuleList(members)
        self.weights = [float(w) for w in weights]

    @classmethod
    def from_members(cls, members: Sequence[nn.Module], description: dict[str, Any]) -> EnsembleModel:
        return cls(members, description["weights"])

    def named_members(self) -> list[tuple[str, nn.Module]]:
        return [(f"member_{i + 1}", m) for i, m in enumerate(self.members)]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False) -> Tensor:
        embeddings = [m.encode(texts, batch_size=batch_size, progress=progress) for m in self.members]
        dims = {e.shape[-1] for e in embeddings}
        if len(dims) != 1:
            raise CselabError(f"ensemble members have different embedding sizes: {sorted(dims)}")
        return sum(w * e for w, e in zip(self.weights, embeddings, strict=True))

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "members": [name for name, _ in self.named_members()], "weights": self.weights}


# composite kinds: saved as one sub-directory per member (named by named_members) plus cselab.json
COMPOSITE_KINDS: dict[str, type[TwinModel] | type[EnsembleModel]] = {c.kind: c for c in (TwinModel, EnsembleModel)}


# -- saving -------------------------------------------------------------------------------------------
def save_model(model: nn.Module, path: str | Path, *, extra: dict[str, Any] | None = None) -> Path:
    """Save any sentence model kind to ``path`` atomically (written beside it, then renamed into place)."""
    path = Path(path)
    tmp = fresh_sibling(path)
    _write(model, tmp, extra or {})
    return replace_directory(tmp, path)


def _write(model: nn.Module, path: Path, extra: dict[str, Any]) -> None:
    path.mkdir(parents=True)
    description = dict(model.describe(), **extra)
    if isinstance(model, Encoder):
        _write_encoder(model, path)
    elif hasattr(model, "named_members"):
        for name, member in model.named_members():
            _write(member, path / name, {})
    else:
        raise TypeError(f"cannot save {type(model).__name__}")
    (path / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n")


def _write_encoder(encoder: Encoder, path: Path) -> None:
    from safetensors.torch import save_file

    encoder.backbone.save_pretrained(path, safe_serialization=True)
    encoder.tokenizer.save_pretrained(path)
    if encoder.head is not None:
        save_file({k: v.detach().cpu().contiguous() for k, v in encoder.head.state_dict().items()}, path / HEAD_FILE)
    if encoder.pooler in _ST_POOLING and encoder.prompt is None:
        _write_sentence_transformers_files(encoder, path)


def _write_sentence_transformers_files(encoder: Encoder, path: Path) -> None:
    """modules.json + pooling config, so the directory loads in sentence-transformers as it is."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (path / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (path / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": encoder.max_length, "do_lower_case": False}, indent=2) + "\n"
    )
    pooling = {
        "word_embedding_dimension": encoder.hidden_size,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    pooling[_ST_POOLING[encoder.pooler]] = True
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2) + "\n")


# -- loading ------------------------------------------------------------------------------------------
def load_model(
    name_or_path: str | Path, *, pooler: str | None = None, max_length: int | None = None,
    device: str | torch.device | None = None,
) -> nn.Module:
    """Like :func:`load_sentence_model`, on ``device`` (default: :func:`cselab.devices.inference_device`)."""
    from ..devices import inference_device, pick_device

    model = load_sentence_model(name_or_path, pooler=pooler, max_length=max_length)
    return model.to(pick_device(device) if device is not None else inference_device())


def load_sentence_model(
    name_or_path: str | Path, *, pooler: str | None = None, max_length: int | None = None
) -> nn.Module:
    """Load a cselab model directory, a sentence-transformers directory, a plain HF directory or hub name.

    ``pooler``/``max_length`` override what the directory says (for single encoders).
    """
    source = Path(resolve_model_path(name_or_path))
    if source.exists() and not source.is_dir():
        raise CselabError(f"{source} is a file, not a model directory")
    description = _read_json(source / DESCRIPTION_FILE) if (source / DESCRIPTION_FILE).is_file() else None
    if description is None:
        return _load_foreign(source if source.exists() else str(name_or_path), pooler, max_length)
    kind = description.get("kind")
    if kind == "encoder":
        return _load_encoder(source, description, pooler, max_length)
    if kind in COMPOSITE_KINDS:
        cls = COMPOSITE_KINDS[kind]
        given = {"pooler": pooler, "max_length": max_length}
        overrides = {key: given[key] for key in cls.member_overrides}
        return cls.from_members([load_sentence_model(source / m, **overrides) for m in description["members"]], description)
    raise CselabError(f"{source / DESCRIPTION_FILE}: unknown model kind {kind!r}")


def read_description(path: str | Path) -> dict[str, Any] | None:
    """The ``cselab.json`` of a saved model, or None for foreign model directories."""
    file = Path(path) / DESCRIPTION_FILE
    return _read_json(file) if file.is_file() else None


def _read_json(file: Path) -> dict[str, Any]:
    try:
        return json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CselabError(f"cannot read {file}: {exc}") from exc


def _load_encoder(source: Path, description: dict[str, Any], pooler: str | None, max_length: int | None) -> Encoder:
    from safetensors.torch import load_file

    prompt = PromptTemplate.from_dict(description["prompt"]) if description.get("prompt") else None
    encoder = Encoder.from_pretrained(
        source,
        pooler=pooler or description.get("pooler", "cls"),
        max_length=max_length or description.get("max_length", 256),
        prompt=prompt,
    )
    if description.get("head"):
        encoder.head = MLPHead(encoder.hidden_size)
        encoder.head.load_state_dict(load_file(source / description["head"]))
    return encoder


def _load_foreign(source: Path | str, pooler: str | None, max_length: int | None) -> Encoder:
    """A sentence-transformers directory (pooling read from its config) or a plain HF model."""
    st_pooler, st_max_length = None, None
    if isinstance(source, Path) and (source / "modules.json").is_file():
        st_pooler, st_max_length, source = _read_sentence_transformers_dir(source)
    return Encoder.from_pretrained(
        source,
        pooler=pooler or st_pooler or "cls",
        max_length=max_length or st_max_length or 256,
    )


def _read_sentence_transformers_dir(source: Path) -> tuple[str | None, int | None, Path]:
    modules = _read_json(source / "modules.json")
    pooler, max_length, backbone_dir = None, None, source
    for module in modules:
        module_dir = source / module.get("path", "")
        if module.get("type", "").endswith("Transformer"):
            backbone_dir = module_dir
            config_file = module_dir / "sentence_bert_config.json"
            if config_file.is_file():
                max_length = _read_json(config_file).get("max_seq_length")
        elif module.get("type", "").endswith("Pooling"):
            config = _read_json(module_dir / "config.json")
            if config.get("pooling_mode_mean_tokens"):
                pooler = "mean"
            elif config.get("pooling_mode_cls_token"):
                pooler = "cls"
    return pooler, max_length, backbone_dir

