"""Distillation of a saved model into one plain encoder (the "-D" models of TNCSE/JTCSE; docs/methods.md#tncse).

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
  unrelated ones. The teacher encodes the whole text once when training starts, on the student's device,
  in the run's precision.
- ``target: pairs`` (term ``pair_similarity_mse``; not in the papers, ours): each example is one sentence (the
  anchor); its batch adds, for every anchor, ONE partner drawn uniformly from its ``neighbours`` nearest sentences
  by the teacher's cosine and ``random_pairs`` partners drawn uniformly from the whole text, and the student's
  cosine of each (anchor, partner) pair regresses onto the teacher's. A batch of B anchors encodes
  ``B * (2 + random_pairs)`` sentences. Why: STS scores graded pairs of related sentences, while a shuffled batch
  holds almost only unrelated ones; here half the pairs (with one random partner) are related ones. The
  teacher's vectors of the whole text are computed once at the start, so no teacher runs during the steps. The
  partners of a batch are drawn from a generator seeded by ``train.seed`` and the batch's anchors, so a resumed
  run draws the same ones. The loss is each rank's own mean (equal pairs per rank: the DDP gradient is the
  global mean); no gradient caching (``train.chunk_size``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor, nn

from cselab.config.run_config import DEFAULT_LENGTH_GROUP_WINDOW
from cselab.errors import CselabError
from cselab.losses import (
    distillation_mse,
    pair_similarity_mse,
    similarity_distillation_kl,
    similarity_distillation_mse,
)
from cselab.methods.base import Method, MethodOptions, StepContext, register_method
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model

TEACHER_BATCH = 128  # sentences per batch of the teacher's pass over the text


def teacher_pass_precision(requested: str, teacher: nn.Module) -> str:
    """The precision of the teacher's pass over the text: the run's ``train.precision`` (``auto``: bf16 where the
    probe says it pays, as the training steps do). On a 2-core Intel Xeon with AMX the pass ran 1.6-1.7 times
    faster in bf16 (``benchmarks/teacher_pass_speed.py``). ``cselab adapt``'s estimate times it the same way."""
    from cselab.runtime.precision import inference_precision

    return inference_precision(requested, teacher, batch_size=TEACHER_BATCH).precision


class DistillOptions(MethodOptions):
    teacher: str = Field(description="saved model directory of the teacher (twin, ensemble or encoder)")
    target: Literal["vectors", "similarities", "similarity_distributions", "pairs"] = Field(
        "vectors", description="vectors: MSE onto the teacher's vectors (the papers'; same width); similarities: "
        "MSE onto its in-batch cosine similarities, off the diagonal (any teacher width); similarity_distributions: "
        "KL onto each sentence's softmax over the other sentences' similarities at method_options.temperature; "
        "pairs: MSE onto its cosine of each sentence with a near neighbour and with random sentences (any width)")
    neighbours: int = Field(0, ge=0, description="k > 0: each example is a sentence with its k nearest neighbours by "
                            "the teacher's cosine, so a batch holds batch_size * (k + 1) sentences (similarity targets); "
                            "target pairs: each sentence's partner is drawn from its k nearest neighbours (required)")
    random_pairs: int = Field(1, ge=0, description="target pairs: random partners per sentence besides its neighbour")


TARGET_TERMS = {"vectors": "distillation_mse", "similarities": "similarity_distillation_mse",
                "similarity_distributions": "similarity_distillation_kl", "pairs": "pair_similarity_mse"}
# the fewest sentences of a batch each target can compare
MIN_BATCH = {"vectors": 1, "similarities": 2, "similarity_distributions": 3, "pairs": 1}


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
        self._teacher_unit: Tensor | None = None  # target pairs: the teacher's unit vectors of the whole text
        self._neighbour_table: Tensor | None = None  # target pairs: [N, k] nearest sentences of each sentence
        if self.options.target == "vectors":
            self._check_widths(getattr(self.teacher, "hidden_size", None), self.student.hidden_size)
            if self.options.neighbours:
                raise CselabError("config: method_options.neighbours groups related sentences for the similarity "
                                  "targets; with target vectors every sentence is matched on its own")
        elif self.options.neighbours and config.train.length_group_window not in (None, DEFAULT_LENGTH_GROUP_WINDOW):
            # the default window steps aside (length_grouping below); a window the user chose is a contradiction
            raise CselabError("config: method_options.neighbours groups sentences by meaning, train.length_group_window "
                              "by length: use one of them")
        if self.options.target == "pairs":
            if not self.options.neighbours:
                raise CselabError("config: target pairs draws each sentence's partner from its nearest neighbours by "
                                  "the teacher: set method_options.neighbours (e.g. 10)")
            if config.train.chunk_size:
                raise CselabError("config: target pairs has no gradient caching; leave train.chunk_size unset")
        elif config.train.batch_size * (self.options.neighbours + 1) < MIN_BATCH[self.options.target]:
            raise CselabError(f"config: distillation onto {self.options.target} compares sentences of one batch: "
                              f"train.batch_size must be at least {MIN_BATCH[self.options.target]}, "
                              f"got {config.train.batch_size}")

    def _check_widths(self, teacher: int | None, student: int) -> None:
        if teacher is not None and teacher != student:
            raise CselabError(f"the teacher {self.options.teacher} gives vectors of size {teacher}, the student of "
                              f"size {student}; distilling onto vectors needs equal sizes: set "
                              "method_options.target=similarities to distil the in-batch similarities instead")

    def _encode_text_with_teacher(self, sentences: Sequence[str]) -> Tensor:
        """The teacher's vectors of the whole training text, computed on the student's device in
        :func:`teacher_pass_precision`."""
        from cselab.runtime.precision import autocast_context

        self.teacher.to(self.student.device)
        precision = teacher_pass_precision(self.config.train.precision, self.teacher)
        with autocast_context(precision, self.student.device):
            return self.teacher.encode(list(sentences), batch_size=TEACHER_BATCH, progress=True).float()

    def training_examples(self) -> Sequence[str] | Sequence[tuple[str, ...]] | Sequence[int]:
        sentences = super().training_examples()
        if not self.options.neighbours:
            return sentences
        from cselab.data.neighbour_groups import nearest_neighbours, neighbour_groups

        vectors = self._encode_text_with_teacher(sentences)
        if self.options.target != "pairs":
            return neighbour_groups(sentences, vectors, self.options.neighbours)
        if not self.options.neighbours < len(sentences):
            raise CselabError(f"config: method_options.neighbours must be below the number of training sentences "
                              f"({len(sentences)}), got {self.options.neighbours}")
        self._sentences = list(sentences)
        self._teacher_unit = F.normalize(vectors.float(), dim=-1).cpu()
        self._neighbour_table = nearest_neighbours(self._teacher_unit, self.options.neighbours)
        return range(len(sentences))  # an example is the index of its anchor sentence

    def collate(self, examples: Sequence[str] | Sequence[tuple[str, ...]] | Sequence[int]) -> dict[str, Any]:
        if self.options.target == "pairs":
            return self._collate_pairs([int(i) for i in examples])
        texts = [t for e in examples for t in e] if self.options.neighbours else list(examples)
        return {"texts": texts, **self.student.tokenize(texts, max_length=self.config.model.max_length)}

    def draw_partners(self, anchors: list[int]) -> tuple[list[int], list[int]]:
        """For each anchor, one of its ``neighbours`` nearest sentences and ``random_pairs`` random sentences (flat,
        round by round), from a generator seeded by the run's seed and the anchors (the same batch draws the same)."""
        assert self._neighbour_table is not None, "training_examples() builds the neighbour table first"
        seed = zlib.crc32(torch.tensor(anchors, dtype=torch.int64).numpy().tobytes(), self.config.train.seed)
        generator = torch.Generator().manual_seed(seed)
        rank = torch.randint(0, self.options.neighbours, (len(anchors),), generator=generator)
        partners = self._neighbour_table[torch.tensor(anchors), rank].tolist()
        randoms = torch.randint(0, len(self._neighbour_table), (self.options.random_pairs * len(anchors),),
                                generator=generator).tolist()
        return partners, randoms

    def _collate_pairs(self, anchors: list[int]) -> dict[str, Any]:
        partners, randoms = self.draw_partners(anchors)
        firsts = anchors * (1 + self.options.random_pairs)
        seconds = partners + randoms
        unit = self._teacher_unit
        targets = (unit[torch.tensor(firsts)] * unit[torch.tensor(seconds)]).sum(-1)
        texts = [self._sentences[i] for i in (*anchors, *seconds)]
        return {"texts": texts, "pair_targets": targets,
                **self.student.tokenize(texts, max_length=self.config.model.max_length)}

    def teacher_embeddings(self, texts: Sequence[str], device: Any) -> Tensor:
        """The teacher's inference vectors ``[B, d]`` (no grad), as an ordinary tensor on ``device``."""
        first = next(self.teacher.parameters())
        if first.device != device:
            self.teacher.to(device)
        # encode() runs in inference mode; clone() outside it gives a tensor autograd may save
        return self.teacher.encode(list(texts), batch_size=max(1, len(texts))).clone().to(device)

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        features = {k: v for k, v in batch.items() if k not in ("texts", "pair_targets")}
        student = self.student(features, apply_head=False)
        if self.options.target == "pairs":  # the targets came with the batch: no teacher runs here
            return {"student": student, "pair_targets": batch["pair_targets"]}
        teacher = self.teacher_embeddings(batch["texts"], student.device)
        if self.options.target == "vectors":
            self._check_widths(teacher.shape[-1], student.shape[-1])
        return {"student": student, "teacher": teacher}

    @property
    def length_grouping(self) -> bool:
        return not self.options.neighbours  # neighbour groups are built by meaning; lengths must not reorder them

    def local_embeddings(self) -> frozenset[str]:
        # pairs: each rank's loss is the mean over its own rows (anchors, then their partners), never gathered
        return frozenset({"student", "pair_targets"}) if self.options.target == "pairs" else frozenset()

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        if self.options.target == "pairs":
            # rows: the B anchors, then their B neighbours, then random_pairs rounds of B random partners
            student, targets = embeddings["student"], embeddings["pair_targets"]
            anchors = student[: student.shape[0] // (2 + self.options.random_pairs)]
            firsts = anchors.repeat(1 + self.options.random_pairs, 1)
            return {"pair_similarity_mse": pair_similarity_mse(firsts, student[anchors.shape[0]:], targets)}
        student, teacher = embeddings["student"], embeddings["teacher"]
        if self.options.target == "similarities":
            return {"similarity_distillation_mse": similarity_distillation_mse(student, teacher)}
        if self.options.target == "similarity_distributions":
            return {"similarity_distillation_kl": similarity_distillation_kl(student, teacher, self.options.temperature)}
        return {"distillation_mse": distillation_mse(student, teacher)}

    def inference_model(self) -> Encoder:
        return self.student
