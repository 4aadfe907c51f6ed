"""A complete run: train, evaluate the selected (best-on-dev) checkpoint once on test, record the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cselab.config.run_config import RunConfig
from cselab.errors import CselabError, UsageError
from cselab.fileio import check_writable_file, write_atomic
from cselab.models.model_card import record_test_scores
from cselab.runtime.launch import is_main_process
from cselab.training.pipeline import run_twin_pipeline
from cselab.training.results import append_record, results_record, score_test_sets
from cselab.training.run_directory import BEST_DIR, RESULTS_FILE, OpenedRun, RunDirectory, check_resume_config
from cselab.training.trainer import Trainer


def _recorded(output_dir: Path) -> dict[str, Any] | None:
    """The results record a finished, scored run left in its directory (None if it has none)."""
    file = output_dir / RESULTS_FILE
    if not file.is_file():
        return None
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CselabError(f"{file} is damaged ({exc}); delete it to score the run again") from exc
    return record if isinstance(record, dict) and isinstance(record.get("scores"), dict) else None


def train_and_record(config: RunConfig, *, resume: bool = False, results_file: Path | None = None, variant: str = "",
                     row: str = "", config_source: str | None = None, overrides: list[str] | None = None,
                     overwrite: bool = False, allow_change: tuple[str, ...] = (),
                     opened: OpenedRun | None = None) -> str:
    """Train, then score the best checkpoint on test; returns a printable summary.

    A twin method with a ``pipeline`` block runs the whole two-stage recipe (finished stages are skipped and
    an interrupted one resumes, so ``resume`` is implied). The run directory is opened here with ``resume``,
    ``overwrite`` and ``allow_change`` (:meth:`RunDirectory.open`: contradictions are refused before any work)
    and locked from training to record, unless a caller opened it already and gives it as ``opened`` (the CLI,
    before torch loads; its options are then the run's). ``--resume`` of a run already scored reports its record
    instead of scoring (and appending) again.
    """
    if opened is not None:
        if resume or overwrite or allow_change:
            raise ValueError("the options of an opened run are the ones it was opened with; give them to "
                             "RunDirectory.open, not to train_and_record")
        return _train_and_record(opened, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides)
    with RunDirectory.open(config, resume=resume, overwrite=overwrite, allow_change=allow_change) as opened:
        return _train_and_record(opened, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides)


def _train_and_record(opened: OpenedRun, *, results_file: Path | None, variant: str, row: str,
                      config_source: str | None, overrides: list[str] | None) -> str:
    config = opened.config
    if results_file is not None:
        check_writable_file(results_file, "results file")  # before training, not after it
    if config.method_options.get("pipeline"):
        if opened.overwrite or opened.allow_change:  # the pipeline keeps finished stages and resumes an interrupted one
            raise UsageError(f"{'--overwrite' if opened.overwrite else '--allow-change'} does not apply to a two-stage "
                             "run: finished stages are kept and an interrupted one resumes; choose another "
                             "train.output_dir to start again")
        return run_twin_pipeline(config, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides).summary()
    output_dir = opened.path
    recorded = _recorded(output_dir) if opened.resume and is_main_process() else None
    if recorded is not None:
        check_resume_config(output_dir, config, opened.allow_change)  # a changed configuration is refused here too
        if results_file is not None:
            append_record(results_file, recorded)
        return _summary(config.method, variant, recorded["steps"], recorded["scores"], recorded.get("best_step"),
                        recorded.get("wall_s", 0.0), recorded.get("train_sentences_per_s", 0.0), output_dir,
                        note=" (already recorded; not scored again)")
    trainer = Trainer(config)
    result = trainer.run(opened=opened)
    if not trainer.dist.is_main:
        trainer.dist.close()
        return ""
    scores = score_test_sets(output_dir / BEST_DIR, batch_size=config.train.eval_batch_size, device=trainer.device)
    record_test_scores(output_dir / BEST_DIR, scores)  # the model card shows them
    record = results_record(config, result, scores, variant=variant, row=row, config_source=config_source,
                            overrides=overrides)
    write_atomic(output_dir / RESULTS_FILE, json.dumps(record, indent=2) + "\n")
    if results_file is not None:
        append_record(results_file, record)
    trainer.dist.close()
    return _summary(config.method, variant, result.steps, record["scores"], result.best_step, result.wall_s,
                    result.train_sentences_per_s, output_dir)


def _summary(method: str, variant: str, steps: int, scores: dict[str, Any], best_step: int | None, wall_s: float,
             sent_per_s: float, output_dir: Path, note: str = "") -> str:
    dev = {k: scores.get(k) for k in ("stsb_dev_start", "stsb_dev_best")}
    start = f"{dev['stsb_dev_start']:.2f} -> " if isinstance(dev["stsb_dev_start"], (int, float)) else ""
    best = f"{dev['stsb_dev_best']:.2f}" if isinstance(dev["stsb_dev_best"], (int, float)) else "-"
    tests = {k: v for k, v in scores.items() if not k.startswith("stsb_dev_") and isinstance(v, (int, float))}
    lines = [f"{method} {variant}".strip() + f": {steps} steps, best dev {start}{best} at step {best_step}, "
             f"{wall_s:.0f} s, {sent_per_s:.0f} sent/s{note}",
             "test: " + "  ".join(f"{k} {v:.2f}" for k, v in tests.items()),
             f"model: {output_dir / BEST_DIR}"]
    return "\n".join(lines)
