"""Training sentences named by a run's ``data`` config: a fetched corpus by name, or any text file."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import CselabError
from ..paths import cselab_home
from ..training.config import DataConfig
from .corpus import read_corpus

logger = logging.getLogger(__name__)

# corpus name -> file under $CSELAB_HOME/corpus (built by `cselab data fetch corpus`)
NAMED_CORPORA = {"default": "default.txt", "default+stsb-train": "default+stsb-train.txt"}


def corpus_path(name: str, home: Path | None = None) -> Path:
    """The file of a named corpus (which must have been fetched) or the given path."""
    if name in NAMED_CORPORA:
        path = (home or cselab_home()) / "corpus" / NAMED_CORPORA[name]
        if not path.is_file():
            hint = " --with-stsb-train" if name != "default" else ""
            raise CselabError(f"corpus {name!r} is not built yet: run `cselab data fetch corpus{hint}` first")
        return path
    return Path(name).expanduser()


def load_training_sentences(config: DataConfig, home: Path | None = None) -> list[str]:
    """Read the corpus, report skipped lines, keep the first ``max_sentences``."""
    corpus = read_corpus(corpus_path(config.corpus, home), max_words=config.max_words)
    logger.info(corpus.summary())
    if corpus.skipped:
        print(f"corpus: {corpus.summary()}")
    sentences = corpus.sentences
    if config.max_sentences is not None:
        sentences = sentences[: config.max_sentences]
    return sentences
