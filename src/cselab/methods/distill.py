"""Distillation of a saved model into one plain encoder (the "-D" models of TNCSE/JTCSE; METHODS.md section 5).

The student (``model.backbone``, read with ``model.pooler``, no MLP) regresses its sentence vector onto the
teacher's inference output on the training sentences with ``distillation_mse`` (the papers follow EDFSE:
an MSE loss). The teacher (``method_options.teacher``: any saved model, typically a twin, whose output is
``h_I + h_II``, or an ensemble for "+UC D") is frozen and computed on the fly under no-grad for each batch.

**Decisions:**
- The teacher's target is its INFERENCE output (its own tokenizer(s), its saved truncation length, dropout
  off), i.e. exactly what the student should reproduce at inference; the student reads the same sentences
  truncated to ``model.max_length`` like every training run.
- The teacher is kept out of the module tree, so checkpoints and resume states hold the student only; it is
  moved to the student's device at the first step.
- Student and teacher embeddings are gathered over data-parallel ranks so the loss is the global mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from torch import Tensor, nn

from ..errors import CselabError
from ..losses import distillation_mse
from ..models.encoder import Encoder
from ..models.sentence_model import load_model
from .base import Method, MethodOptions, StepContext, register_method


class DistillOptions(MethodOptions):
    teacher: str = Field(description="saved model directory of the teacher (twin, ensemble or encoder)")


def _freeze(model: nn.Module) -> nn.Module:
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()


@register_method
class Distill(Method):
    name = "distill"
    terms = ("distillation_mse",)
    Options = DistillOptions

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        model = config.model
        self.student = Encoder.from_pretrained(
            model.backbone, pooler=model.pooler, max_length=model.eval_max_length, with_head=False,
            dropout=model.dropout,
        )
        # object.__setattr__ keeps the frozen teacher out of parameters(), state_dict() and checkpoints
        object.__setattr__(self, "teacher", _freeze(load_model(self.options.teacher)))

    def collate(self, examples: Sequence[str]) -> dict[str, Any]:
        return {"texts": list(examples), **self.student.tokenize(examples, max_length=self.config.model.max_length)}

    def teacher_embeddings(self, texts: Sequence[str], device: Any) -> Tensor:
        """The teacher's inference vectors ``[B, d]`` (no grad), as an ordinary tensor on ``device``."""
        first = next(self.teacher.parameters())
        if first.device != device:
            self.teacher.to(device)
        # encode() runs in inference mode; clone() outside it gives a tensor autograd may save
        return self.teacher.encode(list(texts), batch_size=max(1, len(texts))).clone().to(device)

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        features = {k: v for k, v in batch.items() if k != "texts"}
        student = self.student(features, apply_head=False)
        teacher = self.teacher_embeddings(batch["texts"], student.device)
        if teacher.shape != student.shape:
            raise CselabError(f"the student's vectors have size {student.shape[-1]} but the teacher's "
                              f"{teacher.shape[-1]}; distillation needs equal sizes")
        return {"student": student, "teacher": teacher}

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        student, teacher = ctx.dist.gather(embeddings["student"]), ctx.dist.gather(embeddings["teacher"])
        return {"distillation_mse": distillation_mse(student, teacher)}

    def inference_model(self) -> Encoder:
        return self.student
