"""What a model costs to serve on this machine: sentences per second at the user's text length on the fastest way of
running it whose vectors agree with torch fp32's (mean cosine at least 0.995: torch fp32 or bf16, or cselab's ONNX or
OpenVINO export of it when ``cselab[export]`` is installed), and its size on disk in that form. The report puts it
beside the score of the model handed back and of the teacher, so that the user who can afford the teacher sees it and
the one who cannot sees what the adapted model buys. The ways are the teacher pass's (:func:`cselab.teacher.vectors.
choose_runner`): one owner of how a model runs fastest here."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cselab.paths import resolve_model_path

SAMPLE_SENTENCES = 256  # held-out lines timed: the user's text length


@dataclass(frozen=True)
class ServingCost:
    backend: str  # torch, onnx or openvino
    precision: str  # fp32 or bf16
    sentences_per_s: float
    size_mb: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def directory_mb(path: Path) -> float:
    """The size of the files under ``path`` (a model directory or an export), in MB."""
    path = Path(path)
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def serving_cost(name: str | Path, model: Any, sample: Sequence[str], scratch: Path,
                 export_dir: str | Path | None = None, backends: Sequence[str] | None = None) -> ServingCost:
    """``model`` (the model of the directory or fetched ``name``, loaded for torch) run the fastest agreeing way on
    this machine's CPU, timed over ``sample`` (after a warm-up); exports are kept in ``export_dir`` (default: where the
    teacher pass keeps them, ``$CSELAB_HOME/teacher-exports``) or made in ``scratch``. ``backends`` limits the ways
    (default: every one, :func:`cselab.teacher.vectors.choose_runner`)."""
    from cselab.teacher.vectors import choose_runner, choosing_for, teacher_export

    model = model.to("cpu").eval()
    sample = list(sample[:SAMPLE_SENTENCES])
    with choosing_for("serving cost"):
        runner, _ = choose_runner(str(name), model, sample[:64], scratch, requested_precision="auto",
                                  backends=backends, export_dir=export_dir)
    runner.encode(sample[:16])  # warm-up
    start = time.perf_counter()
    runner.encode(sample)
    seconds = time.perf_counter() - start
    if runner.backend == "torch":
        size = directory_mb(Path(resolve_model_path(str(name))))
    else:
        size = directory_mb(teacher_export(str(name), runner.backend, scratch, export_dir))
    return ServingCost(runner.backend, runner.precision, round(len(sample) / max(seconds, 1e-9), 1), round(size, 1))
