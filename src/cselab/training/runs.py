"""A complete run: train, evaluate the selected (best-on-dev) checkpoint once on test, record the result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import CselabError
from ..fileio import DirectoryLock, check_writable_file
from ..provenance import provenance
from .config import RunConfig
from .run_directory import RESULTS_FILE
from .trainer import BEST_DIR, Trainer, TrainResult


def score_test_sets(model_dir: Path, *, batch_size: int = 128) -> dict[str, float]:
    """Test scores of a saved model on every available STS task (one evaluation, after selection)."""
    from ..evaluation.sts_evaluator import DEFAULT_TASKS, StsEvaluator
    from ..models.sentence_model import load_model

    evaluator = StsEvaluator.from_names(DEFAULT_TASKS, ("test",), batch_size=batch_size)
    result = evaluator(load_model(model_dir))
    scores = {task: round(s.all, 2) for (task, _), s in result.scores.items()}
    scores["avg-available"] = round(result.average, 2)
    return scores


def results_record(config: RunConfig, result: TrainResult, scores: dict[str, float], *, variant: str = "",
                   row: str = "", config_source: str | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    """One line of a results file (DATA_AND_EVAL.md section 6)."""
    return {
        "row": row,
        "method": config.method,
        "variant": variant,
        "backbone": config.model.backbone,
        "config": {"path": config_source, "overrides": overrides or [], "effective": config.model_dump(mode="json")},
        "seed": config.train.seed,
        "steps": result.steps,
        "precision": config.train.precision,
        "scores": {**scores, "stsb_dev_best": round(result.best_dev, 2) if result.best_dev is not None else None,
                   "stsb_dev_start": round(result.dev_at_start, 2) if result.dev_at_start is not None else None},
        "best_step": result.best_step,
        "wall_s": round(result.wall_s, 1),
        "train_sentences_per_s": round(result.train_sentences_per_s, 1),
        "peak_mem_mb": round(result.peak_mem_mb, 1),
        **provenance(),
    }


def append_record(results_file: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line, unless the file already holds exactly this record (a rerun or a
    ``--resume`` of a recorded run never duplicates it)."""
    line = json.dumps(record)
    if results_file.is_file():
        with open(results_file, encoding="utf-8", errors="replace") as f:
            if any(existing.rstrip("\n") == line for existing in f):
                return
    results_file.parent.mkdir(parents=True, exist_ok=True)
    # one write of one line with O_APPEND: concurrent runs appending to one results file do not interleave
    with open(results_file, "a", encoding="utf-8") as f:
        f.write(line + "\n")


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
                     progress: bool = True, overwrite: bool = False, allow_change: tuple[str, ...] = ()) -> str:
    """Train, then score the best checkpoint on test; returns a printable summary.

    A twin method with a ``pipeline`` block runs the whole two-stage recipe (finished stages are skipped and
    an interrupted one resumes, so ``resume`` is implied). The run directory is locked from training to
    record; ``--resume`` of a run already scored reports its record instead of scoring (and appending) again.
    """
    if results_file is not None:
        check_writable_file(results_file, "results file")  # before training, not after it
    if config.method_options.get("pipeline"):
        from .pipeline import run_twin_pipeline

        return run_twin_pipeline(config, progress=progress, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides).summary()
    output_dir = Path(config.train.output_dir)
    main_rank = int(os.environ.get("RANK", "0")) == 0
    lock = DirectoryLock(output_dir, "a training run") if main_rank else None
    if lock is not None:
        lock.acquire()  # at once: a second run into this directory is refused before it loads anything
    try:
        recorded = _recorded(output_dir) if resume and main_rank else None
        if recorded is not None:
            if results_file is not None:
                append_record(results_file, recorded)
            return _summary(config.method, variant, recorded["steps"], recorded["scores"], recorded.get("best_step"),
                            recorded.get("wall_s", 0.0), recorded.get("train_sentences_per_s", 0.0), output_dir,
                            note=" (already recorded; not scored again)")
        trainer = Trainer(config, progress=progress)
        result = trainer.run(resume=resume, overwrite=overwrite, allow_change=allow_change)
        if not trainer.dist.is_main:
            trainer.dist.close()
            return ""
        scores = score_test_sets(output_dir / BEST_DIR, batch_size=config.train.eval_batch_size)
        record = results_record(config, result, scores, variant=variant, row=row, config_source=config_source,
                                overrides=overrides)
        tmp = output_dir / f"{RESULTS_FILE}.tmp"
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, output_dir / RESULTS_FILE)
        if results_file is not None:
            append_record(results_file, record)
        trainer.dist.close()
    finally:
        if lock is not None:
            lock.release()
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
