"""The teacher-likeness scores the domain study observes: neighbour overlap against a per-element loop, partition
agreement against V-measures computed by hand."""

from __future__ import annotations

import numpy as np
import pytest


def test_neighbour_overlap_counts_shared_nearest_texts_as_a_loop_does():
    from lab.domain_study.neighbourhoods import neighbour_overlap

    rng = np.random.default_rng(0)
    student, teacher = rng.normal(size=(30, 5)), rng.normal(size=(30, 8))  # two widths

    def nearest(vectors, i, k):
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cos = [(float(unit[i] @ unit[j]), j) for j in range(len(vectors)) if j != i]
        return {j for _, j in sorted(cos, key=lambda c: -c[0])[:k]}

    expected = np.mean([len(nearest(student, i, 4) & nearest(teacher, i, 4)) / 4 for i in range(30)])
    assert neighbour_overlap(student, teacher, k=4) == pytest.approx(expected, abs=1e-12)
    rotation = np.linalg.qr(rng.normal(size=(5, 5)))[0]  # a rotation keeps every cosine, so every neighbourhood
    assert neighbour_overlap(student @ rotation, student, k=4) == pytest.approx(1.0)
    # three texts: each one's neighbourhood is both others, whatever the models
    assert neighbour_overlap(student[:3], teacher[:3], k=10) == pytest.approx(1.0)


def test_partition_agreement_is_the_v_measure_of_matching_partitions():
    from lab.domain_study.neighbourhoods import (
        TeacherNeighbourhoods,
        kmeans_partitions,
        neighbour_overlap,
        partition_agreement,
    )

    # relabelled partitions agree fully; a partition against one cluster of everything agrees not at all
    same = [np.array([0, 0, 1, 1, 2, 2])], [np.array([2, 2, 0, 0, 1, 1])]
    assert partition_agreement(*same) == pytest.approx(100.0)
    assert partition_agreement([np.array([0, 0, 1, 1, 2, 2])], [np.zeros(6, dtype=int)]) == pytest.approx(0.0)
    # by hand: student {a,b},{c,d} against teacher {a,b,c},{d}: H(T)=H(3/4,1/4), H(T|S)=1/2 bit -> h = 1 - 0.5/H(T);
    # H(S)=1 bit, H(S|T) = 3/4 * H(2/3,1/3) -> c = 1 - that; V = 2hc/(h+c)
    ht = -(0.75 * np.log2(0.75) + 0.25 * np.log2(0.25))
    h = 1 - 0.5 / ht
    c = 1 - 0.75 * -(2 / 3 * np.log2(2 / 3) + 1 / 3 * np.log2(1 / 3))
    assert partition_agreement([np.array([0, 0, 1, 1])], [np.array([0, 0, 0, 1])]) == pytest.approx(
        100 * 2 * h * c / (h + c))
    # four far-apart groups: any k-means with 4 clusters finds them in either model's vectors
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(4, 6)) * 10
    vectors = np.repeat(centres, 10, axis=0) + rng.normal(scale=0.01, size=(40, 6))
    parts = kmeans_partitions(vectors, clusters=(4,), seeds=(0,))
    assert len(parts) == 1 and len(set(parts[0][:10])) == 1 and len(set(parts[0])) == 4
    # ten texts: 4, 8 and 9 clusters (16 becomes one less than the texts), three seeds each
    assert [len(set(p)) for p in kmeans_partitions(vectors[:10])] == [4, 4, 4, 8, 8, 8, 9, 9, 9]

    turned = vectors @ np.linalg.qr(rng.normal(size=(6, 6)))[0]  # the teacher's turned: the same groups
    scores = TeacherNeighbourhoods(vectors).of_vectors(turned)
    assert scores["partition_agreement"] == pytest.approx(100.0)
    assert scores["neighbour_overlap"] == pytest.approx(neighbour_overlap(turned, vectors))
    with pytest.raises(ValueError, match="39 student vectors but 40"):
        TeacherNeighbourhoods(vectors).of_vectors(turned[:39])


def test_article_likeness_records_each_models_likeness_and_clustering(tmp_path, monkeypatch, capsys):
    import json
    from types import SimpleNamespace

    import cselab.evaluation.domain as domain
    import cselab.models.sentence_model as sentence_model
    from lab.domain_study import article_likeness

    rng = np.random.default_rng(2)
    labels = [i // 8 for i in range(40)]  # five topics of eight items, far apart in the teacher's vectors
    teacher = np.repeat(rng.normal(size=(5, 6)) * 10, 8, axis=0) + rng.normal(scale=0.01, size=(40, 6))
    by_name = {"teacher": teacher, "turned": teacher @ np.linalg.qr(rng.normal(size=(6, 6)))[0],
               "noise": rng.normal(size=(40, 6))}

    class Fixed:
        def __init__(self, name):
            self.vectors = by_name[name]

        def eval(self):
            return self

        def encode(self, texts, batch_size=32):
            return self.vectors[: len(texts)]

    monkeypatch.setattr(domain, "load_inputs", lambda domain: SimpleNamespace(
        labels=SimpleNamespace(texts=[f"item {i}" for i in range(40)], labels=labels)))
    monkeypatch.setattr(sentence_model, "load_model", lambda path, max_length=None: Fixed(path))
    out = tmp_path / "likeness.jsonl"
    article_likeness.main(["--domain", "news", "--teacher", "teacher", "--model", "turned=turned",
                           "--model", "noise=noise", "--results", str(out)])
    turned, noise = (json.loads(line) for line in out.read_text().splitlines())
    # the teacher turned keeps its topics: full agreement at the labels' five clusters and a perfect V-measure
    assert turned["partition_agreement_at_labels"] == pytest.approx(100.0)
    assert turned["v_measure"] == pytest.approx(100.0) and turned["teacher_v_measure"] == pytest.approx(100.0)
    from lab.domain_study.neighbourhoods import neighbour_overlap

    assert noise["neighbour_overlap"] == pytest.approx(round(neighbour_overlap(by_name["noise"], teacher), 4))
    assert noise["v_measure"] < 50 and noise["partition_agreement_at_labels"] < 50
    assert "noise: neighbour overlap" in capsys.readouterr().out
    # --table prints the records again, each score's change from the domain's first model
    article_likeness.main(["--table", "--results", str(out)])
    table = capsys.readouterr().out.splitlines()
    assert table[2].startswith(f"| news | turned | {turned['neighbour_overlap']:.3f} | ")
    change = noise["v_measure"] - turned["v_measure"]
    assert table[3].endswith(f"| {noise['v_measure']:.2f} ({change:+.2f}) |")
    with pytest.raises(SystemExit):
        article_likeness.main(["--table", "--results", str(tmp_path / "none.jsonl")])


def test_clustering_seeds_scores_the_model_a_run_kept_and_records_each_kmeans_seed(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    import cselab.evaluation.domain as domain
    import cselab.models.sentence_model as sentence_model
    from cselab.evaluation.domain_tasks import KMEANS_INITS
    from lab.domain_study import clustering_seeds

    rng = np.random.default_rng(3)
    labels = [i // 6 for i in range(24)]
    vectors = np.repeat(rng.normal(size=(4, 5)), 6, axis=0) + rng.normal(scale=0.6, size=(24, 5))
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "adapt.json").write_text("{}")
    loaded = []

    class Fixed:
        def eval(self):
            return self

        def encode(self, texts, batch_size=64):
            return vectors[: len(texts)]

    monkeypatch.setattr(domain, "load_inputs", lambda domain: SimpleNamespace(
        labels=SimpleNamespace(texts=[f"item {i}" for i in range(24)], labels=labels)))
    monkeypatch.setattr(sentence_model, "load_model", lambda path, max_length=None: loaded.append(path) or Fixed())
    out = tmp_path / "seeds.jsonl"
    clustering_seeds.main(["--domain", "news", "--model", f"kept={run}", "--kmeans-seeds", "42,0",
                           "--results", str(out)])
    record = json.loads(out.read_text())
    # the run directory's kept model is what was loaded and what the record names
    assert loaded == [str(run / "best")] and record["path"] == str(run / "best")
    expected = {seed: round(100 * v_measure_score(labels, KMeans(n_clusters=4, n_init=KMEANS_INITS, random_state=seed)
                                                  .fit_predict(vectors)), 2) for seed in (42, 0)}
    assert record["v_measure"] == {str(seed): value for seed, value in expected.items()}
    assert record["mean"] == round((expected[42] + expected[0]) / 2, 2)
