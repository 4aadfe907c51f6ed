"""The output directory of one training run: who may write it, how it is opened (fresh, resumed, overwritten)
and how its books are kept straight after a kill. :class:`RunDirectory` is the one owner that the CLI, the
Python API, the recorded runs and the trainer all open a run directory through: ``with RunDirectory.open(config,
resume=..., overwrite=..., allow_change=...) as run:`` checks the options (here, once), holds the lock until the
block ends, and :meth:`OpenedRun.start` decides how the run starts. The outermost layer opens the run and hands
it down (the CLI before torch loads, else :func:`cselab.training.runs.train_and_record`, else the trainer).

* Only cselab's: a directory is new (or empty), a cselab run (it holds :data:`RUN_MARKER`), or refused, so a
  user's own files are never replaced, ``--overwrite`` included; files that look like a run's are not enough.
* One writer: the run holds :class:`cselab.fileio.DirectoryLock` on the directory from start to record, so a
  second ``cselab train`` into it is refused at once instead of mixing two runs' files.
* After a kill: a checkpoint swap cut between its renames is undone (:func:`cselab.fileio.recover_directory`),
  ``metrics.jsonl`` is cut back to the resumed step (the lines after it are written again).
* ``--resume`` continues the run that is recorded, so a changed configuration is refused with the keys that
  differ; the few keys that do not change what the saved steps did may be changed with ``--allow-change``
  and are then recorded (``config.yaml`` always says what ran).
* ``--overwrite`` starts a directory again, unless it holds a finished run (that is a result; delete it yourself).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# RUNTIME_KEYS: settings that change neither the maths nor the data; they may differ on --resume without a word
from cselab.config.run_config import RUNTIME_KEYS, RunConfig, dump_config, flatten_config, load_config
from cselab.data.stores.jsonl import read_log
from cselab.errors import CselabError, UsageError, refuse_both
from cselab.fileio import LOCK_FILE, DirectoryLock, recover_directory, write_atomic
from cselab.reporter import report
from cselab.runtime.launch import is_main_process

CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, RESULTS_FILE = "config.yaml", "metrics.jsonl", "summary.json", "results.json"
BEST_DIR, LAST_DIR = "best", "last"  # the selected model, and the state a --resume continues from
STAGE1_DIR, STAGE2_DIR = "stage1", "stage2"  # a two-stage run's stages (cselab.training.pipeline)
# settings that only move where the run stops or what it looks at in between: --allow-change KEY permits them
# (with a linear schedule a new max_steps also bends the rest of the learning-rate ramp; that is what is asked)
CHANGEABLE_KEYS = ("train.max_steps", "train.epochs", "train.eval_every", "train.save_every")
_RUN_FILES = (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, RESULTS_FILE)
RUN_MARKER = ".cselab-run"  # written when a run first opens its directory: the directory is cselab's


def selected_model_dir(run_dir: str | Path) -> Path:
    """Where a finished run keeps its selected model: ``stage2/best`` for a two-stage run (TNCSE, JTCSE), whose
    directory holds the stages, else ``best``."""
    staged = Path(run_dir) / STAGE2_DIR / BEST_DIR
    return staged if staged.is_dir() else Path(run_dir) / BEST_DIR


def state_dir(run_dir: str | Path, rank: int = 0) -> Path:
    """Where a rank saves the state a ``--resume`` continues from: ``last`` (rank 0), ``last-rank<R>``."""
    return Path(run_dir) / (LAST_DIR if rank == 0 else f"{LAST_DIR}-rank{rank}")


class RunDirectory:
    """The owner of one run directory: its writer lock (taken by the main process only, nesting), the check
    that it is cselab's to write, and the recovery of a checkpoint swap that a kill cut short.

    ``with RunDirectory(path):`` holds it; a training run opens it with :meth:`open`, which checks the run's
    options too. The lock nests: an inner layer holding the same directory costs nothing.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = DirectoryLock(self.path, "a training run") if is_main_process() else None

    def __enter__(self) -> RunDirectory:
        if self._lock is None:
            return self
        nested = self._lock.held_here()  # an outer layer opened it (and checked it) already
        self._lock.acquire()  # at once: a second run into this directory is refused before anything loads
        try:
            if not nested:
                self.claim()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.release()

    @classmethod
    @contextmanager
    def open(cls, config: RunConfig, *, resume: bool = False, overwrite: bool = False,
             allow_change: Sequence[str] = ()) -> Iterator[OpenedRun]:
        """Open ``config``'s ``train.output_dir`` for a run: the options are refused here if they contradict each
        other (:func:`check_run_options`, before any work), then the directory is locked and claimed until the
        block ends. Nothing is decided or changed yet: :meth:`OpenedRun.start` does that when the run starts."""
        check_run_options(resume, overwrite, allow_change)
        with cls(config.train.output_dir) as directory:
            yield OpenedRun(directory, config, resume=resume, overwrite=overwrite, allow_change=tuple(allow_change))

    def claim(self) -> None:
        """Refuse the directory if it holds files that cselab did not write (nothing is written here: a run
        that then fails on its input leaves no trace; :func:`write_config` marks the directory)."""
        if (self.path / RUN_MARKER).exists():
            return
        names = sorted(p.name for p in self.path.iterdir() if not p.name.startswith(LOCK_FILE))
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise CselabError(f"{self.path} holds files that cselab did not write ({shown}); a run directory must be "
                              "new or a cselab run: choose another train.output_dir")

    def mark(self) -> None:
        """Make the directory a cselab run (before a first file other than the config is written into it)."""
        if not (self.path / RUN_MARKER).exists():
            write_atomic(self.path / RUN_MARKER, "a cselab run directory\n")

    def recover(self, *checkpoint_dirs: str) -> None:
        """Undo checkpoint swaps that a kill cut between their renames (see :func:`recover_directory`)."""
        for name in checkpoint_dirs:
            recover_directory(self.path / name)


@dataclass(frozen=True)
class RunStart:
    """How a run starts (:meth:`OpenedRun.start`): from the saved state in ``state_dir`` (None: from step 0), with
    the configuration changes a ``--resume`` was allowed (key -> (old, new)), which the run records."""

    state_dir: Path | None
    changes: dict[str, tuple[Any, Any]]


@dataclass(frozen=True)
class OpenedRun:
    """A run directory opened by :meth:`RunDirectory.open` (its lock held, its options checked) for ``config``."""

    directory: RunDirectory
    config: RunConfig
    resume: bool = False
    overwrite: bool = False
    allow_change: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return self.directory.path

    def start(self, *, rank: int = 0) -> RunStart:
        """Decide how the run starts, on every rank (only rank 0 changes files). Checkpoint swaps that a kill cut
        short are undone first. Then ``overwrite`` removes an unfinished run's files (a finished run is refused)
        and starts at step 0; ``resume`` refuses a changed configuration (:func:`check_resume_config`) and
        continues the saved state, or, for a run killed before its first save, removes its files and starts at
        step 0 (rank 0 says so through the reporter in effect); neither refuses a directory that already holds a
        run. Nothing is loaded here: the caller loads the state."""
        out, main = self.path, rank == 0
        if main:
            self.directory.recover(BEST_DIR)
        saved = recover_directory(state_dir(out, rank))
        changes: dict[str, tuple[Any, Any]] = {}
        if self.overwrite:
            if is_finished(out):
                raise CselabError(f"--overwrite: {out} holds a finished run; delete it yourself if it is not "
                                  "wanted, or choose another train.output_dir")
            if main:
                clear_run(out, (LAST_DIR, BEST_DIR))
            saved = None
        elif self.resume:
            changes = check_resume_config(out, self.config, self.allow_change)
            if saved is None:
                if is_finished(out):
                    raise CselabError(f"--resume: {out} holds a finished run but no saved state")
                # killed before its first save: nothing to continue, so the run starts again from step 0
                if main:
                    report().say(f"--resume: {out} holds no saved state yet; starting the run from step 0")
                    clear_run(out, (LAST_DIR, BEST_DIR))
        elif saved is not None or (out / BEST_DIR).exists() or (out / METRICS_FILE).exists():
            raise CselabError(
                f"{out} already holds a run; pass --resume to continue it, --overwrite to start an unfinished "
                "one again, or choose another train.output_dir")
        return RunStart(saved, changes)


def config_changes(old: RunConfig, new: RunConfig) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (old value, new value) for every setting that differs, runtime-only keys left out."""
    a, b = flatten_config(old.model_dump(mode="json")), flatten_config(new.model_dump(mode="json"))
    missing = "<unset>"
    return {key: (a.get(key, missing), b.get(key, missing)) for key in sorted(set(a) | set(b))
            if key not in RUNTIME_KEYS and a.get(key, missing) != b.get(key, missing)}


def settings_changes(directory: Path, saved: RunConfig, config: RunConfig) -> dict[str, tuple[Any, Any]]:
    """:func:`config_changes` between the configuration ``directory`` was run with and ``config``, with
    ``train.precision`` compared by what ran there (``auto`` by what it resolves to here: bf16 -> auto where auto
    picks bf16 is the same computation)."""
    every = config_changes(saved, config)
    # imported here: this module is read before torch loads (the CLI locks a run directory first)
    from cselab.runtime.precision import precision_agrees, ran_precision

    if "train.precision" in every and precision_agrees(saved.train.precision, ran_precision(directory), config):
        del every["train.precision"]
    return every


def read_saved_config(directory: Path) -> RunConfig | None:
    """The configuration a run directory records (None if it records none)."""
    file = directory / CONFIG_FILE
    if not file.is_file():
        return None
    try:
        return load_config(file)
    except CselabError as exc:
        raise CselabError(f"{file} is damaged ({exc}); the run's configuration is unknown") from None


def check_run_options(resume: bool, overwrite: bool, allow_change: Sequence[str] = ()) -> None:
    """Refuse options of opening a run that contradict each other, before any work: ``--overwrite`` with
    ``--resume`` (one discards the saved state the other continues), ``--allow-change`` without ``--resume`` or
    naming a key that may not change."""
    refuse_both(("--resume", resume), ("--overwrite", overwrite),
                "--resume continues the saved state, --overwrite discards it")
    if allow_change and not resume:
        raise UsageError("--allow-change only applies with --resume")
    bad = [key for key in allow_change if key not in CHANGEABLE_KEYS]
    if bad:
        raise UsageError(f"--allow-change {bad[0]}: only {', '.join(CHANGEABLE_KEYS)} may change on --resume "
                         "(other keys change what the saved steps did: start a new run)")


def check_resume_config(directory: Path, config: RunConfig,
                        allow_change: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """Refuse a ``--resume`` whose configuration differs from the recorded one, except ``allow_change`` keys;
    returns the allowed changes (key -> (old, new)) so the run can record them. ``allow_change`` is taken as
    checked (:meth:`RunDirectory.open` checked it)."""
    saved = read_saved_config(directory)
    if saved is None:
        return {}
    every = settings_changes(directory, saved, config)
    changes = {k: v for k, v in every.items() if k not in allow_change}
    if changes:
        listed = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in list(changes.items())[:4])
        more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
        hint = [k for k in changes if k in CHANGEABLE_KEYS]
        how = f"; to change it pass --allow-change {hint[0]}" if hint and len(hint) == len(changes) else \
            "; resume with the configuration the run was started with"
        raise CselabError(f"--resume: {directory} was started with another configuration ({listed}{more}){how}")
    return every


def truncate_metrics(directory: Path, step: int) -> None:
    """Keep the ``metrics.jsonl`` lines of steps <= ``step`` (the resumed state); later ones are logged again."""
    file = directory / METRICS_FILE
    if not file.is_file():
        return
    kept = [r for r in read_log(file) if isinstance(r.get("step"), int) and r["step"] <= step]  # a cut line: gone
    write_atomic(file, "".join(f"{json.dumps(r)}\n" for r in kept))


def clear_run(directory: Path, checkpoint_dirs: tuple[str, ...]) -> None:
    """Remove an unfinished run's files (``--overwrite``, or ``--resume`` with nothing saved yet)."""
    for name in checkpoint_dirs:
        shutil.rmtree(directory / name, ignore_errors=True)
    shutil.rmtree(directory / "tensorboard", ignore_errors=True)
    for name in _RUN_FILES:
        (directory / name).unlink(missing_ok=True)


def is_finished(directory: Path) -> bool:
    return (directory / SUMMARY_FILE).is_file()


def write_config(directory: Path, config: RunConfig) -> None:
    """The run's first file: with it the directory becomes a cselab run (:data:`RUN_MARKER`)."""
    RunDirectory(directory).mark()
    write_atomic(directory / CONFIG_FILE, dump_config(config))
