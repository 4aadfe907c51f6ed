"""Run configuration: YAML presets validated into typed objects; any key overridable from the command line.

Unknown keys are an error naming the closest valid key. The effective configuration is saved with every run.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cselab.errors import CselabError
from cselab.vocabulary import POOLERS

DEFAULT_LENGTH_GROUP_WINDOW = 16  # batches per length-sorted window unless a config says otherwise

class _Strict(BaseModel):
    # nan and inf are no setting of a run (train.lr=nan would train to a nan loss): refused with the key named
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class ModelConfig(_Strict):
    backbone: str = Field("all-MiniLM-L6-v2",
                          description="HF/sentence-transformers directory, fetched model or hub name")
    pooler: str = Field("cls", description=f"sentence vector: {', '.join(POOLERS)}")
    max_length: int = Field(32, gt=0, description="training truncation length (tokens)")
    eval_max_length: int = Field(256, gt=0, description="truncation length of the saved inference model")
    dropout: float | None = Field(None, ge=0.0, lt=1.0, description="backbone dropout; null keeps the checkpoint's")
    dropout_masks: Literal["torch", "bits"] = Field(
        "bits", description="'bits': 15-bit masks, 4 per random draw (faster); 'torch': torch's own Bernoulli masks "
                            "(the research presets pin it: their recorded rows ran with it)")

    @field_validator("pooler")
    @classmethod
    def _known_pooler(cls, value: str) -> str:
        if value not in POOLERS:
            raise ValueError(f"unknown pooler {value!r}; choose one of: {', '.join(POOLERS)}")
        return value


class DataConfig(_Strict):
    corpus: str = Field("default", description="'default', 'default+stsb-train', 'parallel-de.en', or a text file")
    max_sentences: int | None = Field(None, gt=0, description="use only the first N sentences")
    max_words: int | None = Field(None, gt=0, description="skip (and count) lines with more words")


class TrainConfig(_Strict):
    output_dir: str = Field("runs/simcse", description="run directory (config.yaml, metrics.jsonl, best/, last/, ...)")
    seed: int = Field(42, ge=-(2**63), le=2**63 - 1,
                      description="data order, dropout masks and new weights (a signed 64-bit number)")
    # a rate above 1 moves a pretrained encoder's weights by more than their own size in one step
    lr: float = Field(3e-5, gt=0, le=1.0, description="peak AdamW learning rate")
    batch_size: int = Field(64, gt=0, description="GLOBAL batch size (split over data-parallel ranks)")
    chunk_size: int | None = Field(None, gt=0, description="gradient caching: encode the local batch in chunks of "
                                   "this many examples (same gradient, memory of one chunk); null = off")
    max_steps: int | None = Field(None, gt=0, description="stop after this many steps; null = epochs")
    epochs: int = Field(1, gt=0, description="passes over the corpus when max_steps is null")
    warmup_ratio: float = Field(0.0, ge=0.0, lt=1.0, description="share of the steps with a linear warm-up")
    scheduler: Literal["linear", "constant"] = Field("linear", description="learning rate after the warm-up")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay")
    grad_clip: float | None = Field(None, gt=0, description="max global gradient norm; null = no clipping")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "fp32", description="autocast of the encoders (fp16: GPU only); 'auto': bf16 where a matmul probe on this "
                            "machine says it pays, else fp32")
    length_group_window: int | None = Field(
        DEFAULT_LENGTH_GROUP_WINDOW, gt=1, description="sort each window of N batches by sentence length "
                              "(less padding; distillation with neighbour groups ignores it); null: random batches "
                              "(the research presets pin null: their recorded rows ran with it)")
    fused_adamw: bool = Field(True, description="one fused AdamW kernel; false: torch's per-tensor loop")
    device: str = Field("auto", description="'auto', 'cpu', 'cuda', 'cuda:1', ...")
    eval_every: int = Field(125, gt=0, description="dev evaluation (and best/ selection) every N steps")
    eval_at_start: bool = Field(True, description="evaluate the untrained model at step 0 (it can be selected)")
    eval_batch_size: int = Field(128, gt=0, description="batch size of dev/test encoding")
    dev_task: str = Field("stsb", description="model selection uses this task's DEV split only")
    save_every: int | None = Field(None, gt=0, description="resumable state every N steps; null = eval_every")
    log_every: int = Field(10, gt=0, description="a metrics.jsonl line every N steps")
    tensorboard: bool = Field(False, description="also write TensorBoard logs to <output_dir>/tensorboard")
    threads: int | None = Field(None, gt=0, description="torch CPU threads; null keeps torch's default")


class RunConfig(_Strict):
    method: str = Field("simcse", description="training method (cselab config show METHOD lists its options)")
    protocol: str | None = Field(None,
                                 description="the benchmark protocol a preset belongs to (e.g. 'adapt'); recorded")
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    method_options: dict[str, Any] = Field(default_factory=dict, description="validated by the method")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``train.lr=1e-5`` -> (['train', 'lr'], 1e-05); the value is read as YAML."""
    if "=" not in text:
        raise CselabError(f"override {text!r} is not KEY=VALUE (e.g. train.lr=1e-5)")
    key, value = text.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise CselabError(f"override {text!r} has an empty key")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError as exc:
        raise CselabError(f"override {text!r}: value is not valid YAML ({exc.problem})") from exc
    return parts, parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        parts, value = parse_override(text)
        node = raw
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise CselabError(f"override {text!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = value
    return raw


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CselabError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise CselabError(f"{path}: the top level must be a mapping of sections")
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, **top: Any) -> RunConfig:
    """Read a YAML preset (optional), apply ``KEY=VALUE`` overrides and top-level values, validate."""
    raw = read_yaml(path) if path else {}
    raw = apply_overrides(raw, overrides or [])
    raw.update({k: v for k, v in top.items() if v is not None})
    return validate(RunConfig, raw)


def validate(model: type[BaseModel], raw: dict[str, Any], prefix: str = "") -> Any:
    """Validate ``raw`` into ``model``; the first problem becomes one line, with a suggestion for typos."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise CselabError(describe_error(model, exc, prefix)) from None


def describe_error(model: type[BaseModel], exc: ValidationError, prefix: str = "") -> str:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    key = prefix + ".".join(loc)
    if err["type"] == "extra_forbidden":
        valid = [prefix + k for k in _valid_keys(model, loc[:-1])]
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"
        return f"config: unknown key {key!r}{hint}"
    return f"config: {key}: {err['msg']}"


def _valid_keys(model: type[BaseModel], path: list[str]) -> list[str]:
    current: Any = model
    for part in path:
        field = current.model_fields.get(part)
        candidates = [field.annotation, *typing.get_args(field.annotation)] if field is not None else []
        models = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not models:
            return []
        current = models[0]
    base = ".".join(path)
    return [f"{base}.{name}" if base else name for name in current.model_fields]


def dump_config(config: RunConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


# settings that change neither the maths nor the data of a run: where it runs, with how many threads, how often it
# logs, where it writes. Two configurations that differ only in these describe the same run.
RUNTIME_KEYS = frozenset({"train.device", "train.threads", "train.eval_batch_size", "train.log_every",
                          "train.tensorboard", "train.output_dir"})


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested configuration (``RunConfig.model_dump()``) as dotted keys -> values (``train.lr``; an empty mapping
    is a value)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            out.update(flatten_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
