"""The one training loop: precision, data parallelism, optimisation, evaluation, checkpoints, resume.

It knows nothing about methods beyond :class:`~cselab.methods.base.Method`'s contract.
"""

from __future__ import annotations

import collections
import contextlib
import math
import random
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from cselab.config.run_config import RunConfig
from cselab.data.stores.jsonl import append_jsonl
from cselab.errors import CselabError, RunInterrupted, UsageError
from cselab.fileio import write_json_atomic
from cselab.models.dropout import use_dropout_masks
from cselab.models.encoder import check_length
from cselab.models.sentence_model import save_model
from cselab.provenance import code_version
from cselab.reporter import QUIET, report, reporting
from cselab.runtime.devices import pick_device
from cselab.runtime.distributed import DistributedContext, init_distributed
from cselab.runtime.memory import ActivationBudget, choose_micro_batch
from cselab.runtime.precision import (
    PRECISION_FILE,
    PrecisionChoice,
    autocast_context,
    backbone_config_of,
    resolve_precision,
    training_shape,
)
from cselab.training import run_directory as rundir
from cselab.training.checkpoint import TrainerState, load_state, save_state
from cselab.training.grad_cache import cached_step
from cselab.training.kept_gradient import keep_lookup_gradients
from cselab.training.length_grouping import generator_seed, group_window
from cselab.training.run_directory import BEST_DIR, LAST_DIR, OpenedRun, RunDirectory, state_dir


@dataclass
class TrainResult:
    output_dir: str
    steps: int
    best_step: int | None
    best_dev: float | None
    dev_at_start: float | None
    wall_s: float
    train_sentences_per_s: float
    peak_mem_mb: float
    precision: str = ""  # what the run used (``auto`` resolved); empty in summaries written before it existed


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    torch.manual_seed(seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The data order of an epoch: a permutation fixed by (seed, epoch), so resuming replays it exactly.

    int32 halves its memory at 10M sentences; torch draws the same permutation for int32 and int64.
    """
    g = torch.Generator()
    g.manual_seed(generator_seed(seed * 1_000_003 + epoch))
    return torch.randperm(n, generator=g, dtype=torch.int32 if n < 2**31 else torch.int64)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a no-op on the CPU, where every op has already run)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_scheduler(optimizer: torch.optim.Optimizer, kind: str, total: int, warmup: int) -> Any:
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def build_optimizer(params: list[torch.nn.Parameter], tc: Any) -> torch.optim.Optimizer:
    """AdamW; ``train.fused_adamw`` updates every tensor in one fused kernel instead of a per-tensor loop.

    Both compute the same update up to float rounding (tests/test_speed_levers.py); the switch exists to
    reproduce rows recorded with the per-tensor loop bit for bit.
    """
    return torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay, fused=bool(tc.fused_adamw) or None)


class Trainer:
    """Trains ``method`` as ``config`` says; :meth:`run` returns a :class:`TrainResult`."""

    def __init__(self, config: RunConfig, method: Any = None, *, selector: Any = None,
                 observer: Callable[[torch.nn.Module, int], dict[str, float]] | None = None,
                 observe_every: int | None = None,
                 activation_budget: ActivationBudget | int | None = None) -> None:
        """``selector`` scores a step for selection (default: STS dev of ``train.dev_task``). ``observer`` only
        watches: ``observer(inference_model, step)`` is called at step 0 and every ``observe_every`` steps (default
        ``train.eval_every``) and at the last step, in eval mode and without autocast; what it returns is logged in
        ``metrics.jsonl`` as ``{"step": ..., "observed": {...}}``. It never selects anything (a study of selection
        criteria records them this way).

        ``activation_budget`` (an :class:`~cselab.runtime.memory.ActivationBudget`, which ``cselab adapt`` gives at
        its defaults, or bytes for both ways) runs each step's batch in the largest pieces whose activations fit it
        at the batch's own width
        (:attr:`micro_batch` is the widest case, ``model.max_length``; :meth:`_piece_size`), with the same
        gradient: accumulated over the pieces where the method's loss is a mean over examples, cached where it
        couples the batch. ``None`` (``cselab train``) runs the batch whole unless ``train.chunk_size`` says.

        What the run does is said, and its bar shown, through the reporter in effect (:mod:`cselab.reporter`); the
        ranks of a distributed run other than the main one say nothing and show no bar."""
        from cselab.methods import build_method

        self.config = config
        tc = config.train
        if tc.threads:
            torch.set_num_threads(tc.threads)
        self.device = pick_device(tc.device)
        if tc.precision != "auto":
            autocast_context(tc.precision, self.device)  # refuses fp16 on a CPU now, not after the first save
        self.dist: DistributedContext = init_distributed(self.device)
        if tc.batch_size % self.dist.world_size:
            raise CselabError(f"batch_size {tc.batch_size} is not divisible by the {self.dist.world_size} ranks")
        self.local_batch = tc.batch_size // self.dist.world_size
        self.generator = seed_everything(tc.seed)
        # the method reads its training text (and a teacher its pass) as it is built: the main rank tells the user
        with self._rank_reporting():
            self.method = method if method is not None else build_method(config)
        use_dropout_masks(self.method, config.model.dropout_masks)
        self.method.to(self.device)
        check_length(self.method, config.model.max_length, "model.max_length")
        if tc.chunk_size and not self.method.supports_gradient_cache:
            raise CselabError(f"train.chunk_size: method {self.method.name!r} has no embed/loss split for "
                              "gradient caching; leave train.chunk_size unset")
        # what the step runs forward through: the method, or DDP around it (rank 0's weights on every rank)
        self.engine = self.dist.wrap(self.method)
        # a word-embedding table's gradient is added into one kept tensor, not mapped afresh by every backward pass
        # (a CPU in one process: DDP needs autograd's own accumulation)
        self.kept_gradients = (keep_lookup_gradients(self.method)
                               if self.device.type == "cpu" and self.dist.world_size == 1 else None)
        with self._rank_reporting():
            self.examples = self.method.training_examples()
        self._order: tuple[int, torch.Tensor] | None = None  # (epoch, its permutation), computed once per epoch
        self.steps_per_epoch = len(self.examples) // tc.batch_size
        if self.steps_per_epoch == 0:
            raise CselabError(f"the corpus has {len(self.examples)} examples, fewer than one batch of {tc.batch_size}")
        self.total_steps = tc.max_steps or tc.epochs * self.steps_per_epoch
        self.precision_choice = self._choose_precision()
        self.precision = self.precision_choice.precision
        self.micro_batch, self.micro_batch_way = self._choose_micro_batch(activation_budget)
        self._piece_by_width: dict[int, int] = {}  # a batch's padded width -> the examples a piece of it holds
        self.pieces_run: collections.Counter[int] = collections.Counter()  # piece size -> batches run in it
        self.optimizer = build_optimizer([p for p in self.method.parameters() if p.requires_grad], tc)
        warmup = int(tc.warmup_ratio * self.total_steps)
        self.scheduler = make_scheduler(self.optimizer, tc.scheduler, self.total_steps, warmup)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.output_dir = Path(tc.output_dir)
        self.state = TrainerState()
        # what selects the best step: STS dev of train.dev_task, unless the caller gives another scorer with the
        # same interface (cselab adapt: agreement with a teacher on held-out text)
        self._evaluator = selector
        self._selector_given = selector is not None
        if observe_every is not None and observe_every < 1:
            raise CselabError(f"observe_every must be at least 1, got {observe_every}")
        self._observer = observer
        self._observe_every = observe_every or tc.eval_every
        self._grouped: tuple[tuple[int, int], torch.Tensor] | None = None
        self._writer = None
        self._saved_step: int | None = None  # step of the state in last/ (for the interrupt message)
        self._wall_before = 0.0  # wall seconds of the processes that ran this run before this one
        self._started = time.perf_counter()

    def _choose_micro_batch(self, budget: ActivationBudget | int | None) -> tuple[Any, str]:
        """The pieces a step runs its local batch in (a :class:`~cselab.runtime.memory.MicroBatch`, or None) and how
        their gradients make the batch's: ``whole``, ``accumulate`` (a loss that is a mean over examples: forward and
        backward piece by piece, each piece's loss weighted by its share) or ``gradient-cache`` (a loss that couples
        the batch: :mod:`cselab.training.grad_cache`), each way at its own budget. ``train.chunk_size`` where set is
        the run's own choice."""
        if self.config.train.chunk_size or budget is None:
            return None, "gradient-cache" if self.config.train.chunk_size else "whole"
        config = backbone_config_of(self.method)
        if config is None:
            return None, "whole"
        if not isinstance(budget, ActivationBudget):
            budget = ActivationBudget.uniform(budget)
        if self.method.loss_is_example_mean:
            way = "accumulate"
        elif self.method.supports_gradient_cache:
            way = "gradient-cache"
        else:
            way = "whole"  # no exact way to cut this method's batch: it runs whole, over the budget
        chosen = choose_micro_batch(self.local_batch, self.config.model.max_length, config,
                                    sequences_per_example=self.method.rows_per_example, budget=budget.of(way))
        return chosen, way if chosen.split else "whole"

    def resize_pieces(self, budget: int) -> None:
        """Size the pieces of the steps from now on to an activation ``budget`` (bytes), the way of cutting the batch
        kept (accumulated or gradient-cached: :meth:`_choose_micro_batch`) and the piece counts started afresh. For
        timing one trainer's steps at several budgets side by side (``python -m lab.speed.demo_steps``)."""
        import dataclasses

        if self.micro_batch is None:
            raise CselabError("this trainer runs its batches whole: build it with an activation budget to size pieces")
        self.micro_batch = dataclasses.replace(self.micro_batch, budget=int(budget))
        self._piece_by_width.clear()
        self.pieces_run = collections.Counter()

    def micro_batch_facts(self) -> dict[str, Any]:
        """What :attr:`micro_batch` and :attr:`micro_batch_way` say, for a run's record (``adapt.json``)."""
        facts: dict[str, Any] = {"way": self.micro_batch_way, "batch": self.local_batch}
        if self.micro_batch is not None:
            facts.update(self.micro_batch.to_dict())
            if self.micro_batch_way == "whole":
                facts["size"] = self.local_batch
            if self.pieces_run:  # the sizes each batch ran in, at its own width (:meth:`_piece_size`)
                facts["pieces_run"] = {str(size): n for size, n in sorted(self.pieces_run.items())}
        elif self.config.train.chunk_size:
            facts["size"] = self.config.train.chunk_size
        return facts

    def _rank_reporting(self) -> contextlib.AbstractContextManager[Any]:
        """The reporter in effect on the main rank; the other ranks of a distributed run say nothing, no bar."""
        return contextlib.nullcontext() if self.dist.is_main else reporting(QUIET)

    def _choose_precision(self) -> PrecisionChoice:
        """``train.precision`` with ``auto`` resolved by a matmul probe at this run's shapes (both views)."""
        return resolve_precision(self.config.train.precision, self.device,
                                 training_shape(backbone_config_of(self.method), self.local_batch,
                                                self.config.model.max_length))

    # -- evaluation -----------------------------------------------------------------------------------
    @property
    def evaluator(self) -> Any:
        if self._evaluator is None:
            from cselab.evaluation.sts_evaluator import StsEvaluator

            task = self.config.train.dev_task
            self._evaluator = StsEvaluator.from_names(
                [task], splits=("dev",), batch_size=self.config.train.eval_batch_size, primary=f"{task}/dev"
            )
        return self._evaluator

    def _selection_name(self) -> str:
        primary = getattr(self.evaluator, "primary", None)
        default = f"{self.config.train.dev_task}/dev"
        return self.config.train.dev_task if primary in (None, default) else str(primary)

    def evaluate_dev(self) -> float:
        """STS dev score of the inference model (model selection never looks at test data)."""
        model = self.method.inference_model()
        # no bar of its own: the training's bar is the one that runs
        with autocast_context(self.precision, self.device), reporting(report().with_bars(False)):
            result = self.evaluator(model)
        return self.evaluator.primary_score(result)

    # -- bookkeeping ----------------------------------------------------------------------------------
    def _log(self, record: dict[str, Any]) -> None:
        if not self.dist.is_main:
            return
        append_jsonl(self.output_dir / "metrics.jsonl", record)
        if self._writer is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self._writer.add_scalar(key, value, record["step"])

    def _save_best(self, score: float) -> None:
        meta = {"training": {"method": self.config.method, "step": self.state.step, "dev_task": self._selection_name(),
                             "dev_score": score, "config": self.config.model_dump(mode="json")}}
        save_model(self.method.inference_model(), self.output_dir / BEST_DIR, extra=meta)

    def _save_last(self) -> None:
        self.state.wall_seconds = self._wall_before + time.perf_counter() - self._started
        save_state(
            state_dir(self.output_dir, self.dist.rank),
            method=self.method,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            state=self.state,
            generator=self.generator,
            extra=self.method.extra_state(),
            rank=self.dist.rank,
        )
        self._saved_step = self.state.step

    def _eval_and_select(self) -> float:
        score = self.evaluate_dev() if self.dist.is_main else 0.0
        improved = self.dist.broadcast_flag(self.state.best_score is None or score > self.state.best_score)
        if self.dist.is_main:
            if improved:
                self.state.best_score, self.state.best_step = score, self.state.step
                self._save_best(score)
            self.state.history.append({"step": self.state.step, "dev": score})
            self._log({"step": self.state.step, "dev": score, "best_dev": self.state.best_score})
        return score

    def _observe(self) -> None:
        if self._observer is None or not self.dist.is_main:
            return
        was_training = self.method.training
        self.method.eval()
        with torch.no_grad(), reporting(report().with_bars(False)):
            values = self._observer(self.method.inference_model(), self.state.step)
        self.method.train(was_training)
        self._log({"step": self.state.step, "observed": {k: float(v) for k, v in (values or {}).items()}})

    def _start(self, opened: OpenedRun) -> None:
        """Start the run in the directory ``opened`` (:meth:`OpenedRun.start` decides fresh, resumed or
        overwritten): load the saved state it names, cut the metrics log back to it, write the configuration."""
        if opened.path != self.output_dir:
            raise ValueError(f"the run directory opened is {opened.path}, but this run writes {self.output_dir}")
        out = self.output_dir
        start = opened.start(rank=self.dist.rank)
        if start.state_dir is not None:
            self.state, extra = load_state(
                start.state_dir, method=self.method, optimizer=self.optimizer, scheduler=self.scheduler,
                generator=self.generator, rank=self.dist.rank,
            )
            if self.state.step > self.total_steps:  # an allowed change that ends the run before where it is
                changed = ", ".join(f"{k}={v[1]}" for k, v in start.changes.items()
                                    if k in ("train.max_steps", "train.epochs"))
                raise UsageError(f"--resume: the saved state of {out} is at step {self.state.step}, but "
                                 f"{changed or 'the configuration'} ends the run at step {self.total_steps}; "
                                 f"a run cannot end before its saved step (give at least {self.state.step} steps)")
            self.method.load_extra_state(extra)
            self._saved_step, self._wall_before = self.state.step, self.state.wall_seconds
            if self.dist.is_main:
                rundir.truncate_metrics(out, self.state.step)
                if start.changes:  # the log says from which step the allowed changes apply
                    self._log({"step": self.state.step,
                               "config_change": {k: list(v) for k, v in start.changes.items()}})
        if self.dist.is_main:
            rundir.write_config(out, self.config)  # what runs from here (allowed changes included)
            if self.config.train.tensorboard:
                try:
                    from torch.utils.tensorboard import SummaryWriter
                except ImportError as exc:
                    raise CselabError("train.tensorboard needs the tensorboard package "
                                      "(pip install tensorboard)") from exc
                self._writer = SummaryWriter(str(out / "tensorboard"))

    def _interrupted(self) -> RunInterrupted:
        if self._saved_step is None:
            kept = "nothing was saved yet; start it again with --overwrite (or choose another train.output_dir)"
        else:
            kept = (f"the state of step {self._saved_step} is kept in {self.output_dir / LAST_DIR}; "
                    "continue with the same command plus --resume")
        return RunInterrupted(f"interrupted at step {self.state.step}: {kept}")

    # -- the loop -------------------------------------------------------------------------------------
    def train_step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """One optimisation step; returns the detached loss and terms as tensors (no host sync here)."""
        values = self.compute_gradients(batch)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.config.train.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.method.parameters(), self.config.train.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.method.after_step()
        return values

    def compute_gradients(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Forward and backward of the local batch: afterwards every rank's ``.grad`` holds the single-process
        gradient of the GLOBAL batch (times the fp16 loss scale). Returns the detached loss and terms."""
        ctx = self._context()
        precision = self.precision  # train.precision with auto resolved
        chunk = self.config.train.chunk_size
        if not chunk and self.micro_batch is not None and self.micro_batch_way == "gradient-cache":
            chunk = self._piece_size(batch)
        if self.micro_batch is not None and self.micro_batch_way == "accumulate":
            loss, terms = self._accumulated(batch, self._piece_size(batch), ctx)
        elif chunk and chunk < self.local_batch:
            loss, terms = cached_step(
                self.method, self.engine, self.method.split_batch(batch, chunk),
                lambda embeddings: self._weighted(self.method.loss_from_local(embeddings, ctx)),
                self._backward, device=self.device, autocast=lambda: autocast_context(precision, self.device),
            )
        else:
            with autocast_context(precision, self.device):
                loss, terms = self._weighted(self.engine(batch, ctx))
            self._backward(loss)
        return {"loss": loss.detach(), **{k: v.detach() for k, v in terms.items()}}

    def _piece_size(self, batch: dict[str, Any]) -> int:
        """The examples a piece of ``batch`` holds: the micro-batch at the batch's own padded width, not at
        ``model.max_length`` (:attr:`micro_batch`, the widest case). Why: the same budget bounds both, and short
        lines in pieces sized for 256-token passages run small, slow matrix products (``python -m
        lab.speed.demo_steps`` times the demo's steps so). The choice depends on the batch alone, so a run makes
        the same one each time."""
        assert self.micro_batch is not None
        width = self.method.batch_width(batch) or self.micro_batch.sequence_length
        if width not in self._piece_by_width:
            self._piece_by_width[width] = choose_micro_batch(
                self.local_batch, width, backbone_config_of(self.method),
                sequences_per_example=self.micro_batch.sequences_per_example, budget=self.micro_batch.budget).size
        size = self._piece_by_width[width]
        self.pieces_run[size] += 1
        return size

    def _accumulated(self, batch: dict[str, Any], size: int, ctx: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward and backward of ``batch`` in pieces of ``size`` examples, each piece's loss weighted by its share
        of the rows: for a loss that is a mean over examples the gradients add up to the whole batch's (up to the
        order of the float sums). Data parallelism reduces the gradients with the last piece only. Why pieces: the
        activations of one piece, not of the batch, are held at once (:mod:`cselab.runtime.memory`)."""
        pieces = self.method.split_batch(batch, size)
        rows = sum(len(next(iter(piece.values()))) for piece in pieces)
        loss = torch.zeros(())
        terms: dict[str, torch.Tensor] = {}
        for k, piece in enumerate(pieces):
            share = len(next(iter(piece.values()))) / rows
            last = k == len(pieces) - 1
            sync = contextlib.nullcontext() if last or not hasattr(self.engine, "no_sync") else self.engine.no_sync()
            with sync:
                with autocast_context(self.precision, self.device):
                    piece_loss, piece_terms = self._weighted(self.engine(piece, ctx))
                self._backward(piece_loss * share)
            loss = loss.to(piece_loss.device) + piece_loss.detach() * share
            for name, value in piece_terms.items():
                terms[name] = terms.get(name, 0.0) + value.detach().float() * share
        return loss, terms

    def _weighted(self, terms: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.method.weighted_loss({k: v.float() for k, v in terms.items()}), terms

    def _backward(self, loss: torch.Tensor) -> None:
        # DDP averages the ranks' gradients; the scale turns that average into the sum (distributed.py)
        scaled = loss * self.dist.gradient_scale if self.dist.enabled else loss
        (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()

    def _context(self) -> Any:
        from cselab.methods.base import StepContext

        return StepContext(dist=self.dist, step=self.state.step, generator=self.generator)

    def epoch_permutation(self, epoch: int) -> torch.Tensor:
        """The permutation of ``epoch``, computed at its first step and kept (not redrawn every step)."""
        if self._order is None or self._order[0] != epoch:
            self._order = None  # let the previous epoch's permutation go before drawing the next
            self._order = (epoch, epoch_order(len(self.examples), self.config.train.seed, epoch))
        return self._order[1]

    def batch_at(self, step: int) -> dict[str, Any]:
        """The local batch of ``step``: a slice of the epoch's fixed permutation (this rank's share)."""
        epoch, position = divmod(step, self.steps_per_epoch)
        order = self.epoch_permutation(epoch)
        if self.config.train.length_group_window and self.method.length_grouping:
            order = self._grouped_order(order, epoch, position)
        start = position * self.config.train.batch_size + self.dist.rank * self.local_batch
        indices = order[start : start + self.local_batch].tolist()
        batch = self.method.collate([self.examples[i] for i in indices])
        return {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def _grouped_order(self, order: torch.Tensor, epoch: int, position: int) -> torch.Tensor:
        """The epoch order with this step's window length-grouped (computed once per window)."""
        tc = self.config.train
        key = (epoch, position // tc.length_group_window)
        if self._grouped is None or self._grouped[0] != key:
            grouped = group_window(order, self.examples, position=position, batch_size=tc.batch_size,
                                   window=tc.length_group_window, seed=tc.seed, epoch=epoch,
                                   measure=self.method.example_lengths)
            self._grouped = (key, grouped)
        return self._grouped[1]

    def run(self, *, resume: bool = False, overwrite: bool = False, allow_change: tuple[str, ...] = (),
            opened: OpenedRun | None = None) -> TrainResult:
        """Train to the end; ``resume`` continues the saved state, ``overwrite`` starts an unfinished run again,
        ``allow_change`` names the :data:`~.run_directory.CHANGEABLE_KEYS` that may differ on resume. The run
        directory is opened with these options here, unless a caller opened it already and gives it as
        ``opened`` (:meth:`RunDirectory.open`; then its options are the run's and these are not given)."""
        if opened is not None and (resume or overwrite or allow_change):
            raise ValueError("the options of an opened run are the ones it was opened with; give them to "
                             "RunDirectory.open, not to run()")
        try:
            if self.dist.is_main:
                code_version()  # what the run's records will name, read as it starts
                _ = self.evaluator  # the dev data is read (or its absence reported) before anything is written
            with contextlib.ExitStack() as stack:
                stack.enter_context(self._rank_reporting())
                if opened is None:
                    opened = stack.enter_context(RunDirectory.open(
                        self.config, resume=resume, overwrite=overwrite, allow_change=allow_change))
                stack.callback(self._close_writer)  # before the directory is let go
                self._start(opened)
                return self._loop()
        except KeyboardInterrupt:
            raise self._interrupted() from None

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _loop(self) -> TrainResult:
        tc = self.config.train
        if self.dist.is_main:
            write_json_atomic(self.output_dir / PRECISION_FILE, self.precision_choice.to_dict())
        save_every = tc.save_every or tc.eval_every
        self._started = time.perf_counter()
        dev_at_start = None
        if self.state.step == 0 and tc.eval_at_start and not self.state.history:
            dev_at_start = self._eval_and_select()
        if self.state.step == 0:
            self._observe()
        elif self.state.history:
            dev_at_start = self.state.history[0]["dev"] if self.state.history[0]["step"] == 0 else None
        bar = report().bar(total=self.total_steps, initial=self.state.step, desc=f"train {self.config.method}",
                           unit="step")
        window_start, window_sentences = time.perf_counter(), 0
        self.method.train()
        # training time is counted per segment between evaluations/saves, closed after a device sync: on a GPU
        # a step only queues kernels, so timing each step on the host would miss most of its work
        segment_start = time.perf_counter()
        while self.state.step < self.total_steps:
            step_values = self.train_step(self.batch_at(self.state.step))
            self.state.step += 1
            self.state.sentences_seen += tc.batch_size
            window_sentences += tc.batch_size
            if self.state.step % tc.log_every == 0 or self.state.step == self.total_steps:
                # values are read on the host only here, so a GPU step never waits for logging
                values = {k: float(v) for k, v in step_values.items()}
                if not math.isfinite(values["loss"]):
                    raise CselabError(f"loss became {values['loss']} by step {self.state.step}; "
                                      "lower train.lr or use fp32")
                rate = window_sentences / max(1e-9, time.perf_counter() - window_start)
                self._log({"step": self.state.step, "lr": self.scheduler.get_last_lr()[0], "sent_per_s": rate,
                           **values})
                window_start, window_sentences = time.perf_counter(), 0
                # the best dev score only where a dev set selects (cselab adapt's held-out selection has none)
                shown = {"examples_s": f"{rate:.0f}"} if self._selector_given else {
                    "sent_s": f"{rate:.0f}",
                    "best_dev": f"{self.state.best_score:.4g}" if self.state.best_score is not None else "-"}
                bar.set_postfix(loss=f"{values['loss']:.4f}", **shown)
            bar.update(1)
            evaluate = self.state.step % tc.eval_every == 0 or self.state.step == self.total_steps
            save = self.state.step % save_every == 0 or self.state.step == self.total_steps
            observe = self._observer is not None and (self.state.step % self._observe_every == 0
                                                      or self.state.step == self.total_steps)
            if evaluate or save or observe:
                synchronize(self.device)
                self.state.train_seconds += time.perf_counter() - segment_start
                if evaluate:
                    self.method.eval()
                    self._eval_and_select()
                    self.method.train()
                if observe:
                    self._observe()
                if save:
                    self._save_last()
                segment_start = time.perf_counter()
        bar.close()
        self.dist.barrier()
        result = TrainResult(
            output_dir=str(self.output_dir),
            steps=self.state.step,
            best_step=self.state.best_step,
            best_dev=self.state.best_score,
            dev_at_start=dev_at_start,
            wall_s=self._wall_before + time.perf_counter() - self._started,
            train_sentences_per_s=self.state.sentences_seen / max(1e-9, self.state.train_seconds),
            peak_mem_mb=peak_memory_mb(self.device),
            precision=self.precision,
        )
        if self.dist.is_main:
            write_json_atomic(self.output_dir / rundir.SUMMARY_FILE, asdict(result))
        return result

