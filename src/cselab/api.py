"""The Python API: load a model and encode, train from a preset, evaluate. Re-exported by ``import cselab``.

>>> import cselab
>>> model = cselab.load_model("all-MiniLM-L6-v2")          # any model directory cselab or sentence-transformers wrote
>>> vectors = model.encode(["A man plays a guitar."], normalize=True)   # numpy float32 [1, d]
>>> cselab.evaluate(model, ["stsb"])                       # {"stsb": {"test": 82.03}}
>>> best_dir = cselab.train("configs/simcse/cpu-minilm.yaml", "train.steps=100")

``encode`` follows sentence-transformers' conventions (numpy by default, ``convert_to_tensor=True`` for a
torch tensor, a 1-D vector for a single string), so code written for one runs on the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CselabError


class SentenceEncoder:
    """A loaded sentence model (any kind: encoder, CoT-BERT, twin, ensemble) with a numpy ``encode``."""

    def __init__(self, model: Any, source: str = "") -> None:
        self.model = model  # the torch module (cselab.models.encoder.Encoder, TwinModel, EnsembleModel)
        self.source = source

    @property
    def kind(self) -> str:
        return str(self.model.describe()["kind"])

    @property
    def embedding_dim(self) -> int:
        return int(self.model.hidden_size)

    def encode(self, sentences: str | Sequence[str], *, batch_size: int = 64, normalize: bool = False,
               convert_to_tensor: bool = False, show_progress_bar: bool = False) -> Any:
        """Embeddings ``[N, d]`` float32 in the order of ``sentences`` (``[d]`` for one string).

        ``normalize`` L2-normalises each vector; ``convert_to_tensor`` returns a CPU torch tensor instead
        of a numpy array.
        """
        import torch

        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        if any(not isinstance(t, str) for t in texts):
            raise CselabError("encode takes a string or a list of strings")
        embeddings = self.model.encode(texts, batch_size=batch_size, progress=show_progress_bar)
        if normalize:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        out = embeddings[0] if single else embeddings
        return out if convert_to_tensor else out.numpy().astype(np.float32, copy=False)

    def save(self, path: str | Path) -> Path:
        """Save as a cselab and sentence-transformers model directory."""
        from .models.sentence_model import save_model

        return save_model(self.model, path)

    def __repr__(self) -> str:
        return f"SentenceEncoder(kind={self.kind!r}, dim={self.embedding_dim}, source={self.source!r})"


def load_model(path: str | Path, *, pooler: str | None = None, max_length: int | None = None,
               backend: str = "torch") -> SentenceEncoder:
    """Load a cselab model directory, a sentence-transformers or HF directory, a fetched model name
    (``all-MiniLM-L6-v2``) or a hub name; ``pooler``/``max_length`` override what a single encoder saved.

    ``backend="onnx"`` / ``"openvino"`` loads a directory ``cselab export`` wrote (:mod:`cselab.export`; the
    ``cselab[export]`` extra), run by ONNX Runtime / OpenVINO; ``encode`` returns the same arrays."""
    if backend != "torch":
        from .export import load_for_backend

        return SentenceEncoder(load_for_backend(path, backend, pooler=pooler, max_length=max_length), source=str(path))
    from .models.sentence_model import load_model as load_module

    return SentenceEncoder(load_module(path, pooler=pooler, max_length=max_length), source=str(path))


def train(config: str | Path | dict[str, Any] | None = None, *overrides: str, method: str | None = None,
          resume: bool = False, results: str | Path | None = None, progress: bool = True) -> Path:
    """Train as ``cselab train`` does and return the directory of the saved (dev-selected) model.

    ``config`` is a YAML preset (``configs/<method>/<preset>.yaml``), a mapping of the same sections, or
    None (then ``method`` and the overrides say everything); ``overrides`` are ``KEY=VALUE`` strings
    (``"train.lr=1e-5"``). Twin methods with a pipeline block run both stages.
    """
    from .training.config import RunConfig, apply_overrides, load_config, validate
    from .training.runs import train_and_record
    from .training.trainer import BEST_DIR

    if isinstance(config, dict):
        raw = apply_overrides(dict(config), list(overrides))
        if method is not None:
            raw["method"] = method
        run_config = validate(RunConfig, raw)
        source = None
    else:
        run_config = load_config(config, list(overrides), method=method)
        source = str(config) if config else None
    train_and_record(run_config, resume=resume, results_file=Path(results) if results else None,
                     config_source=source, overrides=list(overrides), progress=progress)
    if run_config.method_options.get("pipeline"):
        from .training.pipeline import plan_pipeline

        return Path(plan_pipeline(run_config).stage2.train.output_dir) / BEST_DIR
    return Path(run_config.train.output_dir) / BEST_DIR


def evaluate(model: str | Path | SentenceEncoder | Any, tasks: Sequence[str] = ("stsb",), *,
             splits: Sequence[str] = ("test",), batch_size: int = 128) -> dict[str, dict[str, float]]:
    """Scores ``task -> split -> score`` (x 100). cselab's STS tasks (``stsb``, ``sts12-part`` ... ``sts17-en``,
    ``all``) use its SentEval-style evaluator on the given ``splits``; any other name is run as an mteb task
    (needs ``pip install cselab[mteb]``; STSBenchmark and the zero-shot tasks use local data)."""
    from .data.sts import TASK_NAMES
    from .evaluation.sts_evaluator import DEFAULT_TASKS, StsEvaluator

    loaded = model.model if isinstance(model, SentenceEncoder) else (
        load_model(model).model if isinstance(model, (str, Path)) else model)
    names = list(DEFAULT_TASKS) if list(tasks) == ["all"] else list(tasks)
    sts = [t for t in names if t in TASK_NAMES]
    other = [t for t in names if t not in TASK_NAMES]
    scores: dict[str, dict[str, float]] = {}
    if sts:
        evaluator = StsEvaluator.from_names(sts, list(splits), batch_size=batch_size)
        scores.update(evaluator(loaded).table())
    if other:
        try:
            from .evaluation.mteb_adapter import run_mteb
        except ImportError as exc:
            raise CselabError(f"{', '.join(other)}: not a cselab STS task, and mteb is not installed "
                              f"for other tasks ({exc}): pip install 'cselab[mteb]'") from exc
        scores.update(run_mteb(loaded, other, batch_size=batch_size))
    return scores
