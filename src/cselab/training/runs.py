"""A complete run: train, evaluate the selected (best-on-dev) checkpoint once on test, record the result."""

from __future__ import annotations

import json
from pathlib import Path

from .config import RunConfig
from .pipeline import run_twin_pipeline
from .results import append_record, results_record, score_test_sets
from .trainer import BEST_DIR, Trainer


def train_and_record(config: RunConfig, *, resume: bool = False, results_file: Path | None = None, variant: str = "",
                     row: str = "", config_source: str | None = None, overrides: list[str] | None = None,
                     progress: bool = True) -> str:
    """Train, then score the best checkpoint on test; returns a printable summary.

    A twin method with a ``pipeline`` block runs the whole two-stage recipe (finished stages are skipped and
    an interrupted one resumes, so ``resume`` is implied).
    """
    if config.method_options.get("pipeline"):
        return run_twin_pipeline(config, progress=progress, results_file=results_file, variant=variant, row=row,
                                 config_source=config_source, overrides=overrides).summary()
    trainer = Trainer(config, progress=progress)
    result = trainer.run(resume=resume)
    if not trainer.dist.is_main:
        trainer.dist.close()
        return ""
    scores = score_test_sets(Path(result.output_dir) / BEST_DIR, batch_size=config.train.eval_batch_size)
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
