"""Label-free scores of how like the teacher the student's structure of the held-out text is, not its cosines: the
domain study observes them (``run_domains``' observer) as candidates for ``cselab adapt``'s guard.

* ``neighbour_overlap``: the share of each held-out text's nearest held-out texts the student and the teacher agree on;
* ``partition_agreement``: how alike their k-means partitions of the held-out text are (V-measure x 100).

Higher is better for both. Why: a model can come closer to the teacher's cosines on average while its topics come
apart; these ask about the neighbourhoods and groups a clustering or a search sees. (Observed on news and man pages,
neither told news' loss from man pages' gain: lab/books/domain_study.md. So they stay here, not in the library.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cselab.data.text.neighbour_groups import nearest_neighbours

NEIGHBOURHOOD_SIZE = 10  # the nearest held-out texts whose overlap neighbour_overlap counts
# k-means partitions compared by partition_agreement: a few scales, doubling, none set to a domain's number of labels
PARTITION_CLUSTERS, PARTITION_SEEDS, PARTITION_INITS = (4, 8, 16), (0, 1, 2), 3


def neighbour_overlap(student: Any, teacher: Any, k: int = NEIGHBOURHOOD_SIZE) -> float:
    """The mean over texts of the share of each text's ``k`` nearest other texts by the student's cosine that are
    also among its ``k`` nearest by the teacher's (1: every neighbourhood the same; any widths). Fewer than ``k + 1``
    texts: each text's neighbourhood is every other text."""
    k = min(k, len(student) - 1)
    if k < 1:
        raise ValueError("neighbour_overlap needs at least two texts")
    mine = nearest_neighbours(torch.as_tensor(np.asarray(student, dtype=np.float32)), k)
    theirs = nearest_neighbours(torch.as_tensor(np.asarray(teacher, dtype=np.float32)), k)
    shared = (mine[:, :, None] == theirs[:, None, :]).any(dim=-1).sum(dim=-1)
    return float(shared.double().mean()) / k


def kmeans_partitions(vectors: Any, clusters: Sequence[int] = PARTITION_CLUSTERS,
                      seeds: Sequence[int] = PARTITION_SEEDS) -> list[np.ndarray]:
    """scikit-learn's k-means of the unit ``vectors`` for each number of ``clusters`` and each seed (in that order;
    :data:`PARTITION_INITS` initialisations each): the cluster of every text. A number of clusters not below the
    number of texts becomes one less than it (a small held-out text is still partitioned)."""
    from sklearn.cluster import KMeans

    unit = np.asarray(vectors, dtype=np.float64)
    unit = unit / np.clip(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12, None)
    if len(unit) < 3:
        raise ValueError(f"k-means partitions need at least three texts, got {len(unit)}")
    usable = list(dict.fromkeys(min(c, len(unit) - 1) for c in clusters))
    return [KMeans(n_clusters=c, n_init=PARTITION_INITS, random_state=seed).fit_predict(unit)
            for c in usable for seed in seeds]


def partition_agreement(student: Sequence[np.ndarray], teacher: Sequence[np.ndarray]) -> float:
    """The mean V-measure x 100 of each student partition against the teacher's of the same clusters and seed
    (:func:`kmeans_partitions` of each model's vectors)."""
    from sklearn.metrics import v_measure_score

    if len(student) != len(teacher) or not student:
        raise ValueError("partition_agreement compares as many partitions of each model, at least one")
    return 100.0 * float(np.mean([v_measure_score(t, s) for s, t in zip(student, teacher, strict=True)]))


class TeacherNeighbourhoods:
    """:func:`neighbour_overlap` and :func:`partition_agreement` of the student's vectors of held-out texts with
    the teacher's vectors of them; the teacher's partitions are made once. The student's vectors come from the
    caller (the observer encodes each view once, for the held-out loss and for these)."""

    def __init__(self, teacher_vectors: Any) -> None:
        self.teacher = np.asarray(teacher_vectors, dtype=np.float32)
        self.teacher_partitions = kmeans_partitions(self.teacher)

    def of_vectors(self, student: Any) -> dict[str, float]:
        student = np.asarray(student, dtype=np.float32)
        if len(student) != len(self.teacher):
            raise ValueError(f"{len(student)} student vectors but {len(self.teacher)} teacher vectors")
        return {"neighbour_overlap": neighbour_overlap(student, self.teacher),
                "partition_agreement": partition_agreement(kmeans_partitions(student), self.teacher_partitions)}
