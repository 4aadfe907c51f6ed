"""Resumable HTTP downloads for the papers' own data (``cselab data fetch wiki1m``, ``senteval``; see
:mod:`cselab.data.papers.paper_data`), which no package registry carries.

A download goes to ``<dest>.part`` beside a small state file (``<dest>.part.json``: the URL, the size the server
announced and its ETag). A dropped connection is retried from where it stopped with an HTTP ``Range`` request, and a
killed process resumes the same way on the next call, as long as the server still offers the same file (same URL,
size and ETag); otherwise the part is discarded and the download starts again. The size the server announces is
checked against the published size when one is known, before the body is read, and the finished file against the
announced size; only then is it renamed to ``dest``. Every failure is one line that names the URL and how to fetch
the file by hand (``--from DIR``).

The base URL of the papers' files is :data:`PAPERS_URL`, overridden by the environment variable
:data:`PAPERS_URL_ENV` (a mirror, or a loopback server in the tests).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from cselab.data.registry.download import DownloadError
from cselab.fileio import write_json_atomic
from cselab.reporter import report
from cselab.version import __version__

PAPERS_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
PAPERS_URL_ENV = "CSELAB_PAPERS_URL"
TIMEOUT_S = 60.0
RETRIES = 5  # connection drops survived by one call (each resumes where the last stopped)
CHUNK = 1 << 20

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def papers_url() -> str:
    """The base URL the papers' files are fetched from: ``$CSELAB_PAPERS_URL`` or :data:`PAPERS_URL`."""
    return (os.environ.get(PAPERS_URL_ENV) or PAPERS_URL).rstrip("/")


def _state_file(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _read_state(part: Path) -> dict:
    try:
        state = json.loads(_state_file(part).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    _state_file(part).unlink(missing_ok=True)


class _Restart(Exception):
    """The server no longer offers what the part holds: start the file again."""


def download_file(url: str, dest: Path, *, hint: str, expected_bytes: int | None = None, retries: int | None = None,
                  timeout: float | None = None) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part`` when it holds the start of the same file) and return
    ``dest``. ``expected_bytes``: the published size, checked against what the server announces before the body is
    read. ``hint`` ends every error line (how to get the file by hand). Raises :class:`DownloadError` (``unreachable``
    when no connection could be made)."""
    retries = RETRIES if retries is None else retries
    timeout = TIMEOUT_S if timeout is None else timeout
    dest = Path(dest)
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    state = _read_state(part)
    if part.exists() and state.get("url") != url:
        _discard(part)  # another file's start, or a part without its state: not trusted
    drops = restarts = 0
    while True:
        try:
            _attempt(url, part, hint=hint, expected_bytes=expected_bytes, timeout=timeout)
            break
        except _Restart:
            _discard(part)
            restarts += 1
            if restarts > 2:
                raise DownloadError(f"{url} kept changing while it was downloaded; {hint}") from None
        except (http.client.IncompleteRead, ConnectionError, TimeoutError) as exc:
            drops += 1
            if drops > retries:
                have = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"downloading {url} broke off {drops} times ({type(exc).__name__}); {have} bytes kept in "
                    f"{part}: run the same command again to resume, or {hint}", unreachable=True) from None
            report().say(f"connection to {url} dropped ({type(exc).__name__}); resuming")
    os.replace(part, dest)
    _state_file(part).unlink(missing_ok=True)
    return dest


def _attempt(url: str, part: Path, *, hint: str, expected_bytes: int | None, timeout: float) -> None:
    """One request: continue ``part`` from its size (or start it) and read the body to its end."""
    state = _read_state(part)
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": f"cselab/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if state.get("etag"):
            headers["If-Range"] = state["etag"]
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset and offset == state.get("bytes"):
            return  # the part is already whole (killed between the last byte and the rename)
        if err.code == 416:
            raise _Restart() from None
        raise DownloadError(f"{url}: the server answered HTTP {err.code} ({err.reason}); {hint}") from None
    except urllib.error.URLError as err:
        raise DownloadError(f"cannot reach {url} ({err.reason}); {hint}", unreachable=True) from None
    except (ConnectionError, TimeoutError) as err:
        raise DownloadError(f"cannot reach {url} ({type(err).__name__}: {err}); {hint}", unreachable=True) from None
    with response:
        etag = response.headers.get("ETag")
        if response.status == 206:
            match = _CONTENT_RANGE.fullmatch((response.headers.get("Content-Range") or "").strip())
            if not match or int(match.group(1)) != offset or match.group(3) == "*":
                raise _Restart()
            total = int(match.group(3))
            if total != state.get("bytes") or (state.get("etag") and etag and etag != state["etag"]):
                raise _Restart()  # another file than the part's start
            mode = "ab"
        else:
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None and length.isdigit() else None
            offset, mode = 0, "wb"
        if total is not None and expected_bytes is not None and total != expected_bytes:
            raise DownloadError(f"{url} is {total} bytes, the published size is {expected_bytes}: a different or "
                                f"damaged file; {hint}")
        write_json_atomic(_state_file(part), {"url": url, "bytes": total, "etag": etag})
        with open(part, mode) as out, report().bar(total, initial=offset, desc=url.rsplit("/", 1)[-1], unit="B") as bar:
            bar_unit_scale(bar)
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                bar.update(len(chunk))
    size = part.stat().st_size
    if total is not None and size < total:
        raise http.client.IncompleteRead(b"", total - size)
    if total is not None and size != total:
        raise _Restart()


def bar_unit_scale(bar: object) -> None:
    """Show a byte bar in kB/MB (tqdm's ``unit_scale``) when the bar is a real one."""
    if hasattr(bar, "unit_scale"):
        bar.unit_scale = True
        bar.unit_divisor = 1024
