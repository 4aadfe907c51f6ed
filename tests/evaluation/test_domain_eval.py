"""Domain evaluation from the user's own files (cselab eval --labels/--pairs/--retrieval), checked against
numbers computed here independently of mteb, and the one-line errors of malformed files."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

pytest.importorskip("mteb", reason="mteb is not installed (pip install 'cselab[mteb]')")

from cselab.cli import main  # noqa: E402
from cselab.evaluation.domain import evaluate_domain, load_inputs  # noqa: E402
from cselab.evaluation.domain_files import read_labels, read_pairs, read_retrieval  # noqa: E402
from cselab.models.encoder import Encoder  # noqa: E402

NOUNS = ["man", "woman", "dog", "cat", "bird", "horse", "car", "guitar", "piano", "ball", "food", "book"]
VERBS = ["plays", "eats", "runs", "sits", "walks", "rides"]
PLACES = ["park", "road", "street", "house", "water", "grass"]


def _embed(model_dir: Path, texts: list[str]) -> np.ndarray:
    return Encoder.from_pretrained(model_dir, pooler="mean").encode(texts, batch_size=64).float().numpy()


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _labels_file(path: Path, per_label: int = 10) -> Path:
    """Three labels that the words tell apart somewhat: what a tiny random model can still half-separate."""
    rng = random.Random(1)
    rows = []
    for label, place in (("animal", "park"), ("music", "house"), ("traffic", "road")):
        for i in range(per_label):
            rows.append(f"the {rng.choice(NOUNS)} {rng.choice(VERBS)} in the {place} {'big' if i % 2 else 'small'}"
                        f"\t{label}")
    rng.shuffle(rows)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _pairs_file(path: Path, n: int = 30) -> Path:
    rng = random.Random(2)
    rows = [f"a {rng.choice(NOUNS)} {rng.choice(VERBS)}\tthe {rng.choice(NOUNS)} {rng.choice(VERBS)} on the "
            f"{rng.choice(PLACES)}\t{rng.uniform(0, 5):.3f}" for _ in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _retrieval_dir(path: Path) -> Path:
    path.mkdir()
    queries = {f"q{i}": f"a {NOUNS[i]} {VERBS[i % len(VERBS)]}" for i in range(6)}
    corpus = {f"d{i}": f"the {NOUNS[i]} {VERBS[(i + 1) % len(VERBS)]} in the {PLACES[i % len(PLACES)]}"
              for i in range(len(NOUNS))}
    # graded relevance (trec_eval's nDCG: linear gain), one query with two relevant documents, one judged 0 only
    qrels = [("q0", "d0", 1), ("q1", "d1", 2), ("q1", "d7", 1), ("q2", "d2", 1), ("q3", "d9", 1),
             ("q4", "d4", 1), ("q5", "d5", 0)]
    (path / "queries.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in queries.items()), encoding="utf-8")
    (path / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n"
                                               for k, v in corpus.items()), encoding="utf-8")
    (path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in qrels),
                                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def domain_scores(tiny_bert_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("domain-files")
    files = {"labels": _labels_file(root / "labels.tsv"), "pairs": _pairs_file(root / "pairs.tsv"),
             "retrieval": _retrieval_dir(root / "ret")}
    scores = evaluate_domain(str(tiny_bert_dir), pooler="mean", **files)
    return files, scores


def test_scores_are_keyed_by_task(domain_scores):
    _, scores = domain_scores
    assert list(scores) == ["clustering", "classification", "sts", "retrieval"]
    assert all(-100 <= v <= 100 for v in scores.values())


def test_sts_is_spearman_of_cosines(domain_scores, tiny_bert_dir):
    files, scores = domain_scores
    pairs = read_pairs(files["pairs"])
    a, b = _unit(_embed(tiny_bert_dir, pairs.sentences1)), _unit(_embed(tiny_bert_dir, pairs.sentences2))
    by_hand = 100 * spearmanr((a * b).sum(1), pairs.scores).statistic
    assert scores["sts"] == pytest.approx(by_hand, abs=0.006)


def test_retrieval_is_ndcg_at_10_by_hand(domain_scores, tiny_bert_dir):
    files, scores = domain_scores
    data = read_retrieval(files["retrieval"])
    q_ids, d_ids = list(data.queries), list(data.corpus)
    q = _unit(_embed(tiny_bert_dir, list(data.queries.values())))
    d = _unit(_embed(tiny_bert_dir, list(data.corpus.values())))
    per_query = []
    for i, qid in enumerate(q_ids):
        rels = data.qrels.get(qid, {})
        if not any(r > 0 for r in rels.values()):
            continue  # a query without a relevant document is not scored
        ranking = [d_ids[j] for j in np.argsort(-(d @ q[i]), kind="stable")[:10]]
        dcg = sum(rels.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking))
        ideal = sorted(rels.values(), reverse=True)[:10]
        per_query.append(dcg / sum(r / math.log2(rank + 2) for rank, r in enumerate(ideal)))
    assert len(per_query) == 5
    assert scores["retrieval"] == pytest.approx(100 * np.mean(per_query), abs=0.006)


def test_clustering_is_kmeans_v_measure(domain_scores, tiny_bert_dir):
    """Re-done here with scikit-learn: k-means of all items (as many clusters as labels, 10 initialisations,
    seed 42), V-measure against the labels."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    files, scores = domain_scores
    data = read_labels(files["labels"])
    emb = _embed(tiny_bert_dir, data.texts)
    predicted = KMeans(n_clusters=3, n_init=10, random_state=42).fit_predict(emb)
    assert scores["clustering"] == pytest.approx(100 * v_measure_score(data.labels, predicted), abs=0.006)


def test_classification_is_5_fold_logistic_regression_accuracy(domain_scores, tiny_bert_dir):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import KFold

    files, scores = domain_scores
    data = read_labels(files["labels"])
    emb, labels = _embed(tiny_bert_dir, data.texts), np.array(data.labels)
    accuracies = []
    for train, test in KFold(n_splits=5, shuffle=True, random_state=42).split(emb):
        model = LogisticRegression(max_iter=100, random_state=42).fit(emb[train], labels[train])
        accuracies.append(float((model.predict(emb[test]) == labels[test]).mean()))
    assert scores["classification"] == pytest.approx(100 * np.mean(accuracies), abs=0.006)


def test_two_labels_and_folds_with_two_of_three_labels_score(tiny_bert_dir, tmp_path):
    """mteb's average precision of a fold that holds two labels must not break a three-label file."""
    path = tmp_path / "l.tsv"
    rows = [f"the {NOUNS[i % 12]} {VERBS[i % 6]}\t{'ab'[i % 2]}" for i in range(10)]
    path.write_text("\n".join(rows) + "\n")
    assert set(evaluate_domain(str(tiny_bert_dir), labels=path, pooler="mean")) == {"clustering", "classification"}
    path.write_text("\n".join([*rows, *(f"a {n} sits\tc" for n in NOUNS[:5])]) + "\n")
    assert set(evaluate_domain(str(tiny_bert_dir), labels=path, pooler="mean")) == {"clustering", "classification"}


def test_cli_prints_the_table_and_writes_the_report(tiny_bert_dir, tmp_path, capsys):
    labels = _labels_file(tmp_path / "labels.tsv")
    out = tmp_path / "out" / "report.json"
    main(["eval", str(tiny_bert_dir), "--labels", str(labels), "--pooler", "mean", "--output", str(out)])
    printed = capsys.readouterr().out
    assert "clustering" in printed and "v_measure" in printed and "30 items, 3 labels" in printed
    report = json.loads(out.read_text())
    assert set(report["scores"]) == {"clustering", "classification"}
    assert report["inputs"]["labels"]["labels"] == {"animal": 10, "music": 10, "traffic": 10}
    assert {"git", "machine", "date"} <= set(report)
    main(["eval", str(tiny_bert_dir), "--labels", str(labels), "--pooler", "mean", "--json"])
    assert json.loads(capsys.readouterr().out) == report["scores"]


GOOD_LABELS = "".join(f"text {i}\t{'ab'[i % 2]}\n" for i in range(10))


@pytest.mark.parametrize("option, name, content, expected", [
    ("--labels", "l.tsv", "", "labels file {path} is empty"),
    ("--labels", "l.tsv", "\n  \n", "labels file {path} is empty"),
    ("--labels", "l.tsv", GOOD_LABELS + "no tab here\n", "{path}, line 11: no tab"),
    ("--labels", "l.tsv", GOOD_LABELS + "  \tb\n", "{path}, line 11: empty text"),
    ("--labels", "l.tsv", GOOD_LABELS + "text\t \n", "{path}, line 11: empty label"),
    ("--labels", "l.tsv", "".join(f"t {i}\tonly\n" for i in range(8)), "{path}: only one label ('only')"),
    ("--labels", "l.tsv", GOOD_LABELS + "one\tc\n",
     "{path}, line 11: label 'c' has 1 item(s); every label needs at least 5"),
    ("--labels", "l.tsv", b"text\ta\n\xff\xfe bad\tb\n", "{path}, line 2: not UTF-8 text"),
    ("--pairs", "p.tsv", "a\tb\t1\nc\td\n", "{path}, line 2: 2 tab-separated field(s), expected 3"),
    ("--pairs", "p.tsv", "a\tb\t1\nc\td\thigh\n", "{path}, line 2: score 'high' is not a number"),
    ("--pairs", "p.tsv", "a\tb\t1\nc\td\tnan\n", "{path}, line 2: score 'nan' is not a finite number"),
    ("--pairs", "p.tsv", "a\tb\t1\n\t d\t2\n", "{path}, line 2: empty first sentence"),
    ("--pairs", "p.tsv", "a\tb\t1\n", "{path}: only 1 pair"),
    ("--pairs", "p.tsv", "a\tb\t1\nc\td\t1\n", "{path}: every pair has the score 1"),
])
def test_malformed_files_are_one_line_errors(option, name, content, expected, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    out = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exit_info:  # the model does not exist: the file is checked first
        main(["eval", str(tmp_path / "no-model"), option, str(path), "--output", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and expected.format(path=path) in err, err
    assert not out.exists()


def _write_retrieval(root: Path, queries: str, corpus: str, qrels: str, corpus_name: str = "corpus.tsv") -> Path:
    root.mkdir()
    for name, text in (("queries.tsv", queries), (corpus_name, corpus), ("qrels.tsv", qrels)):
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("files, expected", [
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td2\t1\n"), "qrels.tsv, line 1: document id 'd2' is not in corpus.tsv"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q2\td1\t1\n"), "qrels.tsv, line 1: query id 'q2' is not in queries.tsv"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\tyes\n"), "qrels.tsv, line 1: relevance 'yes' is not a number"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\t0.5\n"), "qrels.tsv, line 1: relevance '0.5' must be a whole number"),
    # the evaluator takes C integers: 1e300 ended in its SystemError
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\t1e300\n"),
     "qrels.tsv, line 1: relevance '1e300' must be a whole number from 0 to 1000"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\t1001\n"), "relevance '1001' must be a whole number from 0 to 1000"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\n"), "qrels.tsv, line 1: 2 tab-separated field(s), expected 3"),
    (("q1\tfind a dog\n", "d1\ta dog\n", "q1\td1\t0\n"), "qrels.tsv: no query has a relevant document"),
    (("q1\tfind a dog\nq1\tagain\n", "d1\ta dog\n", "q1\td1\t1\n"),
     "queries.tsv, line 2: id 'q1' again (first on line 1)"),
    (("q1 find a dog\n", "d1\ta dog\n", "q1\td1\t1\n"), "queries.tsv, line 1: no tab"),
    (("q1\tfind a dog\n", "d1\t \n", "q1\td1\t1\n"), "corpus.tsv, line 1: empty text for id 'd1'"),
    (("q1\tfind a dog\n", "", "q1\td1\t1\n"), "corpus file {root}/corpus.tsv is empty"),
    (("q1\tfind a dog\n", '{"_id": "d1", "text": "a dog"}\n{"text": "x"}\n', "q1\td1\t1\n", "corpus.jsonl"),
     "corpus.jsonl, line 2: no \"_id\" (or \"id\")"),
    (("q1\tfind a dog\n", '{"_id": "d1", "text": "a dog"}\nnot json\n', "q1\td1\t1\n", "corpus.jsonl"),
     "corpus.jsonl, line 2: not a JSON object"),
])
def test_malformed_retrieval_dirs_are_one_line_errors(files, expected, tmp_path, capsys):
    root = _write_retrieval(tmp_path / "ret", *files)
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "no-model"), "--retrieval", str(root)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and expected.format(root=root) in err, err


def test_missing_inputs_are_one_line_errors(tmp_path, capsys):
    for args, expected in ((["--labels", str(tmp_path / "none.tsv")], "labels file not found"),
                           (["--retrieval", str(tmp_path)], "has no queries.tsv (or queries.jsonl)"),
                           (["--domain", "bbc-news"], "cselab data fetch domains"),
                           (["--domain", "nope"], "unknown domain 'nope'"),
                           (["--domain", ""], "unknown domain ''")):  # not "no domain": the STS evaluation
        with pytest.raises(SystemExit):
            main(["eval", "m", *args])
        err = capsys.readouterr().err
        assert err.startswith("error: ") and expected in err and err.count("\n") == 1, err


def test_the_highest_relevance_is_read(tmp_path):
    root = _write_retrieval(tmp_path / "ret", "q1\tfind a dog\n", "d1\ta dog\nd2\ta cat\n", "q1\td1\t1000\nq1\td2\t0\n")
    assert read_retrieval(root).qrels == {"q1": {"d1": 1000, "d2": 0}}


def test_reader_details(tmp_path):
    path = tmp_path / "l.tsv"
    path.write_bytes(("\ufeff" + "a\tb\tx\r\n\r\n" + "".join(f"t {i}\t{'yx'[i % 2]}\n" for i in range(9))).encode())
    data = read_labels(path)
    assert data.texts[0] == "a b" and data.labels[0] == "x"  # the label follows the LAST tab; BOM, CRLF, blanks ok
    assert data.counts() == {"x": 5, "y": 5}
    with pytest.raises(Exception, match="not both"):
        load_inputs(labels=path, domain="bbc-news")


def test_a_suite_domain_is_scored_from_its_files(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """--domain NAME reads $CSELAB_HOME/domains/NAME's task file: the same scores as the file given directly;
    the Python API takes a loaded model too."""
    import cselab

    home = tmp_path / "home"
    folder = home / "domains" / "bbc-news"
    folder.mkdir(parents=True)
    (home / "domains" / "manifest.json").write_text("{}")
    (folder / "train.txt").write_text("some text\n")
    labels = _labels_file(folder / "labels.tsv")
    direct = evaluate_domain(str(tiny_bert_dir), labels=labels, pooler="mean")
    model = cselab.load_model(str(tiny_bert_dir), pooler="mean")
    assert cselab.evaluate_domain(model, domain="bbc-news", home=home) == direct
    monkeypatch.setenv("CSELAB_HOME", str(home))
    main(["eval", str(tiny_bert_dir), "--domain", "bbc-news", "--pooler", "mean", "--json"])
    assert json.loads(capsys.readouterr().out) == direct


def test_a_label_never_predicted_does_not_flood_the_output_with_warnings(tmp_path):
    import warnings

    from sklearn.exceptions import UndefinedMetricWarning

    from cselab.evaluation.domain_tasks import DomainClassification

    labels = tmp_path / "labels.tsv"
    labels.write_text("".join(f"text {i}\t{'abc'[i % 3]}\n" for i in range(15)))
    task = DomainClassification(read_labels(labels))
    y_test, y_pred = [0, 1, 2, 2], [0, 1, 1, 1]  # label 2 is never predicted: its precision is undefined
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndefinedMetricWarning)
        scores = task._calculate_scores(y_test, y_pred)
    assert scores["accuracy"] == pytest.approx(2 / 4)  # 2 of 4 right, by hand
    from sklearn.metrics import precision_score

    with pytest.warns(UndefinedMetricWarning):  # what scikit-learn itself does with the same rows
        precision_score(y_test, y_pred, average="macro")
