"""A complete run: train, evaluate the selected (best-on-dev) checkpoint once on test, record the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..provenance import provenance
from .config import RunConfig
from .trainer import BEST_DIR, Trainer, TrainResult


def score_test_sets(model_dir: Path, *, batch_size: int = 128, device: Any = None) -> dict[str, float]:
    """Test scores of a saved model on every available STS task (one evaluation, after selection), computed on
    ``device`` (the training device; default :func:`cselab.devices.inference_device`)."""
    from ..evaluation.sts_evaluator import DEFAULT_TASKS, StsEvaluator
    from ..models.sentence_model import load_model

    evaluator = StsEvaluator.from_names(DEFAULT_TASKS, ("test",), batch_size=batch_size)
    result = evaluator(load_model(model_dir, device=device))
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
    results_file.parent.mkdir(parents=True, exist_ok=True)
    with open(results_file, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def train_and_record(config: RunConfig, *, resume: bool = False, results_file: Path | None = None, variant: str = "",
                     row: str = "", config_source: str | None = None, overrides: list[str] | None = None,
                     progress: bool = True) -> str:
    """Train, then score the best checkpoint on test; returns a printable summary.

    A twin method with a ``pipeline`` block runs the whole two-stage recipe (finished stages are skipped and
    an interrupted one resumes, so ``resume`` is implied).
    """
    if config.method_options.get("pipeline"):
        from .pipeline import run_twin_pipeline

        return run_twin_pipeline(config, progress=progress, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides).summary()
    trainer = Trainer(config, progress=progress)
    result = trainer.run(resume=resume)
    if not trainer.dist.is_main:
        trainer.dist.close()
        return ""
    scores = score_test_sets(Path(result.output_dir) / BEST_DIR, batch_size=config.train.eval_batch_size,
                             device=trainer.device)
    record = results_record(config, result, scores, variant=variant, row=row, config_source=config_source,
                            overrides=overrides)
    (Path(result.output_dir) / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    if results_file is not None:
        append_record(results_file, record)
    trainer.dist.close()
    start = f"{result.dev_at_start:.2f} -> " if result.dev_at_start is not None else ""
    lines = [f"{config.method} {variant}".strip() + f": {result.steps} steps, best dev {start}{result.best_dev:.2f}"
             f" at step {result.best_step}, {result.wall_s:.0f} s, {result.train_sentences_per_s:.0f} sent/s",
             "test: " + "  ".join(f"{k} {v:.2f}" for k, v in scores.items()),
             f"model: {Path(result.output_dir) / BEST_DIR}"]
    return "\n".join(lines)
