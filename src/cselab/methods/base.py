"""The method contract: how a batch becomes views, embeddings and named, weighted loss terms.

A method is a short declaration over shared parts (encoders, poolers, loss functions). The trainer only
calls :meth:`Method.collate`, :meth:`Method.loss_terms` and :meth:`Method.inference_model`, so adding a
method never touches the training loop.

A method splits a step into :meth:`Method.embed` (the graph from tokens to this rank's embeddings) and
:meth:`Method.loss_from_embeddings` (the losses). Between the two the base class gathers every embedding over
the ranks of a distributed run (:meth:`Method.gather_embeddings`, the one place that does), so a method never
writes a gather and reads global batches; an embedding that must stay on its rank is named by
:meth:`Method.local_embeddings`. When the rows of :meth:`Method.embed` are aligned with the examples of the
batch, the same split is what gradient caching (``train.chunk_size``, :mod:`cselab.training.grad_cache`)
needs: embed the batch in chunks, take the full-batch loss on the cached embeddings, back-propagate chunk by
chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from cselab.config.run_config import RunConfig, validate
from cselab.errors import CselabError
from cselab.runtime.distributed import DistributedContext


class MethodOptions(BaseModel):
    """Options every method has; methods subclass this with their own fields."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.05, gt=0, description="tau; logits are cos / tau")
    loss_weights: dict[str, float] = Field(default_factory=dict, description="term -> weight; 0 switches a term off")


@dataclass
class StepContext:
    """What a training step may use besides the batch: the rank layout and the run's seeded generator."""

    dist: DistributedContext
    step: int
    generator: torch.Generator


class Method(nn.Module):
    """Base class. Subclasses set ``name``, ``terms`` and ``Options`` and implement the abstract parts."""

    name: ClassVar[str]
    terms: ClassVar[tuple[str, ...]]  # every loss term the method has (config reference); see terms_of
    Options: ClassVar[type[MethodOptions]] = MethodOptions
    # True: the method trains from two stage-1 encoders, which its config's ``method_options.pipeline`` block
    # describes and the two-stage pipeline (cselab.training.pipeline) trains first
    two_stage: ClassVar[bool] = False
    # True: the loss contrasts each example with the other examples of its batch (in-batch negatives), so a batch
    # of one has no negative (see needs_in_batch_negatives)
    in_batch_negatives: ClassVar[bool] = False
    # What `cselab reproduce` reads of a method (cselab.research.experiments.reproduce reads them through the registry:
    # METHODS.reproducible, METHODS.resolve). ``preset_dir`` and ``aliases`` are read from the class's own
    # declaration, never inherited: a subclass is another method, with presets of its own.
    # preset_dir: the folder of the method's presets (paper-bert-base, paper-roberta-base, cpu-minilm): a folder of
    # cselab's presets (``simcse_pp``) or, for a method from outside the package, a directory; None: not reproduced
    preset_dir: ClassVar[str | Path | None] = None
    aliases: ClassVar[tuple[str, ...]] = ()  # other spellings `cselab reproduce` takes (``simcse_pp``)
    views: ClassVar[int] = 2  # encoder forward passes per training sentence and step (the time estimate)
    template_tokens: ClassVar[int] = 0  # tokens a prompt template adds to each sentence (the time estimate)

    def __init__(self, config: RunConfig) -> None:
        super().__init__()
        self.config = config
        self.options = self.check_config(config)
        terms = self.terms_of(self.options)
        self.weights = {term: float(self.options.loss_weights.get(term, 1.0)) for term in terms}

    @classmethod
    def check_config(cls, config: RunConfig) -> MethodOptions:
        """The run's ``method_options`` validated (:meth:`parse_options`), its loss weights checked against the
        terms, and a batch of one refused where the method needs in-batch negatives; one-line errors. Loads
        nothing, so a command checks a configuration with it before anything is written."""
        options = cls.parse_options(config.method_options)
        terms = cls.terms_of(options)
        unknown = set(options.loss_weights) - set(terms)
        if unknown:
            raise CselabError(
                f"config: method {cls.name!r} has no loss term {sorted(unknown)[0]!r}; terms: {', '.join(terms)}"
            )
        if not any(float(options.loss_weights.get(term, 1.0)) for term in terms):
            raise CselabError(f"config: every loss term of {cls.name!r} has weight 0; nothing to train")
        if config.train.batch_size < 2 and cls.needs_in_batch_negatives(options):
            raise CselabError(
                f"config: train.batch_size={config.train.batch_size}: {cls.name} contrasts each sentence with the "
                "other sentences of its batch (in-batch negatives), so a batch of one has no negative and nothing "
                "to learn from; give train.batch_size=2 or more"
            )
        return options

    @classmethod
    def needs_in_batch_negatives(cls, options: MethodOptions) -> bool:
        """Whether a run with ``options`` needs in-batch negatives (:attr:`in_batch_negatives` unless an option
        chooses: distillation's contrastive term)."""
        return cls.in_batch_negatives

    @classmethod
    def parse_options(cls, method_options: dict[str, Any]) -> MethodOptions:
        """The config's ``method_options`` validated into this method's :attr:`Options` (one-line errors)."""
        return validate(cls.Options, method_options, prefix="method_options.")

    @classmethod
    def terms_of(cls, options: MethodOptions) -> tuple[str, ...]:
        """The loss terms a run with ``options`` computes and weighs: all of :attr:`terms` unless an option
        chooses between them (distillation's ``target``), so ablations never make a variant of a term not run."""
        return cls.terms

    @property
    def length_grouping(self) -> bool:
        """Whether batches may be grouped by sentence length (``train.length_group_window``); a method that
        builds its batches by meaning says no."""
        return True

    def example_lengths(self, examples: Sequence[Any]) -> list[int]:
        """The length of each training example that length grouping sorts by: its token count where the method
        has one encoder (``self.encoder``), else its characters (examples that are sentences)."""
        encoder = getattr(self, "encoder", None)
        if encoder is None:
            return character_lengths(examples)
        return [len(row) for row in encoder.token_rows(list(examples), self.config.model.max_length)]

    def active(self, term: str) -> bool:
        """Whether ``term`` is switched on (weight != 0); inactive terms are not computed at all."""
        return self.weights[term] != 0.0

    # -- to implement --------------------------------------------------------------------------------
    def training_examples(self) -> Sequence[Any]:
        """The training examples (sentences by default)."""
        from cselab.data.text.training_data import load_training_sentences

        return load_training_sentences(self.config.data)

    def collate(self, examples: Sequence[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def loss_terms(self, batch: dict[str, Any], ctx: StepContext) -> dict[str, Tensor]:
        """Unweighted values of the ACTIVE terms (float32 scalars)."""
        return self.loss_from_local(self.embed(batch), ctx)

    def loss_from_local(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        """The terms from this rank's :meth:`embed` output: gathered over ranks, then the losses."""
        return self.loss_from_embeddings(self.gather_embeddings(embeddings, ctx), ctx)

    def gather_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        """Every embedding concatenated over ranks (rank order; only the local rows carry gradient), except
        those :meth:`local_embeddings` names. The identity in a single process."""
        local = self.local_embeddings()
        return {name: value if name in local else ctx.dist.gather(value) for name, value in embeddings.items()}

    def local_embeddings(self) -> frozenset[str]:
        """Names of :meth:`embed` outputs that stay on their rank (none by default)."""
        return frozenset()

    # -- the embed / loss split (gradient caching) ----------------------------------------------------
    @property
    def supports_gradient_cache(self) -> bool:
        """Whether the method implements :meth:`embed` and :meth:`loss_from_embeddings`."""
        return type(self).embed is not Method.embed

    @property
    def loss_is_example_mean(self) -> bool:
        """Whether every active term is a mean over the batch's rows of a value of that row alone (and the weights),
        so the batch's gradient is the sum of its pieces' gradients, each weighted by its share of the rows
        (gradient accumulation, :meth:`~cselab.training.trainer.Trainer.compute_gradients`). A loss that couples
        the batch (in-batch negatives, batch statistics) says False: it needs gradient caching to run in pieces."""
        return False

    @property
    def rows_per_example(self) -> int:
        """How many sequences the encoder runs for one training example: what a piece of the batch costs in
        activations (:mod:`cselab.runtime.memory`). The method's :attr:`views` unless its options change it."""
        return int(self.views)

    def embed(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        """The LOCAL tensors the loss reads, each ``[rows of batch, ...]`` with row i from example i (so a
        batch split in chunks gives the same rows, concatenated). Tensors that must not carry gradient into
        the encoder are returned detached."""
        raise NotImplementedError

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        """The active terms from :meth:`embed`'s output of the whole batch, already gathered over ranks."""
        raise NotImplementedError

    def batch_width(self, batch: dict[str, Any]) -> int | None:
        """The tokens a row of the collated ``batch`` runs at: its widest token-id tensor's last dimension (what a
        piece of it costs in activations, :mod:`cselab.runtime.memory`); None where it holds none."""
        widths = [int(v.shape[-1]) for k, v in batch.items() if k.endswith("input_ids") and isinstance(v, Tensor)]
        return max(widths, default=None)

    def split_batch(self, batch: dict[str, Any], size: int) -> list[dict[str, Any]]:
        """``batch`` cut into consecutive chunks of ``size`` examples (tensors by rows, lists by items)."""
        rows = len(next(iter(batch.values())))
        return [{k: v[start : start + size] for k, v in batch.items()} for start in range(0, rows, size)]

    def forward(self, batch: dict[str, Any], ctx: StepContext | None = None) -> dict[str, Tensor]:
        """What the data-parallel wrapper calls: the loss terms, or without a context the embeddings."""
        return self.embed(batch) if ctx is None else self.loss_terms(batch, ctx)

    def inference_model(self) -> nn.Module:
        """The sentence model that is evaluated and saved (encoder, twin, ...)."""
        raise NotImplementedError

    # -- optional hooks ------------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Tensor]:
        """Non-parameter state to resume exactly (e.g. a memory queue)."""
        return {}

    def load_extra_state(self, state: dict[str, Tensor]) -> None:
        if state:
            raise CselabError(f"method {self.name!r} has no extra state to load")

    def after_step(self) -> None:
        """Called after each optimizer step (e.g. to push this step's anchors into a memory queue)."""

    def weighted_loss(self, values: dict[str, Tensor]) -> Tensor:
        return sum(self.weights[name] * value for name, value in values.items())


def character_lengths(examples: Sequence[Any]) -> list[int]:
    """Each example's length in characters (examples that are sentences)."""
    if not all(isinstance(e, str) for e in examples):
        raise CselabError("train.length_group_window needs a method whose training examples are sentences")
    return [len(e) for e in examples]


class _MethodRegistry:
    def __init__(self) -> None:
        self._methods: dict[str, type[Method]] = {}

    def register(self, cls: type[Method]) -> type[Method]:
        self._methods[cls.name] = cls
        return cls

    def get(self, name: str) -> type[Method]:
        if name not in self._methods:
            raise CselabError(f"unknown method {name!r}; choose one of: {', '.join(sorted(self._methods))}")
        return self._methods[name]

    def names(self) -> list[str]:
        return sorted(self._methods)

    def reproducible(self) -> dict[str, type[Method]]:
        """The methods that declare a preset folder (``preset_dir``), which `cselab reproduce` trains, by name."""
        return {name: cls for name, cls in sorted(self._methods.items()) if vars(cls).get("preset_dir") is not None}

    def resolve(self, name: str) -> type[Method] | None:
        """The reproducible method named ``name`` or one of its ``aliases`` (case and spaces aside), or None."""
        wanted = name.strip().lower()
        for method, cls in self.reproducible().items():
            if wanted == method or wanted in vars(cls).get("aliases", ()):
                return cls
        return None


METHODS = _MethodRegistry()
register_method = METHODS.register


def build_method(config: RunConfig) -> Method:
    return METHODS.get(config.method)(config)


