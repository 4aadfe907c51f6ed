"""The user's own evaluation files: readers that check every line before any model loads.

Three formats, UTF-8, one item per line (blank lines are skipped, a UTF-8 byte-order mark is allowed):

- labels, ``text<TAB>label``: at least two labels, each with at least :data:`MIN_ITEMS_PER_LABEL` items (the
  classifier is scored by 5-fold cross-validation, so every label must be able to appear in training and test);
- pairs, ``s1<TAB>s2<TAB>score``: a numeric similarity score, at least two pairs, not all of one score;
- retrieval, a directory with ``queries.tsv`` (``qid<TAB>text``), ``corpus.tsv`` (``did<TAB>text``) and
  ``qrels.tsv`` (``qid<TAB>did<TAB>relevance``, a whole number from 0 to :data:`MAX_RELEVANCE`, an optional BEIR
  header ``query-id corpus-id score``). Queries and corpus may instead be ``queries.jsonl`` / ``corpus.jsonl``
  (``{"_id": ..., "text": ..., "title": ...}``, BEIR's form; ``id`` for ``_id`` works too, a title is put before
  the text).

Every problem is a :class:`~cselab.errors.CselabError` of one line that names the file, the line and what is
wrong. The label text of a labels line is everything after its LAST tab (so a text may hold tabs).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cselab.errors import CselabError

MIN_ITEMS_PER_LABEL = 5
QRELS_HEADER = ("query-id", "corpus-id", "score")
MAX_RELEVANCE = 1000  # graded judgements are small (TREC: 0-4); mteb's evaluator (pytrec_eval) takes C integers


@dataclass(frozen=True)
class LabelledTexts:
    """A labels file: texts and their labels, in file order."""

    path: Path
    texts: list[str]
    labels: list[str]

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(self.labels).items()))


@dataclass(frozen=True)
class ScoredPairs:
    """A pairs file: sentence pairs and their gold similarity."""

    path: Path
    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]


@dataclass(frozen=True)
class RetrievalSet:
    """A retrieval directory: queries and documents by id, and the relevance of (query, document) pairs."""

    path: Path
    queries: dict[str, str]
    corpus: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def judged_queries(self) -> int:
        """Queries with at least one relevant document (the ones the score averages over)."""
        return sum(1 for docs in self.qrels.values() if any(r > 0 for r in docs.values()))


def _lines(path: Path, what: str) -> list[tuple[int, str]]:
    """(line number, line) of the non-blank lines of a UTF-8 file; errors for a missing, binary or empty file."""
    path = Path(path)
    if not path.exists():
        raise CselabError(f"{what} file not found: {path}")
    if not path.is_file():
        raise CselabError(f"{what} file {path} is not a file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CselabError(f"{path}, line {line}: not UTF-8 text (byte {exc.start}); "
                          "convert the file to UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise CselabError(f"{path}, line {line}: a NUL byte; this is not a text file")
    lines = [(i, line.rstrip("\r")) for i, line in enumerate(text.split("\n"), 1)]
    lines = [(i, line) for i, line in lines if line.strip()]
    if not lines:
        raise CselabError(f"{what} file {path} is empty")
    return lines


def _clean(text: str) -> str:
    return " ".join(text.split())


def read_labels(path: str | Path) -> LabelledTexts:
    """Read and check a ``text<TAB>label`` file."""
    path = Path(path)
    texts, labels, first_line = [], [], {}
    for n, line in _lines(path, "labels"):
        if "\t" not in line:
            raise CselabError(f"{path}, line {n}: no tab; each line must be text<TAB>label")
        text, label = line.rsplit("\t", 1)
        text, label = _clean(text), _clean(label)
        if not text:
            raise CselabError(f"{path}, line {n}: empty text before the tab")
        if not label:
            raise CselabError(f"{path}, line {n}: empty label after the last tab")
        texts.append(text)
        labels.append(label)
        first_line.setdefault(label, n)
    counts = Counter(labels)
    if len(counts) < 2:
        raise CselabError(f"{path}: only one label ({labels[0]!r}); clustering and classification need at least 2")
    small = sorted((label for label, c in counts.items() if c < MIN_ITEMS_PER_LABEL), key=first_line.get)
    if small:
        label = small[0]
        raise CselabError(f"{path}, line {first_line[label]}: label {label!r} has {counts[label]} item(s); every label "
                          f"needs at least {MIN_ITEMS_PER_LABEL} (5-fold cross-validation)"
                          + (f", and {len(small) - 1} other label(s) have fewer too" if len(small) > 1 else ""))
    return LabelledTexts(path, texts, labels)


def _number(text: str, path: Path, n: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CselabError(f"{path}, line {n}: {what} {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise CselabError(f"{path}, line {n}: {what} {text.strip()!r} is not a finite number")
    return value


def read_pairs(path: str | Path) -> ScoredPairs:
    """Read and check an ``s1<TAB>s2<TAB>score`` file."""
    path = Path(path)
    first, second, scores = [], [], []
    for n, line in _lines(path, "pairs"):
        fields = line.split("\t")
        if len(fields) != 3:
            raise CselabError(f"{path}, line {n}: {len(fields)} tab-separated field(s), "
                              "expected 3 (s1<TAB>s2<TAB>score)")
        s1, s2 = _clean(fields[0]), _clean(fields[1])
        if not s1 or not s2:
            raise CselabError(f"{path}, line {n}: empty {'first' if not s1 else 'second'} sentence")
        first.append(s1)
        second.append(s2)
        scores.append(_number(fields[2], path, n, "score"))
    if len(scores) < 2:
        raise CselabError(f"{path}: only {len(scores)} pair; a rank correlation needs at least 2")
    if len(set(scores)) < 2:
        raise CselabError(f"{path}: every pair has the score {scores[0]:g}; a rank correlation needs different scores")
    return ScoredPairs(path, first, second, scores)


def _pick(directory: Path, stem: str) -> Path:
    candidates = [directory / f"{stem}.{ext}" for ext in ("tsv", "jsonl") if (directory / f"{stem}.{ext}").is_file()]
    if not candidates:
        raise CselabError(f"{directory} has no {stem}.tsv (or {stem}.jsonl); a retrieval directory needs "
                          "queries, corpus and qrels")
    if len(candidates) > 1:
        raise CselabError(f"{directory} has both {stem}.tsv and {stem}.jsonl; keep one")
    return candidates[0]


def _read_texts(path: Path, what: str) -> dict[str, str]:
    """id -> text of a queries or corpus file (``id<TAB>text`` or BEIR JSONL)."""
    texts: dict[str, str] = {}
    lines: dict[str, int] = {}
    for n, line in _lines(path, what):
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CselabError(f"{path}, line {n}: not a JSON object ({exc.msg})") from None
            if not isinstance(row, dict):
                raise CselabError(f"{path}, line {n}: not a JSON object")
            key = row.get("_id", row.get("id"))
            if key is None:
                raise CselabError(f"{path}, line {n}: no \"_id\" (or \"id\")")
            title, body = row.get("title") or "", row.get("text")
            if not isinstance(body, str) or not isinstance(title, str):
                raise CselabError(f"{path}, line {n}: \"text\" (and \"title\") must be strings")
            key, text = str(key).strip(), _clean(f"{title} {body}")
        else:
            if "\t" not in line:
                raise CselabError(f"{path}, line {n}: no tab; each line must be id<TAB>text")
            key, text = line.split("\t", 1)
            key, text = key.strip(), _clean(text)
        if not key:
            raise CselabError(f"{path}, line {n}: empty id")
        if not text:
            raise CselabError(f"{path}, line {n}: empty text for id {key!r}")
        if key in texts:
            raise CselabError(f"{path}, line {n}: id {key!r} again (first on line {lines[key]})")
        texts[key] = text
        lines[key] = n
    return texts


def read_retrieval(directory: str | Path) -> RetrievalSet:
    """Read and check a retrieval directory (queries, corpus, qrels)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CselabError(f"retrieval directory not found: {directory}" if not directory.exists()
                          else f"{directory} is a file; --retrieval takes a directory with queries, corpus and qrels")
    queries = _read_texts(_pick(directory, "queries"), "queries")
    corpus = _read_texts(_pick(directory, "corpus"), "corpus")
    path = directory / "qrels.tsv"
    if not path.is_file():
        raise CselabError(f"{directory} has no qrels.tsv (qid<TAB>did<TAB>relevance per line)")
    qrels: dict[str, dict[str, int]] = {}
    for index, (n, line) in enumerate(_lines(path, "qrels")):
        fields = [f.strip() for f in line.split("\t")]
        if index == 0 and tuple(f.lower() for f in fields) == QRELS_HEADER:
            continue
        if len(fields) != 3:
            raise CselabError(f"{path}, line {n}: {len(fields)} tab-separated field(s), "
                              "expected 3 (qid<TAB>did<TAB>relevance)")
        qid, did, rel = fields
        if qid not in queries:
            raise CselabError(f"{path}, line {n}: query id {qid!r} is not in {_pick(directory, 'queries').name}")
        if did not in corpus:
            raise CselabError(f"{path}, line {n}: document id {did!r} is not in {_pick(directory, 'corpus').name}")
        value = _number(rel, path, n, "relevance")
        if value != int(value) or not 0 <= value <= MAX_RELEVANCE:
            raise CselabError(f"{path}, line {n}: relevance {rel!r} must be a whole number from 0 to {MAX_RELEVANCE}")
        if did in qrels.get(qid, {}):
            raise CselabError(f"{path}, line {n}: ({qid!r}, {did!r}) judged twice")
        qrels.setdefault(qid, {})[did] = int(value)
    result = RetrievalSet(directory, queries, corpus, qrels)
    if not result.judged_queries():
        raise CselabError(f"{path}: no query has a relevant document (relevance > 0)")
    return result
