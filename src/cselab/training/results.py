"""The results record of a finished run (docs/results.md#results-record): the selected checkpoint's test scores,
the effective configuration, cost and provenance; one JSON line per run in a results file.

Its own module so that single runs (:mod:`cselab.training.runs`) and the two-stage pipeline
(:mod:`cselab.training.pipeline`) both record through it without importing each other. Records are read back,
each checked against the schema of its kind, by :func:`cselab.training.records.read_records` (also importable
from here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cselab.config.run_config import RunConfig
from cselab.data.stores.jsonl import append_jsonl
from cselab.provenance import provenance
from cselab.training.records import read_records as read_records  # the one reader of records (re-exported)
from cselab.training.trainer import TrainResult


def score_test_sets(model_dir: Path, *, batch_size: int = 128, device: Any = None) -> dict[str, float]:
    """Test scores of a saved model on every available STS task (one evaluation, after selection), computed on
    ``device`` (the training device; default :func:`cselab.runtime.devices.inference_device`)."""
    from cselab.models.sentence_model import load_model

    return scores_on_test_sets(load_model(model_dir, device=device), batch_size=batch_size)


def scores_on_test_sets(model: Any, *, batch_size: int = 128) -> dict[str, float]:
    """:func:`score_test_sets` of a model already loaded: ``task -> test score`` and their ``avg-available``."""
    from cselab.data.evalsets.sts import DEFAULT_TASKS
    from cselab.evaluation.sts_evaluator import StsEvaluator

    evaluator = StsEvaluator.from_names(DEFAULT_TASKS, ("test",), batch_size=batch_size)
    result = evaluator(model)
    scores = {task: round(s.all, 2) for (task, _), s in result.scores.items()}
    scores["avg-available"] = round(result.average, 2)
    return scores


def results_record(config: RunConfig, result: TrainResult, scores: dict[str, float], *, variant: str = "",
                   row: str = "", config_source: str | None = None,
                   overrides: list[str] | None = None) -> dict[str, Any]:
    """One line of a results file (docs/results.md#results-record): the run's protocol when it names one, and
    its training text (name, size, checksum, and which STS test sets it holds sentences of)."""
    protocol = {"protocol": config.protocol} if config.protocol else {}
    return {
        **protocol,
        "training_text": _training_text(config.data.corpus),
        "row": row,
        "method": config.method,
        "variant": variant,
        "backbone": config.model.backbone,
        "config": {"path": config_source, "overrides": overrides or [], "effective": config.model_dump(mode="json")},
        "seed": config.train.seed,
        "steps": result.steps,
        "precision": result.precision or config.train.precision,  # what ran (auto resolved)
        "scores": {**scores, "stsb_dev_best": round(result.best_dev, 2) if result.best_dev is not None else None,
                   "stsb_dev_start": round(result.dev_at_start, 2) if result.dev_at_start is not None else None},
        "best_step": result.best_step,
        "wall_s": round(result.wall_s, 1),
        "train_sentences_per_s": round(result.train_sentences_per_s, 1),
        "peak_mem_mb": round(result.peak_mem_mb, 1),
        **provenance(),
    }


def _training_text(corpus: str) -> dict[str, Any]:
    """:func:`~cselab.data.text.training_data.training_text_summary`, or why it is missing (a record is never lost to
    it)."""
    from cselab.data.text.training_data import training_text_summary
    from cselab.errors import CselabError

    try:
        return training_text_summary(corpus)
    except CselabError as exc:
        return {"corpus": corpus, "error": str(exc)}


def append_record(results_file: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line, unless the file already holds exactly this record (a rerun or a
    ``--resume`` of a recorded run never duplicates it)."""
    append_jsonl(results_file, record, unless_present=True)
