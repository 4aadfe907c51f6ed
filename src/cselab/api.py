"""The Python API: load a model and encode, train from a preset, evaluate. Re-exported by ``import cselab``.

Example (run by ``tests/test_examples.py``)::

    import cselab
    model = cselab.load_model("all-MiniLM-L6-v2")     # any model directory cselab or sentence-transformers wrote
    vectors = model.encode(["A man plays a guitar."], normalize=True)   # numpy float32 [1, d]
    scores = cselab.evaluate(model, ["stsb"])          # {"stsb": {"test": 82.03}} for the real checkpoint
    best_dir = cselab.train("my-config.yaml", "train.max_steps=100")

``encode`` follows sentence-transformers' conventions (numpy by default, ``convert_to_tensor=True`` for a
torch tensor, a 1-D vector for a single string, ``(0, d)`` for no sentences), so code written for one runs on the
other.

Every function checks its arguments before any work, with the rules and ranges of the matching command-line
option (:mod:`cselab.errors`): a misuse raises :class:`cselab.errors.UsageError` (a ``CselabError`` and a
``ValueError``) with the CLI's one-line message; a problem with the files it names raises ``CselabError``. No
call changes the objects it is given.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import (
    CselabError,
    UsageError,
    check_flag,
    check_int,
    check_names,
    check_optional_int,
    check_path,
    check_text,
    refuse_both,
)
from cselab.reporter import QUIET, console, report, reporting
from cselab.vocabulary import BACKENDS, SPLITS


class SentenceEncoder:
    """A loaded sentence model (any kind: encoder, CoT-BERT, twin, ensemble) with a numpy ``encode``."""

    def __init__(self, model: Any, source: str = "") -> None:
        if not callable(getattr(model, "encode", None)) or not hasattr(model, "hidden_size"):
            raise UsageError(f"model: a {type(model).__name__} is not a sentence model (one with encode() and "
                             "hidden_size); load one with cselab.load_model")
        if not isinstance(source, str):
            raise UsageError(f"source: {source!r} is not text")
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
        of a numpy array; ``show_progress_bar`` shows a bar on stderr. No sentences give an empty ``[0, d]`` array.
        """
        import torch

        single, texts = _sentences(sentences)
        check_int(batch_size, "batch_size")  # `cselab encode --batch-size`: x >= 1
        for name, flag in (("normalize", normalize), ("convert_to_tensor", convert_to_tensor),
                           ("show_progress_bar", show_progress_bar)):
            check_flag(flag, name)
        if not texts:
            empty = torch.zeros((0, self.embedding_dim), dtype=torch.float32)
            return empty if convert_to_tensor else empty.numpy()
        with reporting(report().with_bars(show_progress_bar)):
            embeddings = self.model.encode(texts, batch_size=batch_size, progress=show_progress_bar)
        if normalize:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        out = embeddings[0] if single else embeddings
        return out if convert_to_tensor else out.numpy().astype(np.float32, copy=False)

    def save(self, path: str | Path) -> Path:
        """Save as a cselab and sentence-transformers model directory: to a new path, an empty directory or over a
        model cselab saved; a file, a link or a directory of yours there is refused (``CselabError``), never
        replaced."""
        from cselab.models.sentence_model import save_model

        check_path(path, "path")
        if getattr(self.model, "kind", None) == "export":
            raise UsageError(f"save: {self.source} is an {self.model.backend} export, which holds no torch weights to "
                             "save; copy its directory as it is, or load the model directory it was exported from "
                             "(backend='torch') and save that")
        return save_model(self.model, path)

    def __repr__(self) -> str:
        return f"SentenceEncoder(kind={self.kind!r}, dim={self.embedding_dim}, source={self.source!r})"


def _sentences(sentences: Any) -> tuple[bool, list[str]]:
    """(a single string?, the texts) of ``encode``'s argument: a string or an ordered collection of strings."""
    message = "encode takes a string or a list of strings"
    if isinstance(sentences, str):
        return True, [sentences]
    if isinstance(sentences, (bytes, Mapping, set, frozenset)) or not isinstance(sentences, Iterable):
        raise UsageError(f"sentences: {message}, not a {type(sentences).__name__}")
    texts = list(sentences)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise UsageError(f"sentences: {message}; item {i} is a {type(text).__name__}")
    return False, texts


def load_model(path: str | Path, *, pooler: str | None = None, max_length: int | None = None,
               backend: str = "torch") -> SentenceEncoder:
    """Load a cselab model directory, a sentence-transformers or HF directory, a fetched model name
    (``all-MiniLM-L6-v2``) or a hub name; ``pooler``/``max_length`` override what a single encoder saved
    (``max_length``: at least 1, at most the model's position embeddings, like ``cselab eval --max-length``).

    ``backend="onnx"`` / ``"openvino"`` loads a directory ``cselab export`` wrote (:mod:`cselab.export`; the
    ``cselab[export]`` extra), run by ONNX Runtime / OpenVINO; ``encode`` returns the same arrays."""
    from cselab.models.encoder import check_length
    from cselab.models.poolers import check_pooler
    from cselab.models.sentence_model import load_model as load_module
    check_path(path, "path")
    if backend not in BACKENDS:
        raise UsageError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if check_text(pooler, "pooler", optional=True) is not None:
        check_pooler(pooler)
    check_optional_int(max_length, "max_length")
    if backend != "torch":  # an export fixed its pooler and length: giving either is refused there
        from cselab.export import load_for_backend

        return SentenceEncoder(load_for_backend(path, backend, pooler=pooler, max_length=max_length), source=str(path))
    module = load_module(path, pooler=pooler, max_length=max_length)
    if max_length is not None:
        check_length(module, max_length, "max_length")
    return SentenceEncoder(module, source=str(path))


def train(config: str | Path | dict[str, Any] | None = None, *overrides: str, method: str | None = None,
          resume: bool = False, results: str | Path | None = None, progress: bool = True) -> Path:
    """Train as ``cselab train`` does and return the directory of the saved (dev-selected) model.

    ``config`` is a YAML preset (``configs/<method>/<preset>.yaml``), a mapping of the same sections, or
    None (then ``method`` and the overrides say everything); ``overrides`` are ``KEY=VALUE`` strings
    (``"train.lr=1e-5"``). Twin methods with a pipeline block run both stages. ``progress`` prints what the run
    does (stdout) and shows its bars (stderr), as ``cselab train`` does; ``False``: nothing.
    """
    if not (config is None or isinstance(config, Mapping)):
        if not isinstance(config, (str, os.PathLike)):
            raise UsageError(f"config: {config!r} is not a YAML file, a mapping of sections or None")
        check_path(config, "config")
    for text in overrides:
        if not isinstance(text, str):
            raise UsageError(f"overrides: {text!r} is not a KEY=VALUE string")
    check_text(method, "method", optional=True)
    check_flag(resume, "resume")
    check_flag(progress, "progress")
    check_path(results, "results", optional=True)

    from cselab.config.run_config import RunConfig, apply_overrides, load_config, validate
    from cselab.training.run_directory import BEST_DIR
    from cselab.training.runs import train_and_record

    if isinstance(config, Mapping):
        raw = apply_overrides(copy.deepcopy(dict(config)), list(overrides))  # the caller's mapping is never changed
        if method is not None:
            raw["method"] = method
        run_config = validate(RunConfig, raw)
        source = None
    else:
        run_config = load_config(config, list(overrides), method=method)
        source = str(config) if config else None
    with reporting(console() if progress else QUIET):
        train_and_record(run_config, resume=resume, results_file=Path(results) if results else None,
                         config_source=source, overrides=list(overrides))
    if run_config.method_options.get("pipeline"):
        from cselab.training.pipeline import plan_pipeline

        return Path(plan_pipeline(run_config).stage2.train.output_dir) / BEST_DIR
    return Path(run_config.train.output_dir) / BEST_DIR


def adapt(text: str | Path, output: str | Path, *, model: str | Path = "all-MiniLM-L6-v2",
          teacher: str | Path | None = None, no_teacher: bool = False, task: str | None = None,
          recipe: str | Path | None = None,
          steps: int | None = None, seed: int = 1, max_sentences: int | None = None, device: str = "auto",
          labels: str | Path | None = None, pairs: str | Path | None = None, retrieval: str | Path | None = None,
          domain: str | None = None, resume: bool = False, progress: bool = True) -> Any:
    """Adapt ``model`` to the unlabelled ``text`` (one sentence per line) as ``cselab adapt`` does, into the run
    directory ``output``, and return the result (:class:`cselab.adaptation.AdaptResult`): ``.model_dir`` is the
    model handed back (``output/model``), ``.before`` / ``.after`` the scores on the labelled files given
    (``labels``, ``pairs``, ``retrieval``, ``domain``), ``.report`` the report. The arguments are the command's
    options, checked by its rules before anything is written; ``progress`` prints what the run does and shows its
    bars, as the command does; ``False``: nothing."""
    check_path(text, "text")
    check_path(output, "output")
    check_path(model, "model")
    check_path(teacher, "teacher", optional=True)
    check_flag(no_teacher, "no_teacher")
    check_text(task, "task", optional=True)
    check_path(recipe, "recipe", optional=True)
    check_optional_int(steps, "steps")
    check_int(seed, "seed", minimum=0)
    check_optional_int(max_sentences, "max_sentences")
    refuse_both(("--task", task), ("--recipe", recipe),
                "--task picks the recipe cselab measured best for that task, --recipe gives another")
    check_text(device, "device")
    for name, value in (("labels", labels), ("pairs", pairs), ("retrieval", retrieval)):
        check_path(value, name, optional=True)
    check_text(domain, "domain", optional=True)
    check_flag(resume, "resume")
    check_flag(progress, "progress")
    from cselab.adaptation import adapt as adapt_text
    from cselab.runtime.devices import set_inference_device

    set_inference_device(device)
    with reporting(console() if progress else QUIET):
        return adapt_text(text, output, recipe=recipe, model=str(model),
                          teacher=None if teacher is None else str(teacher), no_teacher=no_teacher, task=task,
                          steps=steps, seed=seed, max_sentences=max_sentences, device=device, labels=labels,
                          pairs=pairs, retrieval=retrieval, domain=domain, resume=resume)


def evaluate(model: str | Path | SentenceEncoder | Any, tasks: Sequence[str] = ("stsb",), *,
             splits: Sequence[str] = ("test",), batch_size: int = 128) -> dict[str, dict[str, float]]:
    """Scores ``task -> split -> score`` (x 100). cselab's STS tasks (``stsb``, ``sts12-part`` ... ``sts17-en``,
    ``all``) use its SentEval-style evaluator on the given ``splits``; any other name is run as an mteb task
    (needs ``pip install cselab[mteb]``; STSBenchmark and the zero-shot tasks use local data). ``tasks`` and
    ``splits`` are lists of names or comma-separated strings, as ``cselab eval --tasks/--splits`` take them."""
    names = check_names(tasks, "tasks")
    split_names = check_names(splits, "splits")
    bad = [s for s in split_names if s not in SPLITS]
    if bad:  # the message of `cselab eval --splits`
        raise UsageError(f"unknown split {bad[0]!r}; choose from: {', '.join(SPLITS)}")
    check_int(batch_size, "batch_size")
    if not isinstance(model, (SentenceEncoder, str, os.PathLike)) and not (
            callable(getattr(model, "encode", None)) and hasattr(model, "hidden_size")):
        raise UsageError(f"model: a {type(model).__name__} is not a model path, a SentenceEncoder or a sentence model")

    from cselab.data.evalsets.sts import DEFAULT_TASKS, TASK_NAMES
    from cselab.evaluation.sts_evaluator import StsEvaluator

    loaded = model.model if isinstance(model, SentenceEncoder) else (
        load_model(model).model if isinstance(model, (str, os.PathLike)) else model)
    names = list(DEFAULT_TASKS) if names == ["all"] else names
    sts = [t for t in names if t in TASK_NAMES]
    other = [t for t in names if t not in TASK_NAMES]
    scores: dict[str, dict[str, float]] = {}
    if sts:
        evaluator = StsEvaluator.from_names(sts, split_names, batch_size=batch_size)
        scores.update(evaluator(loaded).table())
    if other:
        try:
            from cselab.evaluation.mteb_adapter import run_mteb
        except ImportError as exc:
            raise CselabError(f"{', '.join(other)}: not a cselab STS task, and mteb is not installed "
                              f"for other tasks ({exc}): pip install 'cselab[mteb]'") from exc
        scores.update(run_mteb(loaded, other, batch_size=batch_size))
    return scores


def reproduce(method: str, backbone: str = "bert-base-uncased", *overrides: str, seeds: Sequence[int] = (1,),
              preset: str | None = None, output_dir: str | Path | None = None, senteval_dir: str | Path | None = None,
              sts: str = "auto", from_dir: str | Path | None = None, rtt_models: Mapping[str, str] | None = None,
              fetch: bool = True, progress: bool = True) -> Any:
    """A paper's row, as ``cselab reproduce`` makes it: fetch (and round-trip translate) what the preset needs,
    train every seed, score the seven STS tasks in SentEval's "all" setting (the partial sets, marked, when SentEval's
    data cannot be had) and compare with the paper's figures. Returns a
    :class:`~cselab.research.experiments.reproduce.ReproduceResult`: ``rows`` (task, paper, ours, std over the
    seeds, the set scored, ``difference``), ``scores`` (seed -> task -> score), ``estimate_s`` and ``wall_s``; None on
    the other ranks of a torchrun launch. ``progress`` prints the plan, the time estimate and the runs."""
    check_text(method, "method")
    check_text(backbone, "backbone")
    for text in overrides:
        if not isinstance(text, str):
            raise UsageError(f"overrides: {text!r} is not a KEY=VALUE string")
    check_text(preset, "preset", optional=True)
    check_path(output_dir, "output_dir", optional=True)
    check_path(senteval_dir, "senteval_dir", optional=True)
    check_path(from_dir, "from_dir", optional=True)
    check_flag(fetch, "fetch")
    check_flag(progress, "progress")
    from cselab.research.experiments.reproduce import check_rtt_models, check_seeds
    from cselab.research.experiments.reproduce import reproduce as reproduce_row

    seeds = check_seeds(list(seeds) if isinstance(seeds, tuple) else seeds)  # the CLI's rules for --seeds
    models = check_rtt_models(rtt_models) if rtt_models is not None else {}  # and for --rtt-models
    with reporting(console() if progress else QUIET):
        return reproduce_row(method, backbone, seeds=seeds, preset=preset, overrides=list(overrides),
                             out_dir=output_dir, senteval_dir=senteval_dir, sts=sts, from_dir=from_dir,
                             rtt_models=models, fetch=fetch)
