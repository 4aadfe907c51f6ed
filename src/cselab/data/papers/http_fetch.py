"""Resumable HTTP downloads for the papers' own data (``cselab data fetch wiki1m``, ``senteval``; see
:mod:`cselab.data.papers.paper_data`), which no package registry carries.

A download goes to ``<dest>.part`` beside a small state file (``<dest>.part.json``: the URL, the size the server
announced and its ETag). A dropped connection is retried from where it stopped with an HTTP ``Range`` request, and a
killed process resumes the same way on the next call, as long as the server still offers the same file (same URL,
size and ETag); otherwise the part is discarded and the download starts again. The size the server announces is
checked against the published size when one is known, before the body is read, and the finished file against the
announced size; only then is it renamed to ``dest``. Every failure is one line that names the URL and how to fetch
the file by hand (``--from DIR``).

A download is whole or refused: the size the server announces (when it announces one) and the caller's check of the
file's content (``check``: a text's lines, a tar that opens) must both hold before the part becomes ``dest``; a
refused body is deleted, never left where a later call would take it as finished. A finished download gets a receipt
beside it (``<dest>.cselab-download.json``: its URL, size and sha256), the proof that cselab downloaded and checked
it: a file at ``dest`` whose receipt is missing or does not match is the user's and is refused, never taken. Nothing
is written through a link, and nothing is created (not even ``dest``'s directory) before the server has answered
with headers that pass the checks.

The papers' files are SimCSE's dataset repository on the model hub (:data:`PAPERS_REPO`). Its base URL is
:data:`PAPERS_URL`; the hub's own settings apply as users know them: ``$HF_ENDPOINT`` (a mirror of the hub) replaces
the hub's address, and ``$HF_HUB_OFFLINE`` refuses the download at once. ``$CSELAB_PAPERS_URL``
(:data:`PAPERS_URL_ENV`) names any other base URL (a plain HTTP mirror of the files, a loopback server in the tests).

Our own code rather than ``huggingface_hub.hf_hub_download``, for what was measured (docs/reproduce.md, "Why not
the hub's client"): against a refused connection the hub's client takes seconds of retries to fail where this fails
at once, and, asked to download into a directory (``local_dir``, what ``cselab data download --to DIR`` needs), it
leaves its cache folder and a lock file there, where nothing may be created before the server answers. It also puts
a finished file in place before the target's own check could refuse it, and the same code must serve plain mirrors.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from cselab.data.registry.download import DownloadError
from cselab.errors import CselabError, UsageError
from cselab.fileio import sha256_file, write_json_atomic
from cselab.reporter import report
from cselab.version import __version__

HUB_URL = "https://huggingface.co"
PAPERS_REPO = "datasets/princeton-nlp/datasets-for-simcse"  # SimCSE's published files (its README's links)
PAPERS_URL = f"{HUB_URL}/{PAPERS_REPO}/resolve/main"
PAPERS_URL_ENV = "CSELAB_PAPERS_URL"
TRUE_WORDS = ("1", "true", "yes", "on")  # how huggingface_hub reads HF_HUB_OFFLINE
TIMEOUT_S = 60.0
RETRIES = 5  # connection drops survived by one call (each resumes where the last stopped)
CHUNK = 1 << 20
RECEIPT_SUFFIX = ".cselab-download.json"

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def papers_url() -> str:
    """The base URL the papers' files are fetched from: ``$CSELAB_PAPERS_URL``, else :data:`PAPERS_REPO` at
    ``$HF_ENDPOINT`` (a hub mirror), else :data:`PAPERS_URL`; :class:`UsageError` when it is not an http(s) URL."""
    if os.environ.get(PAPERS_URL_ENV):
        return check_http_url(os.environ[PAPERS_URL_ENV], PAPERS_URL_ENV).rstrip("/")
    if os.environ.get("HF_ENDPOINT"):
        endpoint = check_http_url(os.environ["HF_ENDPOINT"], "HF_ENDPOINT").rstrip("/")
        return f"{endpoint}/{PAPERS_REPO}/resolve/main"
    return PAPERS_URL


def hub_offline() -> bool:
    """Whether ``$HF_HUB_OFFLINE`` asks for no download."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE_WORDS


def check_http_url(url: str, what: str) -> str:
    """``url`` when it is an http or https URL with a host; else a one-line :class:`UsageError` naming ``what``."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise UsageError(f"{what}={url!r} is not a URL ({exc}); give an http(s) base URL such as {PAPERS_URL}") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{what}={url!r} is not an http(s) URL with a host; give one such as {PAPERS_URL}")
    return url


def _state_file(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def receipt_file(dest: Path) -> Path:
    """The receipt beside a finished download (its URL, size and sha256)."""
    return dest.with_name(dest.name + RECEIPT_SUFFIX)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_state(part: Path) -> dict:
    state = _read_json(_state_file(part))
    return state if {"url", "bytes", "etag"} <= set(state) else {}


def has_receipt(dest: Path) -> bool:
    """Whether ``dest`` is a download cselab finished and checked: a plain file whose receipt records its size and
    sha256."""
    receipt = _read_json(receipt_file(dest))
    return (dest.is_file() and not dest.is_symlink() and receipt.get("bytes") == dest.stat().st_size
            and receipt.get("sha256") == sha256_file(dest))


def remove_download(dest: Path) -> None:
    """Delete a finished download and its receipt."""
    dest.unlink(missing_ok=True)
    receipt_file(dest).unlink(missing_ok=True)


def check_download_place(dest: Path) -> None:
    """Refuse, before anything is asked of the server, what :func:`download_file` must not write to or take:
    a link or a directory at ``dest``, its part, the part's state or its receipt, and a file at ``dest`` that is not
    a download cselab finished (no matching receipt)."""
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    for path in (dest, part, _state_file(part), receipt_file(dest)):
        if path.is_symlink():
            raise CselabError(f"{path} is a link, and cselab never writes through one: move it away and run again")
        if path.exists() and not path.is_file():
            raise CselabError(f"{path} is a directory, where cselab downloads a file: move it away and run again")
    if dest.exists() and not has_receipt(dest):
        raise CselabError(f"{dest} is already there and cselab did not download and check it (no matching "
                          f"{receipt_file(dest).name}), so it is not taken as the download: move it away, or use it "
                          f"with `--from {dest.parent}`")
    if part.exists() and not _read_state(part):
        raise CselabError(f"{part} is there without the state cselab writes beside a download it can resume, so it "
                          "is not cselab's: move it away and run again")


def download_file(url: str, dest: Path, *, hint: str, check: Callable[[Path], None], expected_bytes: int | None = None,
                  retries: int | None = None, timeout: float | None = None) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part`` when it holds the start of the same file) and return
    ``dest``; a ``dest`` cselab downloaded earlier (its receipt matches) is returned as it is. ``check(path)`` is the
    file's own check (raising :class:`CselabError`), run on the whole body before it becomes ``dest``.
    ``expected_bytes``: the published size, checked against what the server announces before the body is read.
    ``hint`` ends every error line (how to get the file by hand). Raises :class:`DownloadError` (``unreachable``
    when no connection could be made) or :class:`CselabError` (what :func:`check_download_place` refuses); a refused
    body is deleted with the directories this call created."""
    retries = RETRIES if retries is None else retries
    timeout = TIMEOUT_S if timeout is None else timeout
    dest = Path(dest)
    check_download_place(dest)
    if dest.exists():
        return dest
    if hub_offline():
        raise DownloadError(f"HF_HUB_OFFLINE is set, so {url} is not downloaded; {hint}", unreachable=True)
    part = dest.with_name(dest.name + ".part")
    created = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]  # deepest first
    if part.exists() and _read_state(part).get("url") != url:
        _discard(part)  # the start of another file
    try:
        _download_part(url, part, hint=hint, expected_bytes=expected_bytes, retries=retries, timeout=timeout)
        try:
            check(part)
        except CselabError as exc:
            raise _Refused(f"{url}: {exc}; {hint}") from None
        write_json_atomic(receipt_file(dest), {"url": url, "bytes": part.stat().st_size, "sha256": sha256_file(part)})
        os.replace(part, dest)
        _state_file(part).unlink(missing_ok=True)
    except _Refused as exc:
        _discard(part)
        _remove_empty(created)
        raise DownloadError(str(exc)) from None
    except DownloadError:
        _remove_empty(created)  # only what holds nothing (a part kept to resume keeps its directory)
        raise
    return dest


def _remove_empty(directories: list[Path]) -> None:
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or not there): nor are the ones above it


def _discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    _state_file(part).unlink(missing_ok=True)


class _Restart(Exception):
    """The server no longer offers what the part holds: start the file again."""


class _Refused(Exception):
    """The body is not the file: delete it (the message says why)."""


def _download_part(url: str, part: Path, *, hint: str, expected_bytes: int | None, retries: int,
                   timeout: float) -> None:
    drops = restarts = 0
    while True:
        try:
            _attempt(url, part, hint=hint, expected_bytes=expected_bytes, timeout=timeout)
            return
        except _Restart:
            _discard(part)
            restarts += 1
            if restarts > 2:
                raise _Refused(f"{url} kept changing while it was downloaded; {hint}") from None
        except (http.client.IncompleteRead, ConnectionError, TimeoutError) as exc:
            drops += 1
            if drops > retries:
                have = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"downloading {url} broke off {drops} times ({type(exc).__name__}); {have} bytes kept in "
                    f"{part}: run the same command again to resume, or {hint}", unreachable=True) from None
            report().say(f"connection to {url} dropped ({type(exc).__name__}); resuming")


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
    except (http.client.HTTPException, ValueError) as err:  # a malformed answer, a URL urllib cannot open
        raise DownloadError(f"{url}: no usable answer ({type(err).__name__}: {err}); {hint}") from None
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
        part.parent.mkdir(parents=True, exist_ok=True)  # the first write: the server has answered
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
