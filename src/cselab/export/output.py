"""Where an export goes and how it gets there: the output directory (its default name, and the checks that
refuse a file, the model directory itself, a directory holding files cselab export did not write, or an
unwritable parent, all before anything is written), the writer lock on it, the staging directory the files are
written in (``.<name>.export-XXXXXXXX`` beside the output), and the swap that puts the finished export in place
(:func:`cselab.fileio.replace_directory`; an earlier export is set aside as ``.<name>.old-XXXXXXXX`` meanwhile).
An output is replaced only when it is empty or an earlier export (every file listed in its
``cselab_export.json``). What a killed export left beside the output is undone by the next export into it
(:func:`recover_output`), which touches only directories named by these patterns that are cselab's own."""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from cselab.errors import CselabError
from cselab.fileio import DirectoryLock, recover_directory, replace_directory, staging_directory
from cselab.models.exported import MANIFEST

STAGING = "export-"  # .<name>.export-XXXXXXXX: an export being written
ASIDE = "old-"  # .<name>.old-XXXXXXXX: an earlier export set aside during the swap
STAGING_MARK = ".cselab-export-staging"  # in a staging directory until its manifest is written
_RANDOM = "[a-z0-9_]{8}"  # tempfile's eight random characters (secrets.token_hex(4) is a subset)


def default_output(model_dir: str | Path, source: Path, fmt: str, quantize: str | None) -> Path:
    """``<model_dir>-<fmt>[-int8]`` beside a model given as a path, in the working directory for a fetched name."""
    suffix = f"-{fmt}" + (f"-{quantize}" if quantize else "")
    given = Path(model_dir).expanduser()
    if given.exists():
        resolved = given.resolve()
        return resolved.with_name(resolved.name + suffix)
    return Path.cwd() / (source.name + suffix)


def output_dir(model_dir: str | Path, source: Path, fmt: str, quantize: str | None,
               output: str | Path | None) -> Path:
    """The directory to write (``output``, else :func:`default_output`), refused in one line if it is a file,
    the model directory, a directory holding other files, or cannot be created."""
    target = Path(output).expanduser() if output is not None else default_output(model_dir, source, fmt, quantize)
    if target.is_dir() and target.resolve() == source.resolve():
        raise CselabError(f"output {target} is the model directory itself; give a new directory")
    _check_replaceable(target)
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CselabError(f"output {target} cannot be created: {parent} is not a writable directory")
    return target


def _check_replaceable(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise CselabError(f"output {target} is a file; give a new directory")
    if target.is_dir() and any(target.iterdir()) and not is_earlier_export(target):
        raise CselabError(f"output {target} exists and holds files cselab export did not write; give a new "
                          "directory or move it away")


def is_earlier_export(path: Path) -> bool:
    """True when every file under ``path`` is one its ``cselab_export.json`` lists (an export cselab wrote)."""
    try:
        listed = set(json.loads((path / MANIFEST).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    present = {p.relative_to(path).as_posix() for p in path.rglob("*") if not p.is_dir()}
    return present <= listed


def output_lock(target: Path) -> DirectoryLock:
    """One export into ``target`` at a time (``.export-<name>.lock`` beside it): a second is refused with who
    holds it, so the staging directories :func:`recover_output` finds belong to no live export."""
    return DirectoryLock(target.absolute().parent, f"`cselab export` into {target.name}",
                         name=f".export-{target.name}.lock")


def _leftovers(target: Path, kind: str) -> list[Path]:
    """Directories beside ``target`` named exactly ``.<name>.<kind>XXXXXXXX`` (never a link)."""
    parent = target.absolute().parent
    if not parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{kind}{_RANDOM}")
    return sorted(p for p in parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


def recover_output(target: Path) -> None:
    """Undo what killed exports into ``target`` left (call it holding :func:`output_lock`): an earlier export
    set aside by a swap killed between its renames is put back when ``target`` is missing (else deleted: it
    was replaced), and staging directories are deleted. Only directories named by cselab's patterns that are
    cselab's are touched: a staging directory holding the staging mark or a complete export, a set-aside one
    that is an earlier export or empty."""
    staging = [p for p in _leftovers(target, STAGING) if (p / STAGING_MARK).is_file() or is_earlier_export(p)]
    asides = [p for p in _leftovers(target, ASIDE) if is_earlier_export(p) or not any(p.iterdir())]
    asides.sort(key=lambda p: p.stat().st_mtime, reverse=True)  # the newest is put back
    recover_directory(target.absolute(), temporaries=staging, asides=asides)


def new_staging(target: Path) -> Path:
    """An empty staging directory beside ``target``, marked as cselab's until :func:`seal` writes its manifest."""
    tmp = staging_directory(target, prefix=STAGING)
    (tmp / STAGING_MARK).touch()
    return tmp


def seal(tmp: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` into the staging directory with the list of its files (which makes it recognisable as
    an export), then drop the staging mark."""
    mark = tmp / STAGING_MARK
    files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file() and p != mark)
    manifest["files"] = [*files, MANIFEST]
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    mark.unlink()


def install(tmp: Path, target: Path) -> None:
    """Swap the sealed ``tmp`` in at ``target`` (:func:`cselab.fileio.replace_directory`), checking again first
    that what is there now is still empty or an earlier export."""
    _check_replaceable(target)
    aside = target.absolute().with_name(f".{target.name}.{ASIDE}{secrets.token_hex(4)}")
    replace_directory(tmp, target, aside=aside)
