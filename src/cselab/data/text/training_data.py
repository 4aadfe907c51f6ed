"""Training sentences named by a run's ``data`` config: a fetched corpus by name, or any text file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cselab.config.run_config import DataConfig
from cselab.data.evalsets.indomain import BUILD_COMMAND, INDOMAIN_CORPORA, eval_task_sentences, text_overlap
from cselab.data.stores.corpus_index import open_indexed_corpus
from cselab.data.text.corpus import read_corpus
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
    sentences = read_corpus(path).sentences
    overlap = text_overlap(sentences, eval_task_sentences(home))
    return {"corpus": corpus, "sentences": len(sentences), "sha256": sha256_file(path), "overlap": overlap,
            "not_held_out": [task for task, n in overlap.items() if n]}
