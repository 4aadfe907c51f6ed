"""Small file helpers shared by the data, model and checkpoint code: checksums and atomic replacement."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


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


def replace_directory(tmp: Path, final: Path) -> Path:
    """Move the finished directory ``tmp`` to ``final``, replacing what is there.

    Renames only, so a crash leaves either the old directory (possibly as ``final.old``) or the new one,
    never a half-written one.
    """
    if final.exists():
        old = fresh_sibling(final, ".old")
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old)
    else:
        tmp.rename(final)
    return final
