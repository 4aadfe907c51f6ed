"""The specs of multi-stage recipes (validated YAML blocks): how stage 1 of TNCSE/JTCSE trains its two encoders,
and how each encoder's augmented copy of the corpus is made. :mod:`cselab.training.pipeline` runs them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


# -- the configuration of one augmentation ----------------------------------------------------------
class AugmentationSpec(BaseModel):
    """How to obtain one augmented copy of the corpus (a YAML mapping, validated; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["file", "word_dropout", "word_swap", "word_repeat"]
    path: str | None = Field(None, description="kind 'file': the line-aligned augmented corpus")
    p: float | None = Field(None, gt=0.0, lt=1.0, description="word_dropout (default 0.1) / word_repeat (0.2) rate")
    seed: int | None = Field(None, description="built-in kinds: seed; null = the pipeline chooses one")

    @model_validator(mode="after")
    def _consistent(self) -> AugmentationSpec:
        if self.kind == "file" and not self.path:
            raise ValueError("augmentation kind 'file' needs a path")
        if self.kind != "file" and self.path:
            raise ValueError(f"augmentation kind {self.kind!r} takes no path (use kind 'file')")
        if self.p is not None and self.kind not in ("word_dropout", "word_repeat"):
            raise ValueError(f"augmentation kind {self.kind!r} has no rate p")
        return self

    def params(self) -> dict[str, float]:
        return {"p": self.p} if self.p is not None else {}

    def label(self) -> str:
        """A short file-name-safe name, e.g. ``word_dropout-p0.1-s1``."""
        parts = [self.kind]
        if self.p is not None:
            parts.append(f"p{self.p:g}")
        if self.seed is not None:
            parts.append(f"s{self.seed}")
        return "-".join(parts)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Stage1EncoderSpec(_Strict):
    augmentation: AugmentationSpec = Field(description="how this encoder's copy of the corpus is made")
    settings: dict[str, Any] = Field(default_factory=dict, description="RunConfig sections for this encoder only")


class Stage1Spec(_Strict):
    method: str = Field("simcse", description="the stage-1 training method")
    settings: dict[str, Any] = Field(default_factory=dict, description="RunConfig sections for both encoders")
    encoders: list[Stage1EncoderSpec] = Field(description="exactly two: encoder I and encoder II")

    @field_validator("encoders")
    @classmethod
    def _two(cls, value: list[Stage1EncoderSpec]) -> list[Stage1EncoderSpec]:
        if len(value) != 2:
            raise ValueError(f"stage 1 trains exactly two encoders, got {len(value)}")
        return value


class PipelineSpec(_Strict):
    """The ``method_options.pipeline`` block of a TNCSE/JTCSE config."""

    stage1: Stage1Spec = Field(description="how stage 1 trains the two encoders")
    stage1_dir: str | None = Field(None, description="stage-1 runs and augmented corpora; default <output_dir>/stage1")
