"""Domain evaluation: score a model on the user's own labelled files, or on a domain of the suite, with mteb.

:func:`evaluate_domain` is the one entry point (``cselab eval MODEL --labels/--pairs/--retrieval/--domain``).
What each file holds and how it is checked: :mod:`cselab.evaluation.domain_files`; how each task is scored
(mteb's own task types and evaluators): :mod:`cselab.evaluation.domain_tasks`. In short:

========================  =========================================  ==============================
input                     task (mteb)                                score (x100)
========================  =========================================  ==============================
``--labels FILE``         ``clustering``: k-means                    V-measure
                          ``classification``: logistic regression    accuracy, 5-fold cross-validated
``--pairs FILE``          ``sts``: cosine similarity                 Spearman
``--retrieval DIR``       ``retrieval``: cosine ranking              nDCG@10
========================  =========================================  ==============================

Every file is read and checked before the model loads, so a malformed line costs no model time.
A suite domain (``cselab data fetch domains``, :mod:`cselab.data.evalsets.domains`) is the same files under
``$CSELAB_HOME/domains/<name>/``; ``domain=NAME`` scores them.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cselab.errors import CselabError, UsageError, check_flag, check_int, check_path, check_text
from cselab.evaluation.domain_files import (
    LabelledTexts,
    RetrievalSet,
    ScoredPairs,
    read_labels,
    read_pairs,
    read_retrieval,
)
from cselab.fileio import write_atomic
from cselab.reporter import report, reporting

TASKS = ("clustering", "classification", "sts", "retrieval")
MAIN_METRIC = {"clustering": "v_measure", "classification": "accuracy", "sts": "cosine_spearman",
               "retrieval": "ndcg_at_10"}


@dataclass(frozen=True)
class DomainInputs:
    """The checked files of one evaluation (any of them may be absent)."""

    labels: LabelledTexts | None = None
    pairs: ScoredPairs | None = None
    retrieval: RetrievalSet | None = None
    domain: str | None = None

    @property
    def tasks(self) -> list[str]:
        return ([*(("clustering", "classification") if self.labels else ()), *(("sts",) if self.pairs else ()),
                 *(("retrieval",) if self.retrieval else ())])

    def summary(self) -> dict[str, Any]:
        """What was scored: files and sizes (for reports)."""
        out: dict[str, Any] = {"domain": self.domain} if self.domain else {}
        if self.labels:
            out["labels"] = {"file": str(self.labels.path), "items": len(self.labels.texts),
                             "labels": self.labels.counts()}
        if self.pairs:
            out["pairs"] = {"file": str(self.pairs.path), "pairs": len(self.pairs.scores)}
        if self.retrieval:
            out["retrieval"] = {"dir": str(self.retrieval.path), "queries": len(self.retrieval.queries),
                                "judged_queries": self.retrieval.judged_queries(),
                                "documents": len(self.retrieval.corpus)}
        return out


def load_inputs(labels: str | Path | None = None, pairs: str | Path | None = None,
                retrieval: str | Path | None = None, *, domain: str | None = None,
                home: Path | None = None) -> DomainInputs:
    """Read and check the files (or the suite domain ``domain``'s files); CselabError on the first problem."""
    if domain is not None:
        if labels is not None or pairs is not None or retrieval is not None:
            raise CselabError("give a suite domain or your own files (--labels/--pairs/--retrieval), not both")
        from cselab.data.evalsets.domains import domain_files

        files = domain_files(domain, home)
        labels, pairs, retrieval = files.get("labels"), files.get("pairs"), files.get("retrieval")
    if labels is None and pairs is None and retrieval is None:
        raise CselabError("nothing to score: give --labels FILE, --pairs FILE, --retrieval DIR or --domain NAME")
    return DomainInputs(labels=read_labels(labels) if labels is not None else None,
                        pairs=read_pairs(pairs) if pairs is not None else None,
                        retrieval=read_retrieval(retrieval) if retrieval is not None else None,
                        domain=domain)


def build_tasks(inputs: DomainInputs, seed: int = 42) -> dict[str, Any]:
    """Our task name -> the mteb task object over the inputs."""
    from cselab.evaluation.domain_tasks import (
        DomainClassification,
        DomainClustering,
        DomainRetrieval,
        DomainSTS,
    )

    tasks: dict[str, Any] = {}
    if inputs.labels:
        tasks["clustering"] = DomainClustering(inputs.labels, seed=seed)
        tasks["classification"] = DomainClassification(inputs.labels, seed=seed)
    if inputs.pairs:
        tasks["sts"] = DomainSTS(inputs.pairs, seed=seed)
    if inputs.retrieval:
        tasks["retrieval"] = DomainRetrieval(inputs.retrieval, seed=seed)
    return tasks


def _mteb() -> Any:
    try:
        import mteb
    except ImportError as exc:
        raise CselabError(f"domain evaluation runs mteb, which is not installed ({exc}): "
                          "pip install 'cselab[mteb]'") from exc
    return mteb


def score_inputs(model: Any, inputs: DomainInputs, *, pooler: str | None = None, batch_size: int = 64,
                 precision: str = "fp32", seed: int = 42,
                 tasks: Sequence[str] | None = None, desc: str = "scoring") -> dict[str, float]:
    """Run mteb on the checked inputs; task -> main score x 100 (2 decimals). ``tasks`` limits the run to
    some of the inputs' tasks (e.g. only a domain's main task). One bar, ``desc``, counts the tasks if the reporter
    in effect shows bars (:mod:`cselab.reporter`); mteb's and the datasets library's own bars never show (a
    person reads one bar per phase, not mteb's "Searching corpus chunks" twice)."""
    mteb = _mteb()
    from cselab.evaluation.domain_tasks import CachedEncoder
    from cselab.evaluation.mteb_adapter import as_mteb_encoder
    from cselab.runtime.precision import autocast_context, inference_precision

    all_tasks = build_tasks(inputs, seed=seed)
    if tasks is not None:
        unknown = sorted(set(tasks) - set(all_tasks))
        if unknown:
            raise CselabError(f"task(s) {', '.join(unknown)} not among the inputs' tasks ({', '.join(all_tasks)})")
    chosen = {name: task for name, task in all_tasks.items() if tasks is None or name in tasks}
    encoder = CachedEncoder(as_mteb_encoder(model, pooler=pooler))  # each distinct text embedded once for all the tasks
    context = contextlib.nullcontext()
    if precision != "fp32":  # bf16 / auto as `cselab eval` does it
        if getattr(encoder.model, "kind", None) == "export":
            raise CselabError(f"precision {precision!r}: an export's precision was fixed when it was written (int8: "
                              "cselab export --quantize int8); score it in fp32, or the torch model in bf16")
        choice = inference_precision(precision, encoder.model, batch_size)
        context = autocast_context(choice.precision, next(encoder.model.parameters()).device)
    bar = report().bar(total=len(chosen), desc=desc, unit="task")
    results = []
    with context, _library_bars_off(), reporting(report().with_bars(False)):
        for task in chosen.values():
            results += mteb.evaluate(encoder, [task], cache=None, show_progress_bar=False,
                                     encode_kwargs={"batch_size": batch_size, "show_progress_bar": False}).task_results
            bar.update(1)
    bar.close()
    by_name = {r.task_name: r for r in results}
    scores = {}
    for name, task in chosen.items():
        split = task.metadata.eval_splits[0]
        scores[name] = round(100 * float(by_name[task.metadata.name].get_score(splits=[split])), 2)
    return scores


@contextlib.contextmanager
def _library_bars_off() -> Iterator[None]:
    """The datasets library's progress bars (mteb's ``map`` calls show one each) off, as they were afterwards."""
    try:
        from datasets.utils import logging as datasets_logging
    except ImportError:
        yield
        return
    was_on = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            datasets_logging.enable_progress_bar()


def evaluate_domain(model: Any, labels: str | Path | None = None, pairs: str | Path | None = None,
                    retrieval: str | Path | None = None, *, domain: str | None = None, home: Path | None = None,
                    pooler: str | None = None, batch_size: int = 64, precision: str = "fp32",
                    progress: bool = False) -> dict[str, float]:
    """Score ``model`` (a path or name ``cselab.load_model`` takes, or a loaded model) on the user's files or on
    the suite domain ``domain``; returns task -> main score x 100, for the tasks the inputs give (``clustering``
    and ``classification`` from labels, ``sts`` from pairs, ``retrieval`` from a retrieval directory).

    Every argument is checked before any work (a misuse is :class:`UsageError`, one line), and every file before the
    model loads (:class:`CselabError` naming file and line). ``progress`` shows mteb's bars (on stderr)."""
    _check_arguments(model, labels=labels, pairs=pairs, retrieval=retrieval, domain=domain, home=home,
                     pooler=pooler, batch_size=batch_size, precision=precision)
    check_flag(progress, "progress")
    inputs = load_inputs(labels, pairs, retrieval, domain=domain, home=home)
    with reporting(report().with_bars(progress)):
        return score_inputs(model, inputs, pooler=pooler, batch_size=batch_size, precision=precision)


def _check_arguments(model: Any, *, labels: Any, pairs: Any, retrieval: Any, domain: Any, home: Any, pooler: Any,
                     batch_size: Any, precision: Any) -> None:
    """:func:`evaluate_domain`'s arguments, with the rules of ``cselab eval``'s options (:mod:`cselab.errors`)."""
    from cselab.runtime.precision import PRECISIONS

    if isinstance(model, (str, os.PathLike)):
        check_path(model, "model")
    elif not callable(getattr(model, "encode", None)):
        raise UsageError(f"model: a {type(model).__name__} is not a model path, a SentenceEncoder or a sentence model")
    for name, value in (("labels", labels), ("pairs", pairs), ("retrieval", retrieval), ("home", home)):
        check_path(value, name, optional=True)
    check_text(domain, "domain", optional=True)
    check_text(pooler, "pooler", optional=True)
    check_int(batch_size, "batch_size")
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise UsageError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")


def evaluate_inputs(model_name: str, inputs: DomainInputs, *, pooler: str | None = None, batch_size: int = 64,
                    max_length: int | None = None, precision: str = "fp32",
                    output: Path | None = None, backend: str = "torch") -> tuple[dict[str, float], float]:
    """``cselab eval MODEL --labels/--pairs/--retrieval/--domain``: load ``model_name`` (once mteb is known to be
    installed; ``backend`` onnx/openvino for a directory ``cselab export`` wrote), score it on the checked
    ``inputs`` and, when ``output`` is given, write the report (:func:`domain_report`) there; on any error nothing
    is written. Returns (task -> score, wall seconds)."""
    _mteb()
    from cselab.evaluation.mteb_adapter import MtebEncoder

    if backend != "torch":
        from cselab.export import load_for_backend

        loaded = load_for_backend(model_name, backend, pooler=pooler, max_length=max_length, precision=precision)
    else:
        from cselab.models.encoder import check_length
        from cselab.models.sentence_model import load_model

        loaded = load_model(model_name, pooler=pooler, max_length=max_length)
        if max_length is not None:
            check_length(loaded, max_length, "--max-length")
    encoder = MtebEncoder(loaded, name=Path(model_name).name or model_name)
    with Timer() as timer:
        scores = score_inputs(encoder, inputs, batch_size=batch_size, precision=precision)
    if output is not None:
        details = domain_report(model_name, inputs, scores, timer.s, pooler=pooler or getattr(loaded, "pooler", None),
                                batch_size=batch_size, max_length=max_length, precision=precision, backend=backend)
        write_atomic(output, json.dumps(details, indent=2) + "\n")
    return scores, timer.s


def domain_report(model_name: str, inputs: DomainInputs, scores: dict[str, float], wall_s: float,
                  **settings: Any) -> dict[str, Any]:
    """The JSON report of a domain evaluation (``cselab eval ... --output``)."""
    from importlib.metadata import version

    from cselab.provenance import provenance

    return {"model": model_name, "scores": scores, "metrics": {t: MAIN_METRIC[t] for t in scores},
            "inputs": inputs.summary(), "wall_s": round(wall_s, 1),
            "settings": {**settings, "mteb": version("mteb"), "seed": 42,
                         "classification": "logistic regression, 5-fold cross-validation (KFold, shuffled)",
                         "clustering": "k-means, 10 initialisations"},
            **provenance()}


def render_scores(model_name: str, inputs: DomainInputs, scores: dict[str, float]) -> str:
    """A plain-text table: task, metric, score, what it was scored on."""
    summary = inputs.summary()
    where = {"clustering": summary.get("labels"), "classification": summary.get("labels"),
             "sts": summary.get("pairs"), "retrieval": summary.get("retrieval")}

    def size(task: str) -> str:
        info = where[task] or {}
        if task == "retrieval":
            return f"{info['judged_queries']} queries, {info['documents']} documents"
        if task == "sts":
            return f"{info['pairs']} pairs"
        return f"{info['items']} items, {len(info['labels'])} labels"

    head = f"model: {model_name}" + (f"  domain: {inputs.domain}" if inputs.domain else "")
    lines = [head, f"{'task':<16}{'metric':<17}{'score':>7}  data"]
    lines += [f"{task:<16}{MAIN_METRIC[task]:<17}{score:>7.2f}  {size(task)}" for task, score in scores.items()]
    return "\n".join(lines)


class Timer:
    """Wall time of a block (seconds in ``.s``)."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.s = time.perf_counter() - self.start
