"""Small file helpers shared by the data, model and checkpoint code: checksums, atomic file writes (the one
place that writes a temporary file and renames it), crash-safe directory swaps, one-writer locks and checks
that an output path can be written before any work is done.

The lock is our own (an ``O_EXCL``-style file holding pid and host) rather than ``fcntl.flock`` because it must
say WHO holds a run directory in the error message, survive on network file systems where ``flock`` is a no-op,
and let a later process recognise a lock left by a killed one (same host, pid gone) and take it over.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from cselab.errors import CselabError

# Test hook (tests/test_kill_resume.py): ``CSELAB_TEST_KILL_AT=<point>:<n>`` makes the process SIGKILL itself
# the n-th time it reaches ``<point>`` of a directory swap (see :func:`replace_directory`), so a test can put a
# kill exactly inside the swap. Unset (always, outside the tests) it costs one dictionary lookup.
KILL_HOOK_ENV = "CSELAB_TEST_KILL_AT"
SWAP_POINTS = ("swap-written", "swap-moved-aside", "swap-installed")
_hook_counts: dict[str, int] = {}
# locks this process holds (resolved lock path -> nesting depth): a run locks its directory, and the trainer it
# calls locks it again
_held_locks: dict[Path, int] = {}


def _kill_point(point: str) -> None:
    wanted = os.environ.get(KILL_HOOK_ENV)
    if not wanted:
        return
    name, _, count = wanted.rpartition(":")
    if name != point:
        return
    _hook_counts[point] = _hook_counts.get(point, 0) + 1
    if str(_hook_counts[point]) == count:
        os.kill(os.getpid(), signal.SIGKILL)


def current_umask() -> int:
    """The process's umask (read without changing it for good)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A private temporary path beside ``path`` to write to; on leaving the block it is renamed over ``path``
    (on an error it is removed). Readers and kills see the old file or the whole new one, never a part, and
    processes writing the same file at once never share a temporary name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes the file owner-only; give it the usual mode
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path | str, data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def write_json_atomic(path: Path | str, data: Any, *, indent: int | None = 2) -> Path:
    """``data`` as JSON (one trailing newline) written atomically."""
    return write_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fresh_sibling(path: Path, suffix: str = ".tmp") -> Path:
    """An empty-to-be sibling path of ``path`` (removed if a previous crash left it behind)."""
    tmp = path.with_name(path.name + suffix)
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def staging_directory(final: Path, prefix: str = "", suffix: str = "") -> Path:
    """A new empty directory beside ``final`` to build its replacement in, named
    ``.<final name>.<prefix>XXXXXXXX<suffix>`` (eight random characters, so processes never share one), with the
    usual mode (``mkdtemp`` makes it owner-only). Swap it in with :func:`replace_directory`."""
    final = Path(final).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.{prefix}", suffix=suffix))
    os.chmod(tmp, 0o777 & ~current_umask())
    return tmp


def _aside(final: Path) -> Path:
    return final.with_name(final.name + ".old")


def replace_directory(tmp: Path, final: Path, *, aside: Path | None = None, mark: str | None = None) -> Path:
    """Move the finished directory ``tmp`` to ``final``, replacing what is there: the one place that sets an
    existing directory aside and renames a finished one into place.

    Two renames (``final`` -> ``aside``, ``tmp`` -> ``final``), then ``aside`` is deleted. ``aside`` defaults to
    ``final.old``; a caller that names its own finds it again for :func:`recover_directory`. A kill between the
    renames leaves only ``aside`` and ``tmp``; :func:`recover_directory` (run before a directory is read or
    written again) puts ``aside`` back, so at every instant a complete directory exists under one of the two
    names, never a half-written one under ``final``. A second rename that fails (an error, not a kill) puts
    ``aside`` back before the error propagates. What may be replaced is the caller's to check, before this.

    ``mark``: a file name written into the set-aside directory as soon as it is set aside and removed last when it
    is deleted, so that what a kill leaves under ``aside`` is told from a user's directory of that name by the mark,
    not by its name (the fetch's leftovers, :func:`cselab.data.registry.download.remove_leftovers`). With a ``mark``
    nothing that exists at ``aside`` beforehand is deleted: the caller names an ``aside`` that does not exist.
    """
    _kill_point("swap-written")
    old = aside if aside is not None else _aside(final)
    if final.exists():
        if mark is None:
            shutil.rmtree(old, ignore_errors=True)
        elif old.exists() or old.is_symlink():
            raise FileExistsError(f"{old} exists: a swap sets aside only to a new name")
        final.rename(old)
        if mark is not None:
            (old / mark).touch()
        _kill_point("swap-moved-aside")
        try:
            tmp.rename(final)
        except BaseException:
            if mark is not None:
                (old / mark).unlink(missing_ok=True)
            old.rename(final)
            raise
        _kill_point("swap-installed")
        if mark is not None:
            remove_marked(old, mark)
        else:
            shutil.rmtree(old)
    else:
        tmp.rename(final)
        _kill_point("swap-installed")
        if mark is None:
            shutil.rmtree(old, ignore_errors=True)  # left by a swap killed after its second rename
    return final


def remove_marked(directory: Path, mark: str) -> None:
    """Delete ``directory``, its ``mark`` file last (so a kill meanwhile leaves it still marked)."""
    for item in directory.iterdir():
        if item.name == mark:
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item)
        else:
            item.unlink()
    (directory / mark).unlink(missing_ok=True)
    directory.rmdir()


def recover_directory(final: Path, *, temporaries: Sequence[Path] | None = None,
                      asides: Sequence[Path] | None = None) -> Path | None:
    """Undo what a kill inside :func:`replace_directory` left: when ``final`` is missing, put back the first of
    ``asides`` that exists; delete the other ``asides`` and the stale ``temporaries``. They default to
    ``final.old`` and ``final.tmp`` (the names :func:`fresh_sibling` and :func:`replace_directory` use by
    default). Returns ``final`` if it exists afterwards, else None.

    Call it only while holding the directory's writer lock (:class:`DirectoryLock`): then no live process owns
    the temporary siblings."""
    asides = [_aside(final)] if asides is None else list(asides)
    temporaries = [final.with_name(final.name + ".tmp")] if temporaries is None else list(temporaries)
    if not final.exists():
        for old in asides:
            if old.is_dir():
                old.rename(final)
                break
    for leftover in [*asides, *temporaries]:
        shutil.rmtree(leftover, ignore_errors=True)
    return final if final.exists() else None


# -- checks before work --------------------------------------------------------------------------------
def check_writable_file(path: Path, what: str) -> Path:
    """Fail now, with the reason, if ``path`` could not be created or replaced as a FILE later (an output that
    is a directory, a parent that is a file, a read-only directory), so no work is done for a lost result."""
    path = Path(path)
    if path.is_dir():
        raise CselabError(f"{what} {path} is a directory; give a file path")
    _check_creatable_parent(path, what)
    if path.exists() and not os.access(path, os.W_OK):
        raise CselabError(f"{what} {path} is not writable (permissions)")
    return path


def check_writable_dir(path: Path, what: str) -> Path:
    """Fail now if ``path`` could not be created (or written into) as a DIRECTORY."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CselabError(f"{what} {path} is a file, not a directory; give a directory path")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise CselabError(f"{what} {path} is not writable (permissions)")
        return path
    _check_creatable_parent(path, what)
    return path


def _check_creatable_parent(path: Path, what: str) -> None:
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CselabError(f"{what} {path} cannot be created: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CselabError(f"{what} {path} cannot be created: {parent} is not writable (permissions)")


# -- one writer per directory ----------------------------------------------------------------------------
LOCK_FILE = ".cselab.lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class DirectoryLock:
    """Exclusive writer lock of a directory: ``<directory>/.cselab.lock`` holding ``{"pid", "host", "since"}``.

    The file is written under a private name and hard-linked into place, so it appears atomically WITH its
    content (``link`` fails if it exists, like ``O_EXCL``). A lock whose process is gone (same host, pid not
    running) is stale and taken over; a live one, or one from another host, is refused with who holds it.
    Use as a context manager; ``what`` names the activity in the error message. Taking a lock this process
    already holds nests. A directory the lock created is removed again on release if it stayed empty.
    """

    def __init__(self, directory: Path, what: str = "a run", *, name: str = LOCK_FILE) -> None:
        self.directory = Path(directory)
        self.path = self.directory / name
        self.what = what
        self.held = False
        self._created: list[Path] = []

    def held_here(self) -> bool:
        """Whether this process already holds the lock (a nested acquire)."""
        return self.path.absolute() in _held_locks

    def acquire(self) -> DirectoryLock:
        key = self.path.absolute()
        if key in _held_locks:
            _held_locks[key] += 1
            self.held = True
            return self
        self._created = [d for d in (self.directory, *self.directory.parents) if not d.exists()]
        self.directory.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time())}
        private = self.path.with_name(f"{self.path.name}.{me['host']}.{me['pid']}")
        private.write_text(json.dumps(me))
        try:
            for _ in range(3):
                try:
                    os.link(private, self.path)
                    self.held = True
                    _held_locks[key] = 1
                    return self
                except FileExistsError:
                    holder = self._holder()
                    if holder is not None and not self._stale(holder):
                        private.unlink(missing_ok=True)
                        self._remove_if_created()
                        raise CselabError(
                            f"{self.directory} is in use by {self.what} (pid {holder.get('pid')} on "
                            f"{holder.get('host')}, "
                            f"since {time.strftime('%H:%M:%S', time.localtime(holder.get('since', 0)))}); "
                            f"wait for it, or delete {self.path} if that process is gone") from None
                    self.path.unlink(missing_ok=True)  # stale: its process is dead
            raise CselabError(f"cannot take the lock {self.path}: other processes keep taking it")
        finally:
            private.unlink(missing_ok=True)

    def _holder(self) -> dict | None:
        try:
            holder = json.loads(self.path.read_text())
            return holder if isinstance(holder, dict) else {}
        except FileNotFoundError:
            return None  # released meanwhile: try again
        except (OSError, ValueError):
            return {}  # unreadable: treated as stale below

    @staticmethod
    def _stale(holder: dict) -> bool:
        if not isinstance(holder.get("pid"), int):
            return True
        return holder.get("host") == socket.gethostname() and not _pid_alive(holder["pid"])

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        key = self.path.absolute()
        _held_locks[key] = _held_locks.get(key, 1) - 1
        if _held_locks[key] > 0:
            return
        del _held_locks[key]
        self.path.unlink(missing_ok=True)
        self._remove_if_created()

    def _remove_if_created(self) -> None:
        for directory in self._created:  # leaf first; rmdir only removes what stayed empty
            try:
                directory.rmdir()
            except OSError:
                return

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
