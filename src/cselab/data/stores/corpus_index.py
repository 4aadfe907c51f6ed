"""A training corpus of any size read through an on-disk index of its usable lines (flat memory).

:func:`cselab.data.text.corpus.read_corpus` holds every sentence as a Python string (about 170 bytes each,
800 MB at 2M sentences). :func:`open_indexed_corpus` instead keeps ``[start, end)`` byte offsets of the
usable lines in a file of int64 pairs that is memory-mapped, and reads a sentence from the corpus file when a
batch asks for it (``os.pread``), so resident memory does not grow with the corpus.

The index is built once per (corpus file, ``max_words``) in one streaming pass (blocks of 4 MiB: the
line scan is vectorised with numpy for ASCII lines; a line with any non-ASCII byte is decided in Python),
with exactly :func:`read_corpus`'s rules: blank lines, invalid UTF-8 and lines over ``max_words`` words
are skipped and counted; sentences are stripped. It is stored under ``$CSELAB_HOME/corpus-index/`` with a
JSON record of the source's size and modification time, the skipped counts and the SHA-256 of the index;
it is reused only when all of these still match, else rebuilt. Where the home is not writable the index
stays in memory (16 bytes per sentence).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, overload

import numpy as np

from cselab.data.text.corpus import UTF8_BOM, Corpus, utf8_payload
from cselab.errors import CselabError
from cselab.fileio import atomic_path, sha256_file, write_json_atomic
from cselab.paths import cselab_home

INDEX_DIR = "corpus-index"
INDEX_VERSION = 2
BLOCK_BYTES = 4 * 2**20  # < 2**31: the per-block prefix sums are int32
# bytes that Python's str.split()/str.strip() treat as whitespace among ASCII (\x1c-\x1f included)
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


class CorpusLines(Sequence[str]):
    """The usable sentences of a corpus file, read on demand through the offsets ``spans`` ``[n, 2]``."""

    def __init__(self, path: Path, spans: np.ndarray, limit: int | None = None) -> None:
        self.path = path
        self.spans = spans
        self._n = len(spans) if limit is None else min(limit, len(spans))
        self._fd: int | None = None

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> CorpusLines: ...

    def __getitem__(self, index: int | slice) -> str | CorpusLines:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step != 1 or start != 0:
                raise TypeError("a corpus is cut only from its start (corpus[:n])")
            return CorpusLines(self.path, self.spans, stop)
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        start, end = self.spans[index].tolist()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return os.pread(self._fd, end - start, start).decode("utf-8").strip()

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fd": None}  # a file descriptor does not travel to another process


@dataclass(frozen=True)
class ScanCounts:
    sentences: int
    blank: int
    invalid: int
    too_long: int


def scan_corpus(path: Path, max_words: int | None, out: BinaryIO, block_bytes: int = BLOCK_BYTES) -> ScanCounts:
    """One streaming pass over ``path``: the spans of the usable lines go to ``out`` as int64 pairs as they are
    found (memory bounded by the block, whatever the corpus size); returns the counts."""
    sentences = blank = invalid = too_long = 0
    offset = 0  # file offset of ``carry[0]``
    carry = b""
    with open(path, "rb") as f:
        if f.read(len(UTF8_BOM)) == UTF8_BOM:
            offset = len(UTF8_BOM)  # a UTF-8 byte-order mark is not part of the first sentence
        else:
            f.seek(0)
        while True:
            block = f.read(block_bytes)
            data = carry + block
            last = not block
            if last and data and not data.endswith(b"\n"):
                data += b"\n"  # the final line without a newline
            cut = data.rfind(b"\n") + 1
            if cut:
                spans, counts = _scan_lines(data[:cut], offset, max_words)
                out.write(spans.tobytes())
                sentences += len(spans)
                blank, invalid, too_long = blank + counts[0], invalid + counts[1], too_long + counts[2]
            offset += cut
            carry = data[cut:]
            if last:
                break
    return ScanCounts(sentences, blank, invalid, too_long)


def read_spans(file: Path) -> np.ndarray:
    """The ``[n, 2]`` int64 spans of an index file, memory-mapped (nothing is read until used)."""
    if file.stat().st_size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return np.memmap(file, dtype=np.int64, mode="r").reshape(-1, 2)


def _scan_lines(data: bytes, offset: int, max_words: int | None) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Lines of ``data`` (which ends with ``\\n``) starting at file offset ``offset``."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)  # the newline of each line
    starts = np.concatenate(([0], ends[:-1] + 1))
    space = _ASCII_SPACE[raw]
    # per-line counts from prefix sums: non-ASCII bytes, non-space bytes and word starts (a non-space byte
    # after a space byte; the byte before every line is a newline, i.e. a space)
    word_start = ~space & np.concatenate(([True], space[:-1]))
    sums = [np.concatenate(([0], np.cumsum(x, dtype=np.int32))) for x in (raw >= 128, ~space, word_start)]
    non_ascii, non_space, words = (s[ends] - s[starts] for s in sums)
    keep = non_space > 0
    blank = int((~keep & (non_ascii == 0)).sum())
    too_long = 0
    if max_words is not None:
        over = keep & (words > max_words) & (non_ascii == 0)
        too_long = int(over.sum())
        keep &= ~over
    invalid = 0
    for i in np.flatnonzero(non_ascii > 0):  # rare: decided by Python's own rules
        try:
            line = data[starts[i] : ends[i]].decode("utf-8").strip()
        except UnicodeDecodeError:
            invalid += 1
            keep[i] = False
            continue
        if not line:
            blank += 1
            keep[i] = False
        elif max_words is not None and len(line.split()) > max_words:
            too_long += 1
            keep[i] = False
        else:
            keep[i] = True
    spans = np.stack([starts[keep], ends[keep]], axis=1).astype(np.int64) + offset
    return spans, (blank, invalid, too_long)


def index_files(path: Path, max_words: int | None, home: Path | None = None) -> tuple[Path, Path]:
    """Where the index of (``path``, ``max_words``) lives: the spans (raw int64 pairs) and its ``.json`` record."""
    key = hashlib.sha256(json.dumps([str(Path(path).resolve()), max_words]).encode()).hexdigest()[:24]
    index_dir = (home or cselab_home()) / INDEX_DIR
    return index_dir / f"{key}.spans", index_dir / f"{key}.json"


def open_indexed_corpus(path: str | Path, *, max_words: int | None = None, home: Path | None = None) -> Corpus:
    """The corpus at ``path`` with lazily read sentences (:class:`CorpusLines`); builds or reuses its index.

    Same result and errors as :func:`cselab.data.text.corpus.read_corpus`, without holding the sentences.
    """
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"corpus file not found: {path}")
    if max_words is not None and max_words < 1:
        raise CselabError(f"max_words must be at least 1, got {max_words}")
    with open(path, "rb") as f:
        utf8_payload(f.read(4096), path, "corpus file")  # refuses UTF-16/32 and binary files before indexing
    stat = path.stat()
    source = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
              "max_words": max_words, "version": INDEX_VERSION}
    spans_file, record_file = index_files(path, max_words, home)
    record = _valid_record(record_file, spans_file, source)
    if record is not None:
        spans = read_spans(spans_file)
    else:
        try:
            record = _build_index(path, max_words, spans_file, record_file, source)
            spans = read_spans(spans_file)
        except OSError:  # a read-only home: the index stays in memory
            buffer = io.BytesIO()
            counts = scan_corpus(path, max_words, buffer)
            record = _record(source, counts)
            spans = np.frombuffer(buffer.getbuffer(), dtype=np.int64).reshape(-1, 2)
    if not len(spans):
        raise _no_usable_sentence(path, record)
    return Corpus(path, CorpusLines(path, spans), record["blank"], record["invalid_utf8"],  # type: ignore[arg-type]
                  record["too_long"])


def _no_usable_sentence(path: Path, record: dict) -> CselabError:
    return CselabError(
        f"corpus file {path} has no usable sentence ({record['blank']} blank, {record['invalid_utf8']} invalid "
        f"UTF-8, {record['too_long']} over max_words lines skipped)"
    )


def _record(source: dict, counts: ScanCounts) -> dict:
    return {**source, "sentences": counts.sentences, "blank": counts.blank, "invalid_utf8": counts.invalid,
            "too_long": counts.too_long}


def _valid_record(record_file: Path, spans_file: Path, source: dict) -> dict | None:
    """The stored record when it describes this very source and the index file is intact; else None."""
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError):
        return None
    if any(record.get(k) != v for k, v in source.items()) or not spans_file.is_file():
        return None
    if sha256_file(spans_file) != record.get("sha256"):
        return None
    return record


def _build_index(path: Path, max_words: int | None, spans_file: Path, record_file: Path, source: dict) -> dict:
    # unique temporary names + rename: ranks that build the same index at once never see half a file
    with atomic_path(spans_file) as tmp:
        with open(tmp, "wb") as out:
            counts = scan_corpus(path, max_words, out)
        if counts.sentences == 0:  # refused, and no index is left behind for it
            raise _no_usable_sentence(path, _record(source, counts))
        record = {**_record(source, counts), "sha256": sha256_file(tmp)}
    write_json_atomic(record_file, record, indent=1)
    return record
