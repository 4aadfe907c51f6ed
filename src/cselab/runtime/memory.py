"""How big a piece of a training batch runs forward and backward at once: the micro-batch, from what the step needs.

On a CPU the peak memory of training is the step's activations, not the text, the models or the optimizer: a
transformer keeps, for every token of every layer, its attention probabilities (and their dropout mask) over the
whole sequence and the inputs of its linear layers and norms until the backward pass has used them. For
all-MiniLM-L6-v2 at 256 tokens that is about 0.45 MB a token, so a batch of 64 passages (16,384 tokens) holds 7.5 GB
at once. :func:`activation_bytes_per_token` estimates it from the backbone's configuration (layers, width, heads,
feed-forward width) and the sequence length; :func:`choose_micro_batch` takes the largest piece of the batch whose
activations fit :data:`ACTIVATION_BUDGET` at the width the batch's rows are padded to (a batch of short lines runs
whole, one of long passages a few at a time). A run does not choose it: memory is cselab's to keep small, and the
gradient is the same either way (the trainer accumulates it over the pieces where the loss is a mean over examples,
and caches it where the loss couples the batch, :mod:`cselab.training.grad_cache`).

Why the budget is 256 MiB: a micro-batch's attention probabilities stay below glibc's largest mmap threshold
(32 MiB, :mod:`cselab.runtime.allocator`), so the step's big tensors are reused from the heap instead of being
mapped and zeroed afresh each time. ``make demo``'s command peaked at 1,877 MB so and at 2,276 MB with 512 MiB,
set in training both times (``python -m lab.speed.adapt_footprint --case demo``); its first 12 steps took 32-39 s
against 30-31 at 512 MiB and 54-57 run whole (``python -m lab.speed.demo_steps``; 2 AMD EPYC cores).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ACTIVATION_BUDGET = 256 * 2**20  # bytes of activations a training step may hold at once (see the module's doc)
GRADIENT_CACHE_BUDGET = 192 * 2**20  # the same for a gradient-cached step (see ActivationBudget)
INFERENCE_BUDGET = 32 * 2**20  # bytes one encoding batch is estimated to hold at once (see inference_batches)
LARGEST_HEAP_TENSOR = 32 * 2**20  # glibc's largest mmap threshold: a bigger tensor is mapped and zeroed afresh
ELEMENT_BYTES = 4  # activations are kept in float32 on the CPU, autocast or not (the norms and softmax are fp32)


def _shape(config: Any) -> tuple[int, int, int, int]:
    """Layers, width, heads and feed-forward width of a BERT-like config (DistilBERT's names too; BERT-base's where a
    config says nothing)."""
    layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layers", 0) or 12)
    hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0) or 768)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_heads", 0) or 12)
    intermediate = int(getattr(config, "intermediate_size", 0) or getattr(config, "hidden_dim", 0) or 4 * hidden)
    return layers, hidden, heads, intermediate


def activation_bytes_per_token(config: Any, sequence_length: int) -> int:
    """The bytes one token of a sequence of ``sequence_length`` keeps for the backward pass of a BERT-like encoder
    with ``config``'s ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads`` and ``intermediate_size``.

    Per layer: the attention's scores, probabilities and dropped probabilities (3 floats) and its dropout mask
    (1 byte) for each head and key position, and about 12 hidden-wide and 3 feed-forward-wide vectors (the
    query, key, value, context and the two projections' inputs and outputs, the norms' inputs, the feed-forward's
    pre- and post-activation and their dropout). For all-MiniLM-L6-v2 at 256 tokens it gives 0.46 MB a token: 7.0 GiB
    for a batch of 64 passages, whose step was measured at 8.2 GB of resident memory in all."""
    layers, hidden, heads, intermediate = _shape(config)
    attention = heads * sequence_length * (3 * ELEMENT_BYTES + 1)
    vectors = (12 * hidden + 3 * intermediate) * ELEMENT_BYTES
    return layers * (attention + vectors)


@dataclass(frozen=True)
class ActivationBudget:
    """Bytes of activations a training step may hold at once, by the way its pieces make the batch's gradient:
    ``accumulate`` (a loss that is a mean over examples) or ``gradient_cache`` (a loss that couples the batch).

    Why the gradient-cached way gets less: its recipe (SimCSE, ``cselab adapt --no-teacher``) runs without a teacher
    and is meant to fit a smaller machine, and its steps are no slower in smaller pieces: 12 of the demo's SimCSE
    steps took 38-48 s at 128 MiB, 38-40 at 192, 38-42 at 256 and 35-45 whole (``python -m lab.speed.demo_steps
    --run runs/adapt-footprint/demo-no-teacher --budgets 128 192 256 8192``; 2 AMD EPYC cores). The distillation
    recipes' steps are slower in smaller pieces (30-31 s at 512 MiB, 32-39 at 256), so they keep 256 MiB."""

    accumulate: int = ACTIVATION_BUDGET
    gradient_cache: int = GRADIENT_CACHE_BUDGET

    @classmethod
    def uniform(cls, budget: int) -> ActivationBudget:
        """One budget for both ways."""
        return cls(accumulate=int(budget), gradient_cache=int(budget))

    def of(self, way: str) -> int:
        """The budget of ``way`` (``accumulate`` or ``gradient-cache``)."""
        return self.gradient_cache if way == "gradient-cache" else self.accumulate


@dataclass(frozen=True)
class MicroBatch:
    """How a local batch of ``batch`` examples runs: in pieces of ``size`` examples (``size == batch``: whole)."""

    size: int
    batch: int
    sequences_per_example: int  # rows the encoder runs per example (2: SimCSE's two dropout views)
    sequence_length: int
    bytes_per_token: int
    budget: int

    @property
    def split(self) -> bool:
        return self.size < self.batch

    @property
    def activation_mb(self) -> float:
        """The activations one piece is estimated to hold, in MB."""
        tokens = self.size * self.sequences_per_example * self.sequence_length
        return tokens * self.bytes_per_token / 2**20

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "activation_mb": round(self.activation_mb, 1)}


def choose_micro_batch(batch: int, sequence_length: int, config: Any, *, sequences_per_example: int = 1,
                       budget: int = ACTIVATION_BUDGET) -> MicroBatch:
    """The largest divisor of ``batch`` whose pieces' estimated activations fit ``budget`` (at least 1: a single
    example over the budget still runs). A divisor, so a step's pieces all hold as many examples (the trainer asks
    at each batch's own width: ``sequence_length`` is the tokens its rows are padded to)."""
    per_token = activation_bytes_per_token(config, sequence_length)
    per_example = per_token * sequence_length * max(1, sequences_per_example)
    size = 1
    for candidate in range(batch, 0, -1):
        if batch % candidate == 0 and candidate * per_example <= budget:
            size = candidate
            break
    return MicroBatch(size=size, batch=batch, sequences_per_example=max(1, sequences_per_example),
                      sequence_length=sequence_length, bytes_per_token=per_token, budget=budget)


def inference_bytes_per_token(config: Any, sequence_length: int) -> int:
    """The bytes one token holds at once while a BERT-like encoder runs without a graph: one layer's attention
    scores and probabilities (2 floats per head and key position) and about 4 hidden-wide and 2 feed-forward-wide
    vectors (nothing is kept for a backward pass, so one layer's worth is the peak)."""
    _, hidden, heads, intermediate = _shape(config)
    return heads * sequence_length * 2 * ELEMENT_BYTES + (4 * hidden + 2 * intermediate) * ELEMENT_BYTES


def inference_batch_size(requested: int, config: Any, sequence_length: int, *,
                         budget: int = ACTIVATION_BUDGET) -> int:
    """``requested``, or fewer sequences where ``requested`` of ``sequence_length`` tokens would hold more than
    ``budget`` at once or make one layer's attention scores larger than :data:`LARGEST_HEAP_TENSOR` (at least 1).
    Why: all-mpnet-base-v2 encoding 64 passages of 384 tokens holds 1.3 GB of attention scores alone, more than the
    rest of ``cselab adapt`` together, and every tensor over 32 MiB is mapped and zeroed afresh by the kernel each
    time (a scoring of the teacher took 22 million minor page faults so); a few passages a batch keep the matrix
    products big enough to run at full speed."""
    per_sequence = inference_bytes_per_token(config, sequence_length) * sequence_length
    heads = _shape(config)[2]
    scores = heads * sequence_length * sequence_length * ELEMENT_BYTES
    return max(1, min(int(requested), budget // max(1, per_sequence), LARGEST_HEAP_TENSOR // max(1, scores)))


def inference_batches(lengths: Sequence[int], batch_size: int, config: Any) -> Iterator[list[int]]:
    """The positions of texts of token ``lengths``, longest first (batches of similar length pad least), in
    batches of at most ``batch_size`` that each hold to :func:`inference_batch_size` at their own width (their
    longest text's, which the others pad to): short texts keep whole batches, long ones run a few at a time.
    ``config`` None (no transformer configuration known): batches of ``batch_size``. Every encoder's batching
    (torch's and an export's) is this, so what a caller asks for never sets the memory held.

    Why :data:`INFERENCE_BUDGET` is 32 MiB, far below the training step's: with encoding batches held to that
    step's budget, ``make demo``'s command peaked at 2,601 MB, set in the teacher's scoring, against 1,877 MB so
    (``python -m lab.speed.adapt_footprint --case demo``); the estimate counts one layer, and the heap keeps more."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    start = 0
    while start < len(order):
        width = lengths[order[start]]
        size = inference_batch_size(batch_size, config, width, budget=INFERENCE_BUDGET) \
            if config is not None and width else batch_size
        yield order[start : start + max(1, size)]
        start += max(1, size)
