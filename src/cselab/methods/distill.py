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
``"similarities_and_vectors"`` (ours) computes both the in-batch similarity term and the vector term (``vector_loss``,
through ``projection``) on the same batch, weighed by ``loss_weights`` (1 each unless set): the cosines keep the
geometry general similarity reads, the vectors carry the features a classifier of the teacher's vectors reads.

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
  sentence with its k nearest neighbours by the teacher's cosine over the training text
  (``data/text/neighbour_groups.py``), so a batch of ``train.batch_size`` examples holds ``batch_size * (k + 1)``
  sentences and related pairs besides unrelated ones. The teacher encodes the whole text once when training starts, on
  the student's device, in the run's precision.
  ``neighbour_blocks`` (indices where a block of the training text starts) keeps each sentence's neighbours within
  its block: where a text holds lines and passages made of them, a line's nearest texts would be its own passages.
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

**The teacher's pass.** Every target but the papers' (``vectors`` with ``projection: none``, and the similarity
targets without neighbours, whose teacher runs on each batch) reads the teacher's unit vectors of the training
text from a finished pass (:mod:`cselab.teacher.vectors`): the store ``method_options.teacher_vectors`` names
(``cselab adapt`` writes one over the whole text in ``OUTPUT/teacher``), or else one the method fills in the
cache of teacher passes (``$CSELAB_HOME/teacher-vectors``) before the first step. A resumed run reads the same
store; no teacher runs during the steps.

**A teacher of another width, onto its vectors** (``target: vectors``; not in the papers, ours and LEAF's):

- ``projection: pca-rotation``: the teacher's unit vectors, reduced to the student's width by their leading singular
  directions over the training text (uncentred: the reduced vectors keep the teacher's cosines), are turned into the
  student's own frame by the orthogonal Procrustes fit, with one scale, that maps them closest to the untouched
  student's vectors of up to ``fit_sentences`` training sentences. The target is then the teacher's geometry written
  where the student already is: no module is added, the model at step 0 is the untouched student.
- ``projection: linear-head``: a linear layer from the student's width to the teacher's, trained with the
  student (LEAF), initialised by least squares from the untouched student's vectors of the same sentences, maps
  the student's vector onto the teacher's unit vector. The layer is dropped at inference: the user gets the
  student's own vectors, a plain model of the start's width.
- ``projection: pca-rotation+linear-head`` (ours): both at once, as two terms on each batch. The student's own vector
  meets the rotated PCA target (term ``distillation_cosine`` or ``distillation_mse``), so the teacher's geometry is
  written into the student's frame, and the head's output meets the teacher's whole unit vector (term
  ``head_distillation_cosine`` or ``head_distillation_mse``), so what the PCA drops still reaches the student.
  ``loss_weights`` weighs the two; the head is dropped at inference.

``vector_loss`` says how a student vector meets its target: ``mse`` (term ``distillation_mse``, the direction and
the length) or ``cosine`` (term ``distillation_cosine``, ``1 - cos``, the direction only).

``contrastive: true`` (ours) adds SimCSE's term to any target but ``pairs``: the student runs on each batch twice,
under two dropout masks, and ``info_nce`` (in-batch negatives, at ``temperature``, the one temperature of the method
options) pulls each sentence's two vectors together; the first view is the one the distillation terms read. Why: the
teacher's vectors carry its geometry, SimCSE's term learns from the user's own text what the teacher does not know.
``loss_weights.info_nce`` weighs it. It needs dropout (``model.dropout`` above 0 or the checkpoint's own; a student
without any is refused) and doubles the student's work on each batch. In-batch negatives push apart sentences of one
topic, which topic clustering needs together; ``related_cosine: c`` leaves out of each sentence's negatives the
sentences of the batch whose teacher's cosine to it is at least ``c`` (targets that read a finished pass).

``length_groups: G`` (ours) runs the student on a batch as G sub-batches of similar length
(``Encoder.forward_by_length``): batches made by meaning (``neighbours``) cannot be grouped by length, and where lines
and passages are trained together one passage would pad a whole batch to its length.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor, nn

from cselab.config.run_config import DEFAULT_LENGTH_GROUP_WINDOW
from cselab.errors import CselabError
from cselab.losses import (
    distillation_cosine,
    distillation_mse,
    info_nce,
    pair_similarity_mse,
    similarity_distillation_kl,
    similarity_distillation_mse,
)
from cselab.methods.base import Method, MethodOptions, StepContext, register_method
from cselab.methods.simcse import duplicate
from cselab.models.dropout import has_dropout
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import load_model


class DistillOptions(MethodOptions):
    teacher: str = Field(description="saved model directory of the teacher (twin, ensemble or encoder)")
    target: Literal["vectors", "similarities", "similarity_distributions", "pairs", "similarities_and_vectors"] = Field(
        "vectors", description="vectors: MSE onto the teacher's vectors (the papers'; same width); similarities: "
        "MSE onto its in-batch cosine similarities, off the diagonal (any teacher width); similarity_distributions: "
        "KL onto each sentence's softmax over the other sentences' similarities at method_options.temperature; "
        "pairs: MSE onto its cosine of each sentence with a near neighbour and with random sentences (any width); "
        "similarities_and_vectors: the similarities' term and the vectors' term (vector_loss, projection) together")
    neighbours: int = Field(0, ge=0, description="k > 0: each example is a sentence with its k nearest neighbours by "
                            "the teacher's cosine, so a batch holds batch_size * (k + 1) sentences "
                            "(similarity targets); target pairs: each sentence's partner is drawn from its "
                            "k nearest neighbours (required)")
    neighbour_blocks: list[int] = Field(default_factory=list, description="neighbours: training example indices "
                                        "where a new block starts; each example's neighbours come from its own block "
                                        "(a recipe's units: mixed: lines among lines, passages among passages)")
    random_pairs: int = Field(1, ge=0, description="target pairs: random partners per sentence besides its neighbour")
    projection: Literal["none", "pca-rotation", "linear-head", "pca-rotation+linear-head"] = Field(
        "none", description="target vectors with a teacher of another width: none (equal widths); pca-rotation (the "
        "teacher's PCA rotated into the student's frame); linear-head (a trained linear map, dropped at inference); "
        "pca-rotation+linear-head (both, as two terms: the student onto the rotated PCA, the head onto the teacher)")
    vector_loss: Literal["mse", "cosine"] = Field("mse", description="target vectors: mse (direction and length) or "
                                                  "cosine (1 - cos, the direction only)")
    teacher_vectors: str | None = Field(None, description="a finished teacher pass over the training text (cselab "
                                        "adapt writes OUTPUT/teacher); default: the method runs one in "
                                        "the cache $CSELAB_HOME/teacher-vectors when its target needs it")
    length_groups: int = Field(1, ge=1, description="run the student on each batch as this many sub-batches of "
                               "similar length (Encoder.forward_by_length): less padding where a batch mixes lines "
                               "and passages; 1 runs the batch whole")
    contrastive: bool = Field(False, description="also SimCSE's term: InfoNCE between two dropout views of each "
                              "batch's student vectors (term info_nce, at method_options.temperature); any target "
                              "but pairs; doubles the student's work a step")
    related_cosine: float | None = Field(None, ge=-1.0, le=1.0, description="contrastive: sentences of a batch whose "
                                         "teacher's cosine to a sentence is at least this are left out of its "
                                         "negatives (read from the teacher's pass); null keeps every other sentence")
    fit_sentences: int = Field(4096, ge=16, description="projection: the training sentences the untouched student "
                               "encodes to fit the rotation or the head's start")


TARGET_TERMS = {"vectors": "distillation_mse", "similarities": "similarity_distillation_mse",
                "similarity_distributions": "similarity_distillation_kl", "pairs": "pair_similarity_mse"}
VECTOR_LOSSES = {"mse": distillation_mse, "cosine": distillation_cosine}
VECTOR_LOSS_TERMS = {choice: loss.__name__ for choice, loss in VECTOR_LOSSES.items()}  # a term is named by its loss
VECTOR_TARGETS = ("vectors", "similarities_and_vectors")  # the targets that match each sentence's vector
HEAD_PROJECTIONS = ("linear-head", "pca-rotation+linear-head")  # the projections that train a head
ROTATION_AND_HEAD = "pca-rotation+linear-head"  # both projections, as two terms
HEAD_TERMS = {choice: f"head_{term}" for choice, term in VECTOR_LOSS_TERMS.items()}  # beside the rotation
CONTRASTIVE_TERM = info_nce.__name__  # SimCSE's term between two dropout views (option contrastive)


def sentences_per_example(options: DistillOptions) -> int:
    """How many sentences a training example brings into its batch: the sentence and its ``neighbours``, or with
    ``target: pairs`` the anchor, one neighbour and its ``random_pairs``."""
    if options.target == "pairs":
        return 2 + options.random_pairs
    return 1 + options.neighbours


# the fewest sentences of a batch each target can compare
MIN_BATCH = {"vectors": 1, "similarities": 2, "similarity_distributions": 3, "pairs": 1,
             "similarities_and_vectors": 2}


def _freeze(model: nn.Module) -> nn.Module:
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()


@register_method
class Distill(Method):
    name = "distill"
    terms = (*TARGET_TERMS.values(), "distillation_cosine", *HEAD_TERMS.values(), CONTRASTIVE_TERM)  # terms_of
    Options = DistillOptions

    @classmethod
    def needs_in_batch_negatives(cls, options: MethodOptions) -> bool:
        """Only the contrastive term contrasts a sentence with its batch (the similarity targets check their own
        batch sizes)."""
        assert isinstance(options, DistillOptions)
        return bool(options.contrastive)

    @classmethod
    def terms_of(cls, options: MethodOptions) -> tuple[str, ...]:
        assert isinstance(options, DistillOptions)
        return cls._distillation_terms_of(options) + ((CONTRASTIVE_TERM,) if options.contrastive else ())

    @staticmethod
    def _distillation_terms_of(options: DistillOptions) -> tuple[str, ...]:
        if options.target == "vectors":
            if options.projection == ROTATION_AND_HEAD:
                return (VECTOR_LOSS_TERMS[options.vector_loss], HEAD_TERMS[options.vector_loss])
            return (VECTOR_LOSS_TERMS[options.vector_loss],)
        if options.target == "similarities_and_vectors":
            return (TARGET_TERMS["similarities"], VECTOR_LOSS_TERMS[options.vector_loss])
        return (TARGET_TERMS[options.target],)

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        model = config.model
        self.student = Encoder.from_pretrained(
            model.backbone, pooler=model.pooler, max_length=model.eval_max_length, with_head=False,
            dropout=model.dropout,
        )
        options = self.options
        if options.projection != "none" and options.target not in VECTOR_TARGETS:
            raise CselabError(f"config: method_options.projection maps the student onto the teacher's vectors; "
                              f"target {options.target} compares similarities: leave projection at none")
        if options.projection == ROTATION_AND_HEAD and options.target != "vectors":
            raise CselabError(f"config: method_options.projection {ROTATION_AND_HEAD} is two vector terms of target "
                              f"vectors; with target {options.target} use pca-rotation or linear-head")
        if options.vector_loss != "mse" and options.target not in VECTOR_TARGETS:
            raise CselabError("config: method_options.vector_loss applies to target vectors only")
        if options.contrastive and options.target == "pairs":
            raise CselabError("config: method_options.contrastive compares each batch's sentences with each other; "
                              "target pairs batches anchors with their partners: use another target")
        if options.contrastive and not has_dropout(self.student):
            # model.dropout=0.0, or a checkpoint saved without dropout and model.dropout unset: equal views
            raise CselabError("config: method_options.contrastive contrasts two dropout views of each sentence; "
                              "the student has no dropout (model.dropout=0.0, or a checkpoint saved without it), so "
                              "they would be equal: set model.dropout above 0 (e.g. 0.1)")
        # the papers' targets run the teacher on each batch; the others read a finished pass over the text
        self.reads_pass = bool(options.teacher_vectors or options.projection != "none" or options.neighbours
                               or options.target == "similarities_and_vectors")
        if options.related_cosine is not None and not (options.contrastive and self.reads_pass):
            raise CselabError("config: method_options.related_cosine leaves the teacher's related sentences out of "
                              "SimCSE's negatives: it needs method_options.contrastive=true and a target that reads "
                              "the teacher's pass (e.g. target vectors with a projection)")
        # object.__setattr__ keeps the frozen teacher out of parameters(), state_dict() and checkpoints
        teacher = None if self.reads_pass else _freeze(load_model(options.teacher))
        object.__setattr__(self, "teacher", teacher)
        self._teacher_unit: Tensor | None = None  # a pass's unit vectors of the training sentences [N, D]
        self._targets: Tensor | None = None  # target vectors: each training sentence's target [N, d or D]
        self._neighbour_table: Tensor | None = None  # target pairs: [N, k] nearest sentences of each sentence
        # projection linear-head: the student's width to the teacher's (sized when the pass is read)
        self.head: nn.Linear | None = None
        if options.projection in HEAD_PROJECTIONS:
            self.head = nn.Linear(self.student.hidden_size, self._teacher_width())
        if self.options.target == "similarities_and_vectors" and options.projection == "none":
            self._check_widths(self._teacher_width(), self.student.hidden_size)
        if self.options.target == "vectors":
            if options.projection == "none":
                width = getattr(self.teacher, "hidden_size", None) if teacher is not None else self._teacher_width()
                self._check_widths(width, self.student.hidden_size)
            if self.options.neighbours:
                raise CselabError("config: method_options.neighbours groups related sentences for the similarity "
                                  "targets; with target vectors every sentence is matched on its own")
        elif self.options.neighbours and config.train.length_group_window not in (None, DEFAULT_LENGTH_GROUP_WINDOW):
            # the default window steps aside (length_grouping below); a window the user chose is a contradiction
            raise CselabError("config: method_options.neighbours groups sentences by meaning, "
                              "train.length_group_window by length: use one of them")
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
                              "method_options.projection=pca-rotation (or linear-head) to map the teacher's vectors, "
                              "or method_options.target=similarities to distil the in-batch similarities instead")

    def _teacher_width(self) -> int:
        """The width of the teacher's vectors, from its finished pass or from the model itself."""
        from cselab.data.stores.vector_store import VectorStore

        if self.options.teacher_vectors:
            store = VectorStore.open(self.options.teacher_vectors)
            if store is None:
                raise CselabError(f"method_options.teacher_vectors: {self.options.teacher_vectors} holds no "
                                  "teacher pass")
            return store.dim
        return int(load_model(self.options.teacher).hidden_size)

    def _read_pass(self, sentences: Sequence[str]) -> Tensor:
        """The teacher's unit vectors of ``sentences`` from its pass (module docstring), ``[N, D]``."""
        from cselab.teacher.vectors import read_teacher_vectors, teacher_vectors

        if self.options.teacher_vectors:
            vectors = read_teacher_vectors(self.options.teacher_vectors, sentences)
        else:
            # kept in the cache, not in train.output_dir: the run directory is not opened yet
            vectors = teacher_vectors(self.options.teacher, sentences, None, device=self.student.device,
                                                   requested_precision=self.config.train.precision)
        return F.normalize(torch.from_numpy(np.array(vectors, dtype=np.float32)), dim=-1)

    def training_examples(self) -> Sequence[str] | Sequence[tuple[str, ...]] | Sequence[int]:
        sentences = super().training_examples()
        if not self.reads_pass:
            return sentences
        from cselab.data.text.neighbour_groups import nearest_neighbours

        if self.options.neighbours and not self.options.neighbours < len(sentences):
            raise CselabError(f"config: method_options.neighbours must be below the number of training sentences "
                              f"({len(sentences)}), got {self.options.neighbours}")
        self._sentences = list(sentences)
        self._teacher_unit = self._read_pass(sentences)
        if self.options.target in VECTOR_TARGETS:
            self._targets = self._fit_targets()
        if self.options.neighbours:
            try:
                self._neighbour_table = nearest_neighbours(self._teacher_unit, self.options.neighbours,
                                                           blocks=self.options.neighbour_blocks)
            except ValueError as exc:
                raise CselabError(f"config: method_options.neighbours: {exc}") from None
            if self.options.target != "pairs":  # an example: a sentence and its k nearest, as indices
                return [(i, *row) for i, row in enumerate(self._neighbour_table.tolist())]
        return range(len(sentences))  # an example is the index of its (anchor) sentence

    def _fit_targets(self) -> Tensor:
        """Target vectors: the teacher's unit vectors, or their projection into the student's frame (and the
        linear head's start), fitted on the untouched student's vectors of a sample of the training text."""
        unit = self._teacher_unit
        assert unit is not None
        if self.options.projection == "none":
            self._check_widths(unit.shape[1], self.student.hidden_size)
            return unit
        sample = sorted(np.random.default_rng(self.config.train.seed).choice(
            len(self._sentences), min(self.options.fit_sentences, len(self._sentences)), replace=False).tolist())
        student = self.student.encode([self._sentences[i] for i in sample], batch_size=64).double()
        if self.head is not None:
            weight, bias = fit_linear_map(student, unit[sample].double())
            with torch.no_grad():
                self.head.weight.copy_(weight.T.float())
                self.head.bias.copy_(bias.float())
            if self.options.projection == "linear-head":
                return unit
        return pca_rotation(unit.double(), sample, student).float()

    def collate(self, examples: Sequence[str] | Sequence[tuple[str, ...]] | Sequence[int]) -> dict[str, Any]:
        if self.options.target == "pairs":
            return self._collate_pairs([int(i) for i in examples])
        if self.reads_pass:
            rows = [i for e in examples for i in e] if self.options.neighbours else [int(i) for i in examples]
            texts = [self._sentences[i] for i in rows]
            index = torch.tensor(rows)
            if self._two_targets:  # the teacher's own vectors beside the targets in the student's frame
                assert self._teacher_unit is not None and self._targets is not None
                rows_of = {"teacher_rows": self._teacher_unit[index], "target_rows": self._targets[index]}
            else:
                targets = self._targets if self._targets is not None else self._teacher_unit
                rows_of = {"teacher_rows": targets[index]}
            if self.options.related_cosine is not None:  # the teacher's own unit vectors, to find related pairs
                assert self._teacher_unit is not None
                rows_of["related_rows"] = self._teacher_unit[index]
            return {"texts": texts, **rows_of,
                    **self.student.tokenize(texts, max_length=self.config.model.max_length)}
        texts = list(examples)
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
        features = {k: v for k, v in batch.items()
                    if k not in ("texts", "pair_targets", "teacher_rows", "target_rows", "related_rows")}
        if self.options.contrastive:  # both dropout views in one pass of 2B rows; the first is the distilled one
            student, second = self.student.forward_by_length(duplicate(features),
                                                             groups=self.options.length_groups).chunk(2)
            views = {"view_1": student, "view_2": second}
            if "related_rows" in batch:
                views["related_teacher"] = batch["related_rows"].to(student.device)
            return {**self._distillation_embeddings(batch, student), **views}
        return self._distillation_embeddings(
            batch, self.student.forward_by_length(features, groups=self.options.length_groups))

    def _distillation_embeddings(self, batch: dict[str, Any], student: Tensor) -> dict[str, Tensor]:
        """What the distillation terms read, from the student's vectors of the batch."""
        if self.options.target == "pairs":  # the targets came with the batch: no teacher runs here
            return {"student": student, "pair_targets": batch["pair_targets"]}
        if self.reads_pass:
            teacher = batch["teacher_rows"].to(student.device)
            if self._two_targets:
                projected = self.head(student) if self.head is not None else student
                return {"student": student, "teacher": teacher, "projected": projected,
                        "target": batch["target_rows"].to(student.device)}
            if self.head is not None:  # the head's output meets the teacher's vector; the student is what is kept
                student = self.head(student)
            return {"student": student, "teacher": teacher}
        teacher = self.teacher_embeddings(batch["texts"], student.device)
        if self.options.target == "vectors":
            self._check_widths(teacher.shape[-1], student.shape[-1])
        return {"student": student, "teacher": teacher}

    @property
    def loss_is_example_mean(self) -> bool:
        """Target ``vectors`` alone: each term is the mean over the batch's sentences of that sentence's distance to
        its own target (through the head, which does not depend on the batch), so the batch's gradient is the sum
        of its pieces'. The similarity targets, pairs, neighbour groups and the contrastive term couple the batch."""
        return self.options.target == "vectors" and not self.options.neighbours and not self.options.contrastive

    @property
    def rows_per_example(self) -> int:
        return sentences_per_example(self.options) * (2 if self.options.contrastive else 1)

    @property
    def _two_targets(self) -> bool:
        """Whether a batch carries the teacher's own unit vectors and the targets in the student's frame."""
        return self.options.target == "similarities_and_vectors" or self.options.projection == ROTATION_AND_HEAD

    @property
    def length_grouping(self) -> bool:
        return not self.options.neighbours  # neighbour groups are built by meaning; lengths must not reorder them

    def example_lengths(self, examples: Sequence[Any]) -> list[int]:
        if not self.reads_pass:
            return super().example_lengths(examples)
        texts = [self._sentences[int(i)] for i in examples]  # an example is a sentence's index
        return [len(row) for row in self.student.token_rows(texts, self.config.model.max_length)]

    def local_embeddings(self) -> frozenset[str]:
        # pairs: each rank's loss is the mean over its own rows (anchors, then their partners), never gathered
        return frozenset({"student", "pair_targets"}) if self.options.target == "pairs" else frozenset()

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        terms = self._distillation_terms(embeddings)
        if self.options.contrastive and self.active(CONTRASTIVE_TERM):
            related = embeddings.get("related_teacher")
            negatives = None if related is None else related @ related.T < self.options.related_cosine
            terms[CONTRASTIVE_TERM] = info_nce(embeddings["view_1"], embeddings["view_2"], self.options.temperature,
                                               negatives=negatives)
        return terms

    def _distillation_terms(self, embeddings: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.options.target == "pairs":
            # rows: the B anchors, then their B neighbours, then random_pairs rounds of B random partners
            student, targets = embeddings["student"], embeddings["pair_targets"]
            anchors = student[: student.shape[0] // (2 + self.options.random_pairs)]
            firsts = anchors.repeat(1 + self.options.random_pairs, 1)
            return {"pair_similarity_mse": pair_similarity_mse(firsts, student[anchors.shape[0]:], targets)}
        student, teacher = embeddings["student"], embeddings["teacher"]
        if self.options.projection == ROTATION_AND_HEAD:  # the student onto the rotation, the head onto the teacher
            loss = VECTOR_LOSSES[self.options.vector_loss]
            rotation_term, head_term = VECTOR_LOSS_TERMS[self.options.vector_loss], HEAD_TERMS[self.options.vector_loss]
            return {**({rotation_term: loss(student, embeddings["target"])} if self.active(rotation_term) else {}),
                    **({head_term: loss(embeddings["projected"], teacher)} if self.active(head_term) else {})}
        if self.options.target == "similarities_and_vectors":
            vector_term = VECTOR_LOSS_TERMS[self.options.vector_loss]
            terms = {}
            if self.active("similarity_distillation_mse"):
                terms["similarity_distillation_mse"] = similarity_distillation_mse(student, teacher)
            if self.active(vector_term):
                terms[vector_term] = VECTOR_LOSSES[self.options.vector_loss](embeddings["projected"],
                                                                             embeddings["target"])
            return terms
        if self.options.target == "similarities":
            return {"similarity_distillation_mse": similarity_distillation_mse(student, teacher)}
        if self.options.target == "similarity_distributions":
            return {"similarity_distillation_kl": similarity_distillation_kl(student, teacher,
                                                                             self.options.temperature)}
        return {VECTOR_LOSS_TERMS[self.options.vector_loss]: VECTOR_LOSSES[self.options.vector_loss](student, teacher)}

    def inference_model(self) -> Encoder:
        return self.student


def fit_linear_map(source: Tensor, target: Tensor, ridge: float = 1e-2) -> tuple[Tensor, Tensor]:
    """Ridge regression ``(W, b)`` with ``source @ W + b`` close to ``target`` (``W: [d_source, d_target]``): least
    squares on the centred data with ``lambda * I`` added to ``X^T X``, ``lambda = ridge * trace(X^T X) / d_source``.
    Why the ridge: the vectors of a model's sentences lie close to a few directions, and a plain least-squares map
    from them is huge and unstable (on a tiny test model, weights of 10^4 that one training step turned around)."""
    mean_x, mean_y = source.mean(0), target.mean(0)
    x, y = source - mean_x, target - mean_y
    gram = x.T @ x
    penalty = ridge * torch.trace(gram) / gram.shape[0]
    weight = torch.linalg.solve(gram + penalty * torch.eye(gram.shape[0], dtype=gram.dtype), x.T @ y)
    return weight, mean_y - mean_x @ weight


def pca_rotation(teacher: Tensor, sample: Sequence[int], student: Tensor) -> Tensor:
    """The teacher's vectors ``[N, D]`` written in the student's frame ``[N, d]`` (``D >= d``): reduced to their
    ``d`` leading singular directions (a truncated SVD of all N rows, not centred, so the reduced vectors keep the
    teacher's dot products and cosines as closely as ``d`` dimensions can), then mapped by the orthogonal Procrustes
    fit with one scale that brings the rows ``sample`` closest to the student's vectors of the same sentences
    (``student``). Why not centred: a centred PCA with the student's mean added back changes the pairwise cosines
    the target holds (on STS-B's text, 0.0012 mean squared cosine error against the teacher's, against 0.00001)."""
    width = student.shape[1]
    if teacher.shape[1] < width:
        raise CselabError("projection pca-rotation reduces the teacher's vectors to the student's width: "
                          f"the teacher's {teacher.shape[1]} are fewer than the student's {width}; "
                          "use projection linear-head")
    reduced = teacher @ leading_directions(teacher, width)  # [N, d], first direction first
    fitted = reduced[list(sample)]
    u, singular, vt = torch.linalg.svd(fitted.T @ student)
    rotation = u @ vt
    scale = singular.sum() / (fitted ** 2).sum()
    return scale * reduced @ rotation


def leading_directions(vectors: Tensor, width: int) -> Tensor:
    """The ``width`` leading eigenvectors ``[D, width]`` of the uncentred second moment ``vectors.T @ vectors`` of the
    rows of ``vectors`` ``[N, D]``, first direction first: the directions :func:`pca_rotation` keeps."""
    _, eigenvectors = torch.linalg.eigh(vectors.T @ vectors)  # ascending eigenvalues
    return eigenvectors[:, -width:].flip(1)
