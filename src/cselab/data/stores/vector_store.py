"""Vectors of a text on disk: an ``[N, d]`` float32 array, memory-mapped, filled chunk by chunk and resumable.

A store is a directory holding ``vectors.npy`` (the array, written through :func:`numpy.lib.format.open_memmap`),
``order.npy`` (the order in which rows are filled, fixed when the store is created), ``state.json`` (the
store's key, its shape and how many rows of the order are filled) and, when the rows are vectors of texts,
``texts.txt`` (row i's text on line i), so a reader can find a text's row. A chunk's rows are flushed to disk before
``state.json`` counts them, so a kill at any point loses at most the chunk being computed, and :meth:`fill`
continues from the first row not counted.

What is read back is what was written: ``state.json`` keeps the sha256 of every filled chunk's rows (``checksums``:
``[end, sha256]`` per chunk, ``end`` its last position in the order plus one) and of ``texts.txt``
(``texts_sha256``), and the store is checked against them before its rows are read, continued, or copied
(:meth:`VectorStore.verify`; a file cut short is caught before it is mapped). A store that fails is refused with
:class:`DamagedStore` naming the file; its owner decides whether to compute it again (the teacher pass's cache does)
or to refuse (a run's own store). A store written before the checksums were kept is checked for its shape only.

The key names what the vectors are of (e.g. a model and a text, hashed by :func:`content_key`): a store is reused
only under the key it was created with. Why our own and not a library's: what is needed is one numpy memmap and
one small JSON file, with the resume rule above; a vector database would bring a server or an index we never
query.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import CselabError
from cselab.fileio import replace_directory, staging_directory, write_atomic, write_json_atomic

VECTORS_FILE, ORDER_FILE, STATE_FILE, TEXTS_FILE = "vectors.npy", "order.npy", "state.json", "texts.txt"


class DamagedStore(CselabError):
    """A store whose files are not what was written (a changed or cut file, a checksum that does not match).
    ``problem``: what is wrong, naming the file; the message adds how to compute the vectors again."""

    def __init__(self, problem: str, store: Path) -> None:
        super().__init__(f"{problem}; delete {store} to compute the vectors again")
        self.problem = problem


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _array_file(file: Path, shape: tuple[int, ...], dtype: np.dtype, store: Path) -> None:
    """Refuse a ``.npy`` file whose header is not ``shape``/``dtype`` or that is shorter or longer than its header
    says (a cut file would fail only when it is mapped, with numpy's message)."""
    try:
        with open(file, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            found, fortran, found_dtype = read(handle)
            offset = handle.tell()
    except (OSError, ValueError) as exc:
        raise DamagedStore(f"{file} is damaged ({exc})", store) from None
    if tuple(found) != shape or found_dtype != dtype or fortran:
        raise DamagedStore(f"{file} has shape {tuple(found)} {found_dtype}, not {shape} {dtype}", store)
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    size = file.stat().st_size
    if size != expected:
        raise DamagedStore(f"{file} has {size} bytes, not the {expected} its shape {shape} takes (cut short or "
                           "changed)", store)


def content_key(*parts: str | bytes | Iterable[str]) -> str:
    """A sha256 over ``parts`` (strings, bytes, or sequences of strings, each item length-prefixed so that no two
    different inputs hash alike)."""
    digest = hashlib.sha256()

    def add(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)

    for part in parts:
        if isinstance(part, bytes):
            add(part)
        elif isinstance(part, str):
            add(part.encode("utf-8"))
        else:
            items = list(part)
            add(len(items).to_bytes(8, "little"))
            for item in items:
                add(item.encode("utf-8"))
    return digest.hexdigest()


class VectorStore:
    """An ``[rows, dim]`` float32 array in ``path``, filled in ``order`` (see the module docstring)."""

    def __init__(self, path: Path, state: dict[str, Any]) -> None:
        self.path = Path(path)
        self.state = state
        self._verified = -1  # how many rows verify() found as written (-1: not checked yet)

    # -- opening ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> VectorStore | None:
        """The store in ``path``, or ``None`` when there is none (no ``state.json``)."""
        path = Path(path)
        file = path / STATE_FILE
        if not file.is_file():
            return None
        try:
            state = json.loads(file.read_text(encoding="utf-8"))
            rows, dim, filled = int(state["rows"]), int(state["dim"]), int(state["filled"])
            str(state["key"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DamagedStore(f"{file} is damaged ({exc})", path) from None
        if not (rows >= 0 and dim >= 1 and 0 <= filled <= rows):
            raise DamagedStore(f"{file} is damaged (rows {rows}, dim {dim}, filled {filled})", path)
        for name in (VECTORS_FILE, ORDER_FILE):
            if not (path / name).is_file():
                raise DamagedStore(f"{path} has no {name}", path)
        checksums = state.get("checksums", [])
        if not (isinstance(checksums, list) and all(
                isinstance(c, list) and len(c) == 2 and isinstance(c[0], int) and isinstance(c[1], str)
                for c in checksums)):
            raise DamagedStore(f"{file} is damaged (its checksums are not a list of [end, sha256])", path)
        _array_file(path / VECTORS_FILE, (rows, dim), np.dtype(np.float32), path)
        _array_file(path / ORDER_FILE, (rows,), np.dtype(np.int64), path)
        return cls(path, state)

    @classmethod
    def create(cls, path: str | Path, key: str, rows: int, dim: int, order: Sequence[int] | None = None,
               info: dict[str, Any] | None = None, texts: Sequence[str] | None = None) -> VectorStore:
        """A new, empty store in ``path`` (which must not hold one). ``order``: the order in which rows will be
        filled (default: 0..rows-1); ``info``: anything to keep beside the key (how the vectors are computed);
        ``texts``: the text of each row."""
        path = Path(path)
        if (path / STATE_FILE).exists():
            raise CselabError(f"{path} already holds vectors")
        order_array = np.arange(rows, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
        if sorted(order_array.tolist()) != list(range(rows)):
            raise ValueError(f"order must be a permutation of 0..{rows - 1}")
        path.mkdir(parents=True, exist_ok=True)
        if texts is not None:
            write_texts(path, texts, rows)
        np.save(path / ORDER_FILE, order_array)
        vectors = np.lib.format.open_memmap(path / VECTORS_FILE, mode="w+", dtype=np.float32, shape=(rows, dim))
        vectors.flush()
        del vectors
        state = {"key": key, "rows": rows, "dim": dim, "filled": 0, **({"info": info} if info else {}),
                 "checksums": []}
        if texts is not None:
            state["texts_sha256"] = _digest((path / TEXTS_FILE).read_bytes())
        write_json_atomic(path / STATE_FILE, state)  # last: a store without its state is no store
        return cls(path, state)

    # -- reading and filling ------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return str(self.state["key"])

    @property
    def rows(self) -> int:
        return int(self.state["rows"])

    @property
    def dim(self) -> int:
        return int(self.state["dim"])

    @property
    def filled(self) -> int:
        return int(self.state["filled"])

    @property
    def complete(self) -> bool:
        return self.filled == self.rows

    def texts(self) -> list[str] | None:
        """Row i's text for every row, or ``None`` when the store keeps no texts (refused when they changed)."""
        file = self.path / TEXTS_FILE
        if not file.is_file():
            if "texts_sha256" in self.state:
                raise DamagedStore(f"{self.path} has no {TEXTS_FILE}", self.path)
            return None
        data = file.read_bytes()
        if "texts_sha256" in self.state and _digest(data) != self.state["texts_sha256"]:
            raise DamagedStore(f"{file} is not the file the store was written with (its sha256 differs)", self.path)
        try:
            texts = data.decode("utf-8").split("\n")[: self.rows]
        except UnicodeDecodeError as exc:
            raise DamagedStore(f"{file} is damaged ({exc})", self.path) from None
        if len(texts) != self.rows:
            raise DamagedStore(f"{file} has {len(texts)} lines for {self.rows} rows", self.path)
        return texts

    def vectors(self) -> np.ndarray:
        """The whole array, memory-mapped read-only (rows not yet filled are zeros), checked first
        (:meth:`verify`)."""
        self.verify()
        return np.load(self.path / VECTORS_FILE, mmap_mode="r")

    @property
    def checked(self) -> bool:
        """Whether the store keeps checksums (a store of an older cselab does not: its shape alone is checked)."""
        return "checksums" in self.state

    def verify(self) -> None:
        """Check the store's files against what was written: their shapes and sizes, the order, and the sha256 of
        every filled chunk's rows; :class:`DamagedStore` naming the file otherwise. Checked once per object unless
        rows were filled since."""
        if self._verified == self.filled:
            return
        vectors_file = self.path / VECTORS_FILE
        _array_file(vectors_file, (self.rows, self.dim), np.dtype(np.float32), self.path)
        _array_file(self.path / ORDER_FILE, (self.rows,), np.dtype(np.int64), self.path)
        if self.checked:
            order = np.load(self.path / ORDER_FILE)
            if not np.array_equal(np.sort(order), np.arange(self.rows)):
                raise DamagedStore(f"{self.path / ORDER_FILE} is damaged (not an order of the {self.rows} rows)",
                                   self.path)
            checksums = self.state["checksums"]
            ends = [end for end, _ in checksums]
            if ends != sorted(set(ends)) or (ends[-1] if ends else 0) != self.filled:
                raise DamagedStore(f"{self.path / STATE_FILE} is damaged (its checksums cover "
                                   f"{ends[-1] if ends else 0} rows, it counts {self.filled} filled)", self.path)
            array = np.load(vectors_file, mmap_mode="r")
            start = 0
            for end, digest in checksums:
                rows = np.ascontiguousarray(array[order[start:end]], dtype=np.float32)
                if _digest(rows.tobytes()) != digest:
                    raise DamagedStore(f"{vectors_file} is not what was written: the rows filled at positions "
                                       f"{start}-{end - 1} of its order have another sha256 than {STATE_FILE} "
                                       "recorded", self.path)
                start = end
            del array
        self._verified = self.filled

    def fill(self, compute: Callable[[list[int]], np.ndarray], chunk: int,
             after_chunk: Callable[[int, int], None] | None = None) -> None:
        """Compute the rows not yet filled, ``chunk`` rows of the order at a time: ``compute(indices)`` returns
        their vectors ``[len(indices), dim]``. ``after_chunk(filled, rows)`` is called after each chunk (the teacher
        pass moves its bar)."""
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        self.verify()  # what is continued is what was written
        order = np.load(self.path / ORDER_FILE)
        vectors = np.lib.format.open_memmap(self.path / VECTORS_FILE, mode="r+")
        try:
            while self.filled < self.rows:
                indices = order[self.filled : self.filled + chunk].tolist()
                values = np.ascontiguousarray(compute(indices), dtype=np.float32)
                if values.shape != (len(indices), self.dim):
                    raise ValueError(f"compute returned shape {values.shape}, expected ({len(indices)}, {self.dim})")
                vectors[indices] = values
                vectors.flush()  # on disk before the state counts it
                filled = self.filled + len(indices)
                if self.checked:
                    self.state["checksums"] = [*self.state["checksums"], [filled, _digest(values.tobytes())]]
                self.state["filled"] = filled
                write_json_atomic(self.path / STATE_FILE, self.state)
                self._verified = filled
                if after_chunk is not None:
                    after_chunk(self.filled, self.rows)
        finally:
            del vectors

    # -- sharing ---------------------------------------------------------------------------------------------
    def copy_to(self, target: str | Path) -> VectorStore:
        """This (complete) store at ``target``, a directory that must not exist yet: hard links where the file
        system allows (no second copy on disk), else a copy; built beside ``target`` and swapped into place."""
        if not self.complete:
            raise ValueError("only a complete store is copied")
        self.verify()  # a damaged store is never copied
        target = Path(target)
        if target.exists() and any(target.iterdir()):
            raise FileExistsError(f"{target} is not empty")  # never replace what is there
        staging = staging_directory(target, prefix="copy-")
        try:
            for name in (VECTORS_FILE, ORDER_FILE, TEXTS_FILE):
                if not (self.path / name).exists():
                    continue
                try:
                    os.link(self.path / name, staging / name)
                except OSError:
                    shutil.copyfile(self.path / name, staging / name)
            write_json_atomic(staging / STATE_FILE, self.state)
            replace_directory(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return VectorStore(target, dict(self.state))


def write_texts(path: str | Path, texts: Sequence[str], rows: int) -> None:
    """``texts.txt`` of a store: one text per row, each on its own line."""
    if len(texts) != rows or any("\n" in t or "\r" in t for t in texts):
        raise ValueError(f"texts must be {rows} single lines")
    write_atomic(Path(path) / TEXTS_FILE, "\n".join(texts) + "\n")
