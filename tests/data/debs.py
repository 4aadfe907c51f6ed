"""Synthetic Debian packages for the domain builders' tests: an ``ar`` archive with a ``data.tar.xz`` of
``usr/share/...`` members (man pages, fortunes), as ``apt-get download`` gives."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path


def man_page(name: str, summary: str, description: str, section: int = 3) -> bytes:
    """A gzipped man(7) page with a NAME summary, a SYNOPSIS display, a DESCRIPTION and a SEE ALSO."""
    return gzip.compress((f'.\\" a comment\n.TH {name.upper()} {section} 2023-01-01 "Linux man-pages 6.03"\n'
                          f".SH NAME\n{name} \\- {summary}\n.SH SYNOPSIS\n.nf\n.B #include <x.h>\n.fi\n"
                          f".SH DESCRIPTION\n{description}\n.SH SEE ALSO\n.BR other (3)\n").encode())


def _ar(members: list[tuple[str, bytes]]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members:
        header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return out


def man_deb(path: Path, pages: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    """Write a .deb holding ``pages`` (``man3/x.3.gz`` -> gzipped source) and symlinks (``man3/y.3.gz`` -> target)
    under ``usr/share/man``; returns ``path``."""
    return deb(path, {f"usr/share/man/{name}": payload for name, payload in pages.items()},
               {f"usr/share/man/{name}": target for name, target in (links or {}).items()})


def deb(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    """Write a .deb holding ``files`` (``usr/share/...`` -> bytes) and symlinks (path -> target); returns ``path``."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tf:
        for name, payload in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(f"./{name}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
    control = io.BytesIO()
    with tarfile.open(fileobj=control, mode="w:xz"):
        pass
    path.write_bytes(_ar([("debian-binary", b"2.0\n"), ("control.tar.xz", control.getvalue()),
                          ("data.tar.xz", data.getvalue())]))
    return path
