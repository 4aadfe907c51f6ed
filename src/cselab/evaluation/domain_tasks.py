"""mteb tasks over the user's own files (see :mod:`cselab.evaluation.domain`): mteb's task types, evaluators and
scores, with the data handed in instead of downloaded.

- :class:`DomainClustering` (mteb's ``AbsTaskClusteringLegacy``, which clusters all items at once): every item
  is embedded, scikit-learn's k-means (as many clusters as labels, 10 initialisations, seed 42) clusters them,
  mteb scores the V-measure against the labels.
- :class:`DomainClassification` (:class:`mteb.abstasks.AbsTaskClassification` in its cross-validation mode):
  logistic regression on frozen embeddings, mteb's 5-fold cross-validation (scikit-learn ``KFold``, shuffled
  with the task's seed 42; not stratified), every training row of a fold used; accuracy is the mean over folds.
- :class:`DomainSTS` (:class:`mteb.abstasks.AbsTaskSTS`): Spearman correlation of the cosine similarities with
  the gold scores.
- :class:`DomainRetrieval` (:class:`mteb.abstasks.AbsTaskRetrieval`): the corpus is ranked by cosine for every
  query; nDCG@10 over the queries that have a relevant document (relevance > 0; mteb would score the others 0).

mteb is an optional extra; importing this module without it raises ImportError.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict
from mteb._create_dataloaders import create_dataloader
from mteb._evaluators import ClusteringEvaluator
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.sts import AbsTaskSTS
from mteb.abstasks.task_metadata import TaskMetadata
from sklearn.cluster import KMeans
from sklearn.exceptions import UndefinedMetricWarning

from cselab.evaluation.domain_files import LabelledTexts, RetrievalSet, ScoredPairs
from cselab.evaluation.mteb_adapter import MtebEncoder

CV_FOLDS = 5
KMEANS_INITS = 10
CV_SPLIT = "train"  # mteb's cross-validation runs on the task's train split


def _metadata(name: str, task_type: str, main_score: str, split: str, description: str) -> TaskMetadata:
    return TaskMetadata(
        name=name, description=description, reference=None,
        dataset={"path": f"cselab/{name}", "revision": "local"},
        type=task_type, category="t2t" if task_type in ("Retrieval", "STS") else "t2c", modalities=["text"],
        eval_splits=[split], eval_langs=["eng-Latn"], main_score=main_score, date=None, domains=None,
        task_subtypes=None, license="not specified", annotations_creators=None, dialect=[], sample_creation=None,
        bibtex_citation="",
    )


def label_ids(labels: list[str]) -> list[int]:
    """Labels as integers (their rank in sorted order): mteb scores a two-label fold's average precision with
    scikit-learn, which needs numeric labels."""
    ids = {label: i for i, label in enumerate(sorted(set(labels)))}
    return [ids[label] for label in labels]


class _GivenData:
    """Mixin: the task's data is handed to the constructor (``data_loaded`` from the start)."""

    def _given(self, dataset: Any) -> None:
        self.dataset = dataset
        self.data_loaded = True

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:  # the data is already there
        return None


class KMeansEvaluator(ClusteringEvaluator):
    """mteb's clustering evaluator with scikit-learn's full k-means (``KMeans``, k-means++, :data:`KMEANS_INITS`
    initialisations, the best kept) in place of one mini-batch k-means run: see :class:`DomainClustering`."""

    def __call__(self, model: Any, *, encode_kwargs: Any, num_proc: int | None = None) -> list[int]:
        loader = create_dataloader(self.dataset, task_metadata=self.task_metadata,
                                   input_column=self.input_column_name, num_proc=num_proc, **encode_kwargs)
        embeddings = model.encode(loader, task_metadata=self.task_metadata, hf_subset=self.hf_subset,
                                  hf_split=self.hf_split, **encode_kwargs)
        labels = self.dataset[self.label_column_name]
        kmeans = KMeans(n_clusters=len(set(labels)), n_init=KMEANS_INITS, random_state=self.seed)
        return kmeans.fit_predict(np.asarray(embeddings)).tolist()


class DomainClustering(_GivenData, AbsTaskClusteringLegacy):
    """k-means V-measure of a labels file's items against its labels: mteb's clustering task (the one that
    clusters every item at once) and its V-measure, with scikit-learn's full k-means.

    Why not mteb's default clustering: it runs ONE mini-batch k-means initialisation per experiment, which
    lands in a poor local optimum often. On bbc-news with all-MiniLM-L6-v2 its experiments ranged from 56 to 83
    (mean of 10: 66.7, standard deviation 7); full k-means with 10 initialisations gives 86.4 to 86.9 over seven
    seeds (86.88 with the task's seed 42), so a change of one point is visible."""

    metadata = _metadata("DomainClustering", "Clustering", "v_measure", "test",
                         "k-means clustering of the user's labelled texts")
    evaluator = KMeansEvaluator

    def __init__(self, data: LabelledTexts, seed: int = 42) -> None:
        super().__init__(seed=seed)
        # mteb's format: each row of the split is one set to cluster; here one set, all the items
        self._given(DatasetDict({"test": Dataset.from_dict({"sentences": [data.texts],
                                                            "labels": [label_ids(data.labels)]})}))


class DomainClassification(_GivenData, AbsTaskClassification):
    """Logistic-regression accuracy of a labels file, 5-fold cross-validated."""

    metadata = _metadata("DomainClassification", "Classification", "accuracy", CV_SPLIT,
                         "logistic regression on frozen embeddings of the user's labelled texts, 5-fold")
    is_cross_validation = True
    n_splits = CV_FOLDS

    def __init__(self, data: LabelledTexts, seed: int = 42) -> None:
        super().__init__(seed=seed)
        self.samples_per_label = len(data.texts)  # mteb undersamples each fold's training rows; keep them all
        self._given(DatasetDict({CV_SPLIT: Dataset.from_dict({"text": data.texts, "label": label_ids(data.labels)})}))

    def _calculate_scores(self, y_test: Any, y_pred: Any) -> Any:
        """mteb's scores of one fold. mteb adds average precision when a fold's test rows hold exactly two labels
        and then assumes they are 0 and 1 (scikit-learn raises otherwise), which a fold of a task with more labels
        need not be: such a fold is recoded one-to-one (its two labels to 0 and 1, the others to negative ids)
        first, which leaves accuracy and the F1 / precision / recall figures as they are."""
        present = sorted({int(y) for y in y_test})
        if len(present) == 2 and present != [0, 1]:
            others = sorted({int(y) for y in (*y_test, *y_pred)} - set(present))
            code = {present[0]: 0, present[1]: 1, **{label: -1 - i for i, label in enumerate(others)}}
            y_test, y_pred = [code[int(y)] for y in y_test], [code[int(y)] for y in y_pred]
        # a small label that no row of a fold is predicted as has no precision; scikit-learn warns once per fold
        # and figure, which floods the output of a task with many small labels (the score is accuracy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return super()._calculate_scores(y_test, y_pred)


class DomainSTS(_GivenData, AbsTaskSTS):
    """Cosine Spearman of a pairs file."""

    metadata = _metadata("DomainSTS", "STS", "cosine_spearman", "test", "similarity of the user's sentence pairs")

    def __init__(self, data: ScoredPairs, seed: int = 42) -> None:
        super().__init__(seed=seed)
        self.min_score, self.max_score = min(data.scores), max(data.scores)  # mteb rescales to [0, 1]
        self._given(DatasetDict({"test": Dataset.from_dict({"sentence1": data.sentences1, "sentence2": data.sentences2,
                                                            "score": data.scores})}))


class DomainRetrieval(_GivenData, AbsTaskRetrieval):
    """nDCG@10 of a retrieval directory."""

    metadata = _metadata("DomainRetrieval", "Retrieval", "ndcg_at_10", "test", "search in the user's documents")

    def __init__(self, data: RetrievalSet, seed: int = 42) -> None:
        super().__init__(seed=seed)
        queries = Dataset.from_dict({"id": list(data.queries), "text": list(data.queries.values())})
        corpus = Dataset.from_dict({"id": list(data.corpus), "text": list(data.corpus.values())})
        # only the queries with a relevant document are scored (mteb would count the others as nDCG 0)
        judged = {q: docs for q, docs in data.qrels.items() if any(r > 0 for r in docs.values())}
        self._given({"default": {"test": {"corpus": corpus, "queries": queries, "relevant_docs": judged,
                                          "top_ranked": None}}})


class CachedEncoder(MtebEncoder):
    """An mteb encoder that embeds each distinct text once per evaluation: clustering and classification of one
    labels file (and queries that are also documents) share their embeddings instead of encoding twice."""

    def __init__(self, inner: MtebEncoder) -> None:
        self.model = inner.model
        self.mteb_model_meta = inner.mteb_model_meta
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, inputs: Any, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self.model.encode(missing, batch_size=int(kwargs.get("batch_size") or 64)).float().numpy()
            self._cache.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, int(getattr(self.model, "hidden_size", 0) or 0)), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])
