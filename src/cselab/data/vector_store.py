"""Vectors of a text on disk: an ``[N, d]`` float32 array, memory-mapped, filled chunk by chunk and resumable.

A store is a directory holding ``vectors.npy`` (the array, written through :func:`numpy.lib.format.open_memmap`),
``order.npy`` (the order in which rows are filled, fixed when the store is created), ``state.json`` (the
store's key, its shape and how many rows of the order are filled) and, when the rows are vectors of texts,
``texts.txt`` (row i's text on line i), so a reader can find a text's row. A chunk's rows are flushed to disk before
``state.json`` counts them, so a kill at any point loses at most the chunk being computed, and :meth:`fill`
continues from the first row not counted.

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
            raise CselabError(f"{file} is damaged ({exc}); delete {path} to compute the vectors again") from None
        if not (rows >= 0 and dim >= 1 and 0 <= filled <= rows):
            raise CselabError(f"{file} is damaged (rows {rows}, dim {dim}, filled {filled}); delete {path} to "
                              "compute the vectors again")
        for name in (VECTORS_FILE, ORDER_FILE):
            if not (path / name).is_file():
                raise CselabError(f"{path} has no {name}; delete {path} to compute the vectors again")
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
        state = {"key": key, "rows": rows, "dim": dim, "filled": 0, **({"info": info} if info else {})}
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
        """Row i's text for every row, or ``None`` when the store keeps no texts."""
        file = self.path / TEXTS_FILE
        if not file.is_file():
            return None
        texts = file.read_text(encoding="utf-8").split("\n")[: self.rows]
        if len(texts) != self.rows:
            raise CselabError(f"{file} has {len(texts)} lines for {self.rows} rows; delete {self.path} to compute "
                              "the vectors again")
        return texts

    def vectors(self) -> np.ndarray:
        """The whole array, memory-mapped read-only (rows not yet filled are zeros)."""
        array = np.load(self.path / VECTORS_FILE, mmap_mode="r")
        if array.shape != (self.rows, self.dim) or array.dtype != np.float32:
            raise CselabError(f"{self.path / VECTORS_FILE} has shape {array.shape} {array.dtype}, not "
                              f"({self.rows}, {self.dim}) float32; delete {self.path} to compute the vectors again")
        return array

    def fill(self, compute: Callable[[list[int]], np.ndarray], chunk: int,
             after_chunk: Callable[[int, int], None] | None = None) -> None:
        """Compute the rows not yet filled, ``chunk`` rows of the order at a time: ``compute(indices)`` returns
        their vectors ``[len(indices), dim]``. ``after_chunk(filled, rows)`` is called after each chunk (the teacher
        pass moves its bar)."""
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        order = np.load(self.path / ORDER_FILE)
        vectors = np.lib.format.open_memmap(self.path / VECTORS_FILE, mode="r+")
        try:
            while self.filled < self.rows:
                indices = order[self.filled : self.filled + chunk].tolist()
                values = np.asarray(compute(indices), dtype=np.float32)
                if values.shape != (len(indices), self.dim):
                    raise ValueError(f"compute returned shape {values.shape}, expected ({len(indices)}, {self.dim})")
                vectors[indices] = values
                vectors.flush()  # on disk before the state counts it
                self.state["filled"] = self.filled + len(indices)
                write_json_atomic(self.path / STATE_FILE, self.state)
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
