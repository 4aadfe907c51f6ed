"""Library functions behind ``cselab eval`` and ``cselab encode``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.data.evalsets.sts import DEFAULT_TASKS, TASK_NAMES
from cselab.data.text.corpus import utf8_payload
from cselab.errors import CselabError
from cselab.evaluation.sts_evaluator import StsEvaluator
from cselab.fileio import atomic_path, write_atomic
from cselab.models.encoder import check_length
from cselab.models.sentence_model import load_model
from cselab.paths import cselab_home, resolve_model_path
from cselab.provenance import provenance
from cselab.runtime.precision import autocast_context, inference_precision
from cselab.vocabulary import SPLITS

SENTEVAL_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def resolve_tasks(tasks: Sequence[str], senteval_dir: Path | None) -> list[str]:
    if list(tasks) in ([], ["all"]):
        return list(SENTEVAL_TASKS if senteval_dir else DEFAULT_TASKS)
    unknown = [t for t in tasks if t not in TASK_NAMES]
    if unknown:
        raise CselabError(f"unknown task {unknown[0]!r}; choose from: {', '.join(TASK_NAMES)} (or 'all')")
    return list(tasks)


def evaluate_model(
    model_name: str,
    *,
    pooler: str | None = None,
    tasks: Sequence[str] = ("all",),
    splits: Sequence[str] = ("dev", "test"),
    senteval_dir: Path | None = None,
    batch_size: int = 128,
    max_length: int | None = None,
    output: Path | None = None,
    precision: str = "fp32",
    backend: str = "torch",
) -> dict[str, Any]:
    """Evaluate a model on STS tasks; returns (and writes) a JSON-able report.

    ``precision``: fp32, bf16 (autocast) or auto (bf16 where a matmul probe on this machine says it pays).
    ``backend``: torch, or onnx/openvino for a directory ``cselab export`` wrote (:mod:`cselab.export`).
    """
    bad = [s for s in splits if s not in SPLITS]
    if bad or not splits:
        raise CselabError(f"unknown split {bad[0] if bad else ''!r}; choose from: {', '.join(SPLITS)}")
    if pooler is not None:
        from cselab.models.poolers import check_pooler

        check_pooler(pooler)
    names = resolve_tasks(tasks, senteval_dir)
    evaluator = StsEvaluator.from_names(names, splits, senteval_dir=senteval_dir, batch_size=batch_size)
    model, ran, context = _inference_model(model_name, pooler, max_length, precision, batch_size, backend)
    with context:
        result = evaluator(model)
    report = {
        "model": str(model_name),
        "pooler": pooler or getattr(model, "pooler", None),
        "scores": result.table(),
        "avg_available": round(result.average, 2),
        "avg_tasks": result.average_tasks(),
        "precision": ran,
        "details": result.details(),
        **provenance(),
    }
    output = output or default_output(model_name, report["pooler"])
    write_atomic(output, json.dumps(report, indent=2) + "\n")
    report["output"] = str(output)
    return report


def default_output(model_name: str, pooler: str | None) -> Path:
    """``$CSELAB_HOME/eval/<name>-<pooler>.json``, named after the MODEL: a local directory by its last two path
    parts plus a short hash of its resolved path (two ``.../best`` directories never share a file), a hub or
    fetched name by the name itself."""
    source = Path(resolve_model_path(model_name))
    if source.exists():
        resolved = source.resolve()
        readable = "-".join(resolved.parts[-2:])
        name = f"{readable}-{hashlib.sha1(str(resolved).encode()).hexdigest()[:8]}"
    else:
        name = str(model_name).strip("/")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"
    return cselab_home() / "eval" / f"{slug}-{pooler or 'default'}.json"


def render_table(report: dict[str, Any]) -> str:
    """A plain-text table: one row per task, one column per split."""
    scores = report["scores"]
    splits = [s for s in SPLITS if any(s in v for v in scores.values())]
    width = max(len(t) for t in scores) + 2
    lines = [f"model: {report['model']}  pooler: {report['pooler']}",
             "task".ljust(width) + "".join(s.rjust(9) for s in splits)]
    for task, values in scores.items():
        lines.append(task.ljust(width) + "".join(
            (f"{values[s]:.2f}" if s in values else "-").rjust(9) for s in splits))
    lines.append(f"avg-available (test, {len(report['avg_tasks'])} tasks: {', '.join(report['avg_tasks'])}): "
                 f"{report['avg_available']:.2f}")
    return "\n".join(lines)


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (one sentence each); blank lines are kept so row i is line i."""
    if not path.is_file():
        raise CselabError(f"input file not found: {path}")
    try:
        text = utf8_payload(path.read_bytes(), path, "input file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CselabError(f"{path} is not valid UTF-8 (byte {exc.start})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CselabError(f"input file {path} is empty")
    return [line.rstrip("\r") for line in lines]


def _inference_model(model_name: str, pooler: str | None, max_length: int | None, precision: str, batch_size: int,
                     backend: str) -> tuple[Any, dict[str, Any], contextlib.AbstractContextManager]:
    """The model, what runs it (the precision record) and the context to encode in, for ``backend``."""
    if backend != "torch":
        from cselab.export import load_for_backend

        model = load_for_backend(model_name, backend, pooler=pooler, max_length=max_length, precision=precision)
        return model, model.describe(), contextlib.nullcontext()
    model = load_model(model_name, pooler=pooler, max_length=max_length)
    if max_length is not None:
        check_length(model, max_length, "--max-length")
    choice = inference_precision(precision, model, batch_size)
    return model, choice.to_dict(), autocast_context(choice.precision, next(model.parameters()).device)


def encode_file(model_name: str, input_file: Path, output_file: Path, *, pooler: str | None = None,
                batch_size: int = 64, normalize: bool = False, precision: str = "fp32",
                backend: str = "torch") -> tuple[int, int]:
    """Embed every line of ``input_file`` into a float32 ``.npy`` array (row i = line i); ``precision`` and
    ``backend`` as in :func:`evaluate_model`."""
    if output_file.suffix != ".npy":
        raise CselabError(f"output file must end in .npy: {output_file}")
    sentences = read_lines(input_file)
    model, _ran, context = _inference_model(model_name, pooler, None, precision, batch_size, backend)
    with context:
        embeddings = model.encode(sentences, batch_size=batch_size, progress=True)
    if normalize:
        embeddings = embeddings / embeddings.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    array = embeddings.float().numpy()
    with atomic_path(output_file) as tmp, open(tmp, "wb") as f:
        np.save(f, array)
    return array.shape
