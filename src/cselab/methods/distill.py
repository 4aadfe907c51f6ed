"""Distillation of a saved model into one plain encoder (the "-D" models of TNCSE/JTCSE; METHODS.md section 5).

The student (``model.backbone``, read with ``model.pooler``, no MLP) regresses its sentence vector onto the
teacher's inference output on the training sentences with ``distillation_mse`` (the papers follow EDFSE:
an MSE loss). The teacher (``method_options.teacher``: any saved model, typically a twin, whose output is
``h_I + h_II``, or an ensemble for "+UC D") is frozen and computed on the fly under no-grad for each batch.

``method_options.target`` says what is matched: ``"vectors"`` (default, the papers') needs a teacher of the
student's width; ``"similarities"`` (term ``similarity_distillation_mse``) matches the in-batch cosine-similarity
matrices instead, so any teacher width works (e.g. a 384-d + 768-d concat ensemble taught to one 384-d MiniLM);
``"similarity_distributions"`` (term ``similarity_distillation_kl``) matches, for each sentence, the softmax of its
similarities to the other sentences of the batch at ``method_options.temperature`` (KL divergence): the ranking of
its neighbours rather than every cosine's value (not in the papers; an option of ours, any teacher width).

**Decisions:**
- The teacher's target is its INFERENCE output (its own tokenizer(s), its saved truncation length, dropout
  off), i.e. exactly what the student should reproduce at inference; the student reads the same sentences
  truncated to ``model.max_length`` like every training run.
- The teacher is kept out of the module tree, so checkpoints and resume states hold the student only; it is
  moved to the student's device at the first step.
- Student and teacher embeddings are gathered over data-parallel ranks so the loss is the global mean (and,
  for similarities, the matrices span the global batch).
- A teacher of another width with target "vectors" is refused when the method is built (from the models'
  sizes) and again at the first step (from the vectors), in one line that points to target "similarities".
- ``method_options.neighbours: k`` (not in the papers; for the similarity targets) makes each training example a
  sentence with its k nearest neighbours by the teacher's cosine over the training text (``data/neighbour_groups.py``),
  so a batch of ``train.batch_size`` examples holds ``batch_size * (k + 1)`` sentences and related pairs besides
  unrelated ones. The teacher encodes the whole text once when training starts (on its device then: the CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field
from torch import Tensor, nn

from ..errors import CselabError
from ..losses import distillation_mse, similarity_distillation_kl, similarity_distillation_mse
from ..models.encoder import Encoder
from ..models.sentence_model import load_model
from .base import Method, MethodOptions, StepContext, register_method


class DistillOptions(MethodOptions):
    teacher: str = Field(description="saved model directory of the teacher (twin, ensemble or encoder)")
    target: Literal["vectors", "similarities", "similarity_distributions"] = Field(
        "vectors", description="vectors: MSE onto the teacher's vectors (the papers'; same width); similarities: "
        "MSE onto its in-batch cosine similarities, off the diagonal (any teacher width); similarity_distributions: "
        "KL onto each sentence's softmax over the other sentences' similarities at method_options.temperature")
    neighbours: int = Field(0, ge=0, description="k > 0: each example is a sentence with its k nearest neighbours by "
                            "the teacher's cosine, so a batch holds batch_size * (k + 1) sentences (similarity targets)")


TARGET_TERMS = {"vectors": "distillation_mse", "similarities": "similarity_distillation_mse",
                "similarity_distributions": "similarity_distillation_kl"}
# the fewest sentences of a batch each target can compare
MIN_BATCH = {"vectors": 1, "similarities": 2, "similarity_distributions": 3}


def _freeze(model: nn.Module) -> nn.Module:
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()


@register_method
class Distill(Method):
    name = "distill"
    terms = tuple(TARGET_TERMS.values())  # a run computes its target's one (terms_of)
    Options = DistillOptions

    @classmethod
    def terms_of(cls, options: MethodOptions) -> tuple[str, ...]:
        assert isinstance(options, DistillOptions)
        return (TARGET_TERMS[options.target],)

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        model = config.model
        self.student = Encoder.from_pretrained(
            model.backbone, pooler=model.pooler, max_length=model.eval_max_length, with_head=False,
            dropout=model.dropout,
        )
        # object.__setattr__ keeps the frozen teacher out of parameters(), state_dict() and checkpoints
        object.__setattr__(self, "teacher", _freeze(load_model(self.options.teacher)))
        if self.options.target == "vectors":
            self._check_widths(getattr(self.teacher, "hidden_size", None), self.student.hidden_size)
            if self.options.neighbours:
                raise CselabError("config: method_options.neighbours groups related sentences for the similarity "
                                  "targets; with target vectors every sentence is matched on its own")
        elif self.options.neighbours and config.train.length_group_window:
            raise CselabError("config: method_options.neighbours groups sentences by meaning, train.length_group_window "
                              "by length: use one of them")
        elif config.train.batch_size * (self.options.neighbours + 1) < MIN_BATCH[self.options.target]:
            raise CselabError(f"config: distillation onto {self.options.target} compares sentences of one batch: "
                              f"train.batch_size must be at least {MIN_BATCH[self.options.target]}, "
                              f"got {config.train.batch_size}")

    def _check_widths(self, teacher: int | None, student: int) -> None:
        if teacher is not None and teacher != student:
            raise CselabError(f"the teacher {self.options.teacher} gives vectors of size {teacher}, the student of "
                              f"size {student}; distilling onto vectors needs equal sizes: set "
                              "method_options.target=similarities to distil the in-batch similarities instead")

    def training_examples(self) -> Sequence[str] | Sequence[tuple[str, ...]]:
        sentences = super().training_examples()
        if not self.options.neighbours:
            return sentences
        from ..data.neighbour_groups import neighbour_groups

        vectors = self.teacher.encode(list(sentences), batch_size=128, progress=True)
        return neighbour_groups(sentences, vectors, self.options.neighbours)

    def collate(self, examples: Sequence[str] | Sequence[tuple[str, ...]]) -> dict[str, Any]:
        texts = [t for e in examples for t in e] if self.options.neighbours else list(examples)
        return {"texts": texts, **self.student.tokenize(texts, max_length=self.config.model.max_length)}

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
        if self.options.target == "vectors":
            self._check_widths(teacher.shape[-1], student.shape[-1])
        return {"student": student, "teacher": teacher}

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        student, teacher = ctx.dist.gather(embeddings["student"]), ctx.dist.gather(embeddings["teacher"])
        if self.options.target == "similarities":
            return {"similarity_distillation_mse": similarity_distillation_mse(student, teacher)}
        if self.options.target == "similarity_distributions":
            return {"similarity_distillation_kl": similarity_distillation_kl(student, teacher, self.options.temperature)}
        return {"distillation_mse": distillation_mse(student, teacher)}

    def inference_model(self) -> Encoder:
        return self.student
