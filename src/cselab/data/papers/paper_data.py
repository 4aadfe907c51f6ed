"""The papers' own data, fetched from where SimCSE published it (``cselab data fetch wiki1m | senteval | sickr |
wiki1m-sickr | papers``). No package registry carries these files, so they come over HTTP
(:mod:`cselab.data.papers.http_fetch`: resumable, size-checked), or from a directory of files downloaded by hand
(``--from DIR``).

Targets under ``$CSELAB_HOME``:

    wiki1m/wiki1m_for_simcse.txt            SimCSE's 10^6 Wikipedia sentences (every paper's training text)
    senteval/STS/STS12-en-test/ ... STS16-en-test/, senteval/STS/STSBenchmark/, senteval/SICK/
                                            SentEval's STS12-16, STS-B and SICK-R files from SimCSE's senteval.tar,
                                            in the layout ``--senteval-dir`` reads
    sickr/sickr_sentences.txt               the unlabelled SICK-R sentences (sentence_A and sentence_B of the train,
                                            trial and test files, first occurrence kept), from the senteval target
    wiki1m-sickr/wiki1m+sickr.txt           Wiki1M then the SICK-R sentences: TNCSE's and JTCSE's training text

Each target is built in a staging directory and swapped in with its manifest
(:func:`cselab.data.registry.download.install_dir`, the same ownership rules as the registry targets: nothing of the
user's is replaced). The manifest records the sha256 of every file at the first fetch, and ``--verify`` checks them
again. What the source publishes is checked, on a download and on a file given with ``--from`` alike: the size the
server announces (and the published size where one is pinned), Wiki1M's 10^6 lines of UTF-8 text without NUL bytes
(:func:`check_wiki1m`), a SentEval tar that reads to its end and holds the seven tasks' folders
(:func:`check_senteval_tar`), and SentEval's pair counts. SimCSE publishes no checksum, and neither the published
files' sizes nor their sha256s could be read where this was written (no access to the hub), so none is pinned:
:attr:`RemoteFile.bytes` and :attr:`RemoteFile.sha256` stay unset rather than guessed.
"""

from __future__ import annotations

import contextlib
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cselab.data.papers.http_fetch import check_download_place, download_file, papers_url, remove_download
from cselab.data.registry.download import (
    DownloadError,
    check_replaceable,
    files_entry,
    install_dir,
    lines_bytes,
    remove_leftovers,
    verify_dir,
)
from cselab.data.registry.sources import MANIFEST, data_home, is_complete
from cselab.errors import CselabError
from cselab.fileio import DirectoryLock, sha256_file
from cselab.reporter import report


@dataclass(frozen=True)
class RemoteFile:
    """A file published at the papers' base URL (:func:`cselab.data.papers.http_fetch.papers_url`)."""

    name: str  # its name there, and in a --from DIR
    bytes: int | None = None  # the published size, when pinned (else the size the server announces is checked)
    lines: int | None = None  # the published line count of a text file
    sha256: str | None = None  # the published file's sha256, when pinned

    def url(self) -> str:
        return f"{papers_url()}/{self.name}"


# SimCSE's release: "10^6 sentences randomly sampled from English Wikipedia".
WIKI1M = RemoteFile("wiki1m_for_simcse.txt", lines=1_000_000)
SENTEVAL_TAR = RemoteFile("senteval.tar")

# SentEval's pair counts (pairs with a gold score) of the seven tasks, as SimCSE's paper lists them (its Table B.1);
# the fetch checks the files against them.
SENTEVAL_PAIRS: dict[str, int] = {
    "sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186, "stsb": 1379, "sickr": 4927,
}
SENTEVAL_DIRS = ("STS/STS12-en-test", "STS/STS13-en-test", "STS/STS14-en-test", "STS/STS15-en-test",
                 "STS/STS16-en-test", "STS/STSBenchmark", "SICK")

PAPER_TARGETS: tuple[str, ...] = ("wiki1m", "senteval", "sickr", "wiki1m-sickr", "papers")
SICKR_FILE = "sickr_sentences.txt"
WIKI1M_SICKR_FILE = "wiki1m+sickr.txt"


def paper_path(target: str, home: Path | None = None) -> Path:
    """The main file (or, for ``senteval``, the directory ``--senteval-dir`` takes) of a paper target."""
    base = data_home(home) / target
    return {"wiki1m": base / WIKI1M.name, "senteval": base, "sickr": base / SICKR_FILE,
            "wiki1m-sickr": base / WIKI1M_SICKR_FILE}[target]


def is_paper_fetched(target: str, home: Path | None = None) -> bool:
    return is_complete(data_home(home) / target / MANIFEST)


def _hint(target: str, remote: RemoteFile) -> str:
    return (f"download {remote.url()} by hand where it is reachable, put it in a directory DIR and run "
            f"`cselab data fetch {target} --from DIR`")


def fetch_paper(target: str, *, home: Path | None = None, from_dir: Path | None = None, verify: bool = False,
                rebuild: bool = False) -> Path:
    """Fetch a paper target (see the module docstring) and return its directory (``home`` for ``papers``).
    ``from_dir`` holds files downloaded by hand (``wiki1m_for_simcse.txt``, ``senteval.tar`` or an extracted
    SentEval data directory); ``verify`` re-checks every file against its manifest; ``rebuild`` builds it again."""
    if target not in PAPER_TARGETS:
        raise CselabError(f"unknown paper target {target!r}; valid: {', '.join(PAPER_TARGETS)}")
    home = data_home(home)
    papers_url()  # a bad $CSELAB_PAPERS_URL is refused before anything is written
    if from_dir is not None and not Path(from_dir).is_dir():
        raise CselabError(f"--from directory not found: {from_dir}")
    if target == "papers":
        if from_dir is not None:  # every part is checked before any is installed
            _check_from_dir(home, Path(from_dir), rebuild=rebuild)
        for each in PAPER_TARGETS[:-1]:
            fetch_paper(each, home=home, from_dir=from_dir, verify=verify, rebuild=rebuild)
        return home
    if target == "sickr" or target == "wiki1m-sickr":  # built from other targets: those first
        for need in (("senteval",) if target == "sickr" else ("wiki1m", "sickr")):
            if not is_paper_fetched(need, home):
                fetch_paper(need, home=home, from_dir=from_dir)
    final = home / target
    verified = verify and not rebuild and final.is_dir() and (final / MANIFEST).is_file()
    if verified:  # what was fetched is checked as it is: a missing or changed file is named, not fetched again
        _verify(target, final)
    if is_paper_fetched(target, home) and not rebuild:
        report().say(f"{target}: already in {final} (--verify checks its files, --rebuild fetches it again)")
    else:
        with DirectoryLock(final.parent, f"`cselab data fetch {target}`", name=f".fetch-{final.name}.lock"):
            remove_leftovers(final)
            if rebuild or not is_paper_fetched(target, home):
                check_replaceable(final)  # before anything is downloaded or written
                _fetch_into(target, final, home, from_dir, rebuild=rebuild)
    if verify and not verified:
        _verify(target, final)
    return final


def _verify(target: str, final: Path) -> None:
    try:
        checked = verify_dir(final)
    except CselabError as exc:
        raise CselabError(f"{exc}; fetch it again with `cselab data fetch {target} --rebuild`") from None
    report().say(f"{target}: {checked} file(s) match the sizes and sha256 of the manifest")


def _check_from_dir(home: Path, from_dir: Path, *, rebuild: bool) -> None:
    """Check the files of ``from_dir`` that ``papers`` will install (those of targets not yet fetched, or all with
    ``rebuild``), before any is installed."""
    if rebuild or not is_paper_fetched("wiki1m", home):
        _from_file("wiki1m", WIKI1M, from_dir)
    if rebuild or not is_paper_fetched("senteval", home):
        layout = _senteval_layout(from_dir)
        if layout is not None:
            check_senteval(layout)
        else:
            _from_file("senteval", SENTEVAL_TAR, from_dir)


def _fetch_into(target: str, final: Path, home: Path, from_dir: Path | None, *, rebuild: bool) -> None:
    downloads = home / ".downloads"
    source: Path | None = None
    if target == "wiki1m":
        source = _obtain(target, WIKI1M, downloads, from_dir)
        build: Callable[[Path], dict] = lambda out: _build_wiki1m(source, out)  # noqa: E731
    elif target == "senteval":
        layout = _senteval_layout(from_dir) if from_dir is not None else None
        if layout is None:
            source = _obtain(target, SENTEVAL_TAR, downloads, from_dir)
        build = lambda out: _build_senteval(source, layout, out)  # noqa: E731
    elif target == "sickr":
        build = lambda out: _build_sickr(home / "senteval", out)  # noqa: E731
    else:
        build = lambda out: _build_wiki1m_sickr(home, out)  # noqa: E731
    report().say(f"{target}: building {final}")
    downloaded = source is not None and source.parent == downloads
    try:
        install_dir(final, MANIFEST, build, rebuild=rebuild)
    except CselabError:
        if downloaded:
            remove_download(source)  # refused by the build: never taken as a finished download again
            with contextlib.suppress(OSError):
                downloads.rmdir()  # only when empty
        raise
    if downloaded:  # installed: the download is not kept twice (a kill before here keeps it for the next run)
        remove_download(source)
        with contextlib.suppress(OSError):
            downloads.rmdir()
    report().say(f"{target}: done, {final}")


def _obtain(target: str, remote: RemoteFile, downloads: Path, from_dir: Path | None) -> Path:
    if from_dir is not None:
        path = _from_file(target, remote, Path(from_dir))
        report().say(f"{target}: using {path}")
        return path
    report().say(f"{target}: downloading {remote.url()}")
    try:
        return download_file(remote.url(), downloads / remote.name, hint=_hint(target, remote),
                             check=CHECKS[remote.name], expected_bytes=remote.bytes)
    finally:
        with contextlib.suppress(OSError):  # removed only when empty: a refused download leaves nothing behind
            downloads.rmdir()


def _from_file(target: str, remote: RemoteFile, from_dir: Path) -> Path:
    """``from_dir``'s copy of ``remote``, checked as a download is (CselabError naming what is wrong)."""
    path = from_dir / remote.name
    if not path.is_file():
        raise CselabError(f"{remote.name} not found in {from_dir}: download {remote.url()} where it is reachable "
                          "and copy it there")
    CHECKS[remote.name](path)
    return path


def check_published(path: Path, remote: RemoteFile) -> None:
    """The pinned size and sha256 of ``remote``, where pinned."""
    size = path.stat().st_size
    if remote.bytes is not None and size != remote.bytes:
        raise CselabError(f"{path} is {size} bytes, the published size is {remote.bytes}: a different or "
                          "damaged file")
    if remote.sha256 is not None and sha256_file(path) != remote.sha256:
        raise CselabError(f"{path} has another sha256 than the published {remote.name}: a different or damaged file")


# A text of the training set may hold a few blank lines (the training reader skips them); the published file's
# count of them is not known here, so a small share is let through and a file mostly blank is refused.
MAX_BLANK_SHARE = 0.001


def check_wiki1m(path: Path) -> None:
    """Wiki1M as SimCSE published it: the pinned size and sha256 where pinned, :data:`WIKI1M`'s line count, UTF-8
    text without NUL bytes, and at most :data:`MAX_BLANK_SHARE` of blank lines. CselabError naming what differs."""
    import codecs

    check_published(path, WIKI1M)
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = blank = 0
    tail = b""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            if b"\0" in block:
                raise CselabError(f"{path} holds NUL bytes: not a text file, so not SimCSE's Wiki1M (a different or "
                                  "damaged file)")
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                raise CselabError(f"{path} is not UTF-8 text ({exc.reason}): not SimCSE's Wiki1M (a different or "
                                  "damaged file)") from None
            pieces = (tail + block).split(b"\n")
            tail = pieces.pop()
            lines += len(pieces)
            blank += sum(1 for piece in pieces if not piece.strip())
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise CselabError(f"{path} ends inside a UTF-8 character: a cut or damaged file") from None
    if tail:
        lines += 1
        blank += not tail.strip()
    if WIKI1M.lines is not None and lines != WIKI1M.lines:
        raise CselabError(f"{path} has {lines} lines, SimCSE published {WIKI1M.lines}: a different or damaged file")
    if blank > MAX_BLANK_SHARE * max(lines, 1):
        raise CselabError(f"{path} has {blank} blank lines of {lines}: not SimCSE's Wiki1M (a different or damaged "
                          "file)")


def check_senteval_tar(path: Path) -> None:
    """SimCSE's senteval.tar: the pinned size and sha256 where pinned, a tar whose every member reads to its end
    (a cut tar is refused), holding files in each of the seven tasks' folders (:data:`SENTEVAL_DIRS`)."""
    check_published(path, SENTEVAL_TAR)
    found: set[str] = set()
    try:
        with tarfile.open(path) as tf:
            for member in tf:
                if member.isfile():
                    data = tf.extractfile(member)
                    if data is None or len(data.read()) != member.size:
                        raise tarfile.ReadError(f"{member.name} is cut short")
                rel = _relative_in_senteval(member.name) if member.isfile() else None
                if rel is not None:
                    found |= {d for d in SENTEVAL_DIRS if rel.startswith(d + "/")}
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CselabError(f"{path} is not a tar archive SentEval's data can be read from ({exc}): a different or "
                          "damaged file") from None
    missing = [d for d in SENTEVAL_DIRS if d not in found]
    if missing:
        raise CselabError(f"{path} holds no {', '.join(missing)}: not SimCSE's senteval.tar (a different or damaged "
                          "file)")


CHECKS: dict[str, Callable[[Path], None]] = {
    "wiki1m_for_simcse.txt": lambda path: check_wiki1m(path),
    "senteval.tar": lambda path: check_senteval_tar(path),
}


def _source_entry(path: Path, remote: RemoteFile, from_dir: bool) -> dict:
    return {"url": remote.url(), "file": remote.name, "from": "--from" if from_dir else "download",
            "bytes": path.stat().st_size, "sha256": sha256_file(path)}


# --------------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------------


def _count_lines(path: Path) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _build_wiki1m(source: Path, out: Path) -> dict:
    lines = _count_lines(source)
    if WIKI1M.lines is not None and lines != WIKI1M.lines:
        raise CselabError(f"{source} has {lines} lines, SimCSE published {WIKI1M.lines}: a different or damaged file; "
                          "delete it and fetch again")
    shutil.copyfile(source, out / WIKI1M.name)
    return {"target": "wiki1m", "source": _source_entry(source, WIKI1M, source.parent.name != ".downloads"),
            "lines": lines, "files": files_entry(out, [WIKI1M.name])}


def _senteval_layout(from_dir: Path) -> Path | None:
    """An extracted SentEval data directory at or under ``from_dir`` (None: look for senteval.tar instead)."""
    from cselab.data.evalsets.sts import senteval_root

    try:
        return senteval_root(from_dir)
    except CselabError:
        return None


def _relative_in_senteval(member: str) -> str | None:
    """``STS/STS12-en-test/STS.gs.MSRpar.txt`` (or ``SICK/...``) of a tar member of one of the seven tasks' folders,
    whatever folders the tar puts above it; None for anything else."""
    parts = PurePosixPath(member).parts
    for i in range(len(parts)):
        rest = "/".join(parts[i:])
        if any(rest.startswith(d + "/") for d in SENTEVAL_DIRS) and ".." not in parts:
            return rest
    return None


def _build_senteval(tar_path: Path | None, layout: Path | None, out: Path) -> dict:
    names: list[str] = []
    if layout is not None:
        for directory in SENTEVAL_DIRS:
            for path in sorted((layout / directory).glob("*")) if (layout / directory).is_dir() else []:
                if path.is_file():
                    rel = f"{directory}/{path.name}"
                    (out / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, out / rel)
                    names.append(rel)
    else:
        assert tar_path is not None
        try:
            with tarfile.open(tar_path) as tf:
                for member in tf.getmembers():
                    rel = _relative_in_senteval(member.name) if member.isfile() else None
                    if rel is None:
                        continue
                    (out / rel).parent.mkdir(parents=True, exist_ok=True)
                    (out / rel).write_bytes(tf.extractfile(member).read())
                    names.append(rel)
        except tarfile.TarError as exc:
            raise CselabError(f"{tar_path} is not a tar archive SentEval's data can be read from ({exc}); delete it "
                              "and fetch again") from None
    pairs = check_senteval(out)
    source = (_source_entry(tar_path, SENTEVAL_TAR, tar_path.parent.name != ".downloads") if tar_path is not None
              else {"from": "--from", "directory": str(layout)})
    return {"target": "senteval", "source": source, "pairs": pairs, "files": files_entry(out, sorted(names))}


def check_senteval(directory: Path) -> dict[str, int]:
    """Load the seven tasks from a SentEval layout and check their pair counts against :data:`SENTEVAL_PAIRS`."""
    from cselab.data.evalsets.sts import load_task

    pairs = {}
    for task, expected in SENTEVAL_PAIRS.items():
        try:
            pairs[task] = load_task(task, "test", senteval_dir=directory).size
        except CselabError as exc:
            raise CselabError(f"SentEval's data is incomplete: {exc}") from None
        if pairs[task] != expected:
            raise CselabError(f"SentEval's {task} test has {pairs[task]} scored pairs, the published count is "
                              f"{expected}: a different or damaged file; delete it and fetch again")
    return pairs


def sickr_sentences(senteval_dir: Path) -> list[str]:
    """The SICK-R sentences (sentence_A, sentence_B) of the train, trial and test files, unlabelled, first
    occurrence kept, in file order."""
    from cselab.data.evalsets.sts import SICK_FILES, read_sick_file, senteval_root

    root = senteval_root(senteval_dir)
    seen: dict[str, None] = {}
    for split in ("train", "dev", "test"):
        subset = read_sick_file(root / "SICK" / SICK_FILES[split])
        for a, b in zip(subset.sentences1, subset.sentences2, strict=True):
            seen.setdefault(a)
            seen.setdefault(b)
    return list(seen)


def _build_sickr(senteval_dir: Path, out: Path) -> dict:
    sentences = sickr_sentences(senteval_dir)
    (out / SICKR_FILE).write_bytes(lines_bytes(sentences))
    return {"target": "sickr", "source": "senteval/SICK (train, trial, test; sentence_A and sentence_B)",
            "sentences": len(sentences), "files": files_entry(out, [SICKR_FILE])}


def _build_wiki1m_sickr(home: Path, out: Path) -> dict:
    wiki, sick = paper_path("wiki1m", home), paper_path("sickr", home)
    with open(out / WIKI1M_SICKR_FILE, "wb") as dst:
        for src in (wiki, sick):
            data = src.read_bytes()
            dst.write(data if not data or data.endswith(b"\n") else data + b"\n")
    return {"target": "wiki1m-sickr", "parts": [str(wiki.relative_to(home)), str(sick.relative_to(home))],
            "lines": _count_lines(out / WIKI1M_SICKR_FILE), "files": files_entry(out, [WIKI1M_SICKR_FILE])}


def download_paper(target: str, dest: Path) -> list[Path]:
    """Download the published files a paper target is built from into ``dest`` (resumable, checked as a fetch checks
    them), for a later ``cselab data fetch TARGET --from DEST`` on a machine that cannot reach the source. Every file's
    place is checked before the first download, and nothing is created before the server answers."""
    if target not in PAPER_TARGETS:
        raise CselabError(f"unknown paper target {target!r}; valid: {', '.join(PAPER_TARGETS)}")
    remotes = {"wiki1m": (WIKI1M,), "senteval": (SENTEVAL_TAR,), "sickr": (SENTEVAL_TAR,)}.get(
        target, (WIKI1M, SENTEVAL_TAR))
    dest = Path(dest)
    for remote in remotes:  # every place is checked before the first download
        remote.url()
        check_download_place(dest / remote.name)
    out = []
    for remote in remotes:
        report().say(f"{target}: downloading {remote.url()}")
        out.append(download_file(remote.url(), dest / remote.name, hint=_hint(target, remote),
                                 check=CHECKS[remote.name], expected_bytes=remote.bytes))
    return out


__all__ = ["PAPER_TARGETS", "DownloadError", "download_paper", "fetch_paper", "is_paper_fetched", "paper_path"]
