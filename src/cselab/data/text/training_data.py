"""Training sentences named by a run's ``data`` config: a fetched corpus by name, or any text file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from cselab.config.run_config import DataConfig
from cselab.data.evalsets.indomain import BUILD_COMMAND, INDOMAIN_CORPORA, eval_task_sentences, text_overlap
from cselab.data.stores.corpus_index import open_indexed_corpus
from cselab.data.text.corpus import UTF8_BOM, read_corpus, utf8_payload
from cselab.errors import CselabError
from cselab.fileio import sha256_file
from cselab.paths import cselab_home
from cselab.reporter import report

# corpus name -> (file under $CSELAB_HOME, the command that builds it)
NAMED_CORPORA = {
    "default": ("corpus/default.txt", "cselab data fetch corpus"),
    "default+stsb-train": ("corpus/default+stsb-train.txt", "cselab data fetch corpus --with-stsb-train"),
    # the English side of the fetched English-German pairs (IFCL's sentences, as a plain corpus)
    "parallel-de.en": ("parallel-de/train.en", "cselab data fetch parallel-de"),
    # unlabelled STS-B train sentences minus held-out evaluation sentences (the adaptation protocol)
    **{name: (f"corpus/{name}.txt", BUILD_COMMAND) for name in INDOMAIN_CORPORA},
}


def corpus_path(name: str, home: Path | None = None) -> Path:
    """The file of a named corpus (which must have been fetched) or the given path."""
    if name in NAMED_CORPORA:
        relative, command = NAMED_CORPORA[name]
        path = (home or cselab_home()) / relative
        if not path.is_file():
            raise CselabError(f"corpus {name!r} is not built yet: run `{command}` first")
        return path
    return Path(name).expanduser()


def load_training_sentences(config: DataConfig, home: Path | None = None) -> Sequence[str]:
    """Open the corpus (lazily, through its on-disk index), report skipped lines, keep the first ``max_sentences``."""
    corpus = open_indexed_corpus(corpus_path(config.corpus, home), max_words=config.max_words, home=home)
    if corpus.skipped:
        report().say(f"corpus: {corpus.summary()}")
    sentences = corpus.sentences
    if config.max_sentences is not None:
        sentences = sentences[: config.max_sentences]
    return sentences


def training_text_summary(corpus: str, home: Path | None = None) -> dict:
    """What a results record says about its training text: name, size, checksum, test-task overlap, and the
    tasks that are therefore not held out. Raises :class:`CselabError` if the text or the STS data is missing."""
    # IFCL names its parallel corpus; its English side is the text the encoder sees
    path = corpus_path("parallel-de.en" if corpus == "parallel-de" else corpus, home)
    counted = _Counted(corpus_lines(path))
    overlap = text_overlap(counted, eval_task_sentences(home))
    if not counted.n:
        read_corpus(path)  # says why the file has no usable line, as training would
    return {"corpus": corpus, "sentences": counted.n, "sha256": sha256_file(path), "overlap": overlap,
            "not_held_out": [task for task, n in overlap.items() if n]}


class _Counted:
    """An iterable of lines that counts what went through it (``n``)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines, self.n = lines, 0

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.n += 1
            yield line


def corpus_lines(path: Path) -> Iterator[str]:
    """The sentences :func:`~cselab.data.text.corpus.read_corpus` keeps of ``path`` (lines split on ``\n``, stripped,
    blank and invalid UTF-8 lines skipped), one at a time: what is only counted is never all in memory at once (a
    corpus of 5 million lines held as Python strings adds 1.5 GB to a run's peak). A file in another encoding is
    refused as ``read_corpus`` refuses it."""
    if not path.is_file():
        raise CselabError(f"corpus file not found: {path}")
    with path.open("rb") as f:
        head = f.read(4096)
        utf8_payload(head, path, "corpus file")  # the encoding check looks at the first 4 KiB only
        f.seek(len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0)
        for raw in f:
            raw = raw[:-1] if raw.endswith(b"\n") else raw
            try:
                line = (raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8").strip()
            except UnicodeDecodeError:
                continue
            if line:
                yield line
