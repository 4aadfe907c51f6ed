"""In-domain unlabelled text for the adaptation protocol, and how much of each test set a training text holds.

The STS-B adaptation protocol asks whether unsupervised training on unlabelled text of the user's
domain improves an already good sentence encoder. The in-domain text obtainable here is the STS-B **train**
split's sentences without their scores. It must not contain the sentences that are scored as held out:

* ``stsb-train-minus-stsb-eval`` removes every sentence of every STS-B dev and test pair. The STS17 en-en pairs
  are STS-B dev/test rows, so they go too. The partial STS12-16 sets are rebuilt from rows of ALL THREE STS-B
  splits (about three quarters of the train rows), so with this text their columns are NOT held out.
* ``stsb-train-minus-all-eval`` also removes every sentence of every pair of ``sts12-part`` .. ``sts16-part``
  (whatever split the row sits in), so every column of the evaluation table is held out; much less is left.

Sentences are compared by :func:`sentence_key` (case-folded, whitespace collapsed): the backbones here are
uncased, so a sentence that differs only in case is the same input and counts as seen. The removal is done
on keys, the kept sentences are written as they appear in STS-B (first occurrence of each key), shuffled
with the fixed corpus seed.

:func:`text_overlap` counts, for any training text, the distinct sentences of each test task found in it;
the results record of an adaptation run carries it, so its table marks the columns that are not held out
from the data themselves rather than from the corpus's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cselab.data.evalsets.sts import PART_TASKS, StsbRow, read_stsb_file, stsb_dir
from cselab.data.text.corpus import shuffled
from cselab.errors import CselabError
from cselab.fileio import sha256_file, write_atomic, write_json_atomic
from cselab.paths import cselab_home
from cselab.vocabulary import SPLITS

INDOMAIN_SEED = 0  # the default corpus's shuffling seed, so every corpus file here is built the same way
STSB_EVAL_SPLITS = ("dev", "test")
BUILD_COMMAND = "cselab data indomain"

# corpus name -> the (dataset, year) pairs whose rows are removed from EVERY split besides STS-B dev/test
INDOMAIN_CORPORA: dict[str, tuple[tuple[str, str], ...]] = {
    "stsb-train-minus-stsb-eval": (),
    "stsb-train-minus-all-eval": tuple(entry for entries in PART_TASKS.values() for entry in entries),
}


def sentence_key(sentence: str) -> str:
    """The form two sentences are compared in: case-folded, runs of whitespace collapsed to one space."""
    return " ".join(sentence.casefold().split())


def _pair_sentences(rows: Iterable[StsbRow]) -> Iterable[str]:
    for row in rows:
        yield row.sentence1
        yield row.sentence2


def removed_keys(rows_by_split: Mapping[str, Sequence[StsbRow]],
                 removed_datasets: Iterable[tuple[str, str]]) -> set[str]:
    """Keys of every sentence of every STS-B dev/test pair and of every pair (any split) of ``removed_datasets``."""
    removed = set(removed_datasets)
    held_out = [r for split in STSB_EVAL_SPLITS for r in rows_by_split[split]]
    held_out += [r for split in SPLITS for r in rows_by_split[split] if (r.dataset, r.year) in removed]
    return {sentence_key(s) for s in _pair_sentences(held_out)}


@dataclass(frozen=True)
class IndomainText:
    """An in-domain corpus: its sentences (file order) and what was removed to build it."""

    name: str
    sentences: list[str]
    train_sentences: int  # distinct (by key) sentences of the STS-B train split
    removed: int          # of those, how many were held-out sentences

    @property
    def kept(self) -> int:
        return len(self.sentences)


def indomain_text(name: str, rows_by_split: Mapping[str, Sequence[StsbRow]]) -> IndomainText:
    """The sentences of the in-domain corpus ``name`` (see :data:`INDOMAIN_CORPORA`) from the three STS-B splits."""
    if name not in INDOMAIN_CORPORA:
        raise CselabError(f"unknown in-domain corpus {name!r}; valid: {', '.join(INDOMAIN_CORPORA)}")
    removed = removed_keys(rows_by_split, INDOMAIN_CORPORA[name])
    first: dict[str, str] = {}
    for sentence in _pair_sentences(rows_by_split["train"]):
        first.setdefault(sentence_key(sentence), sentence)
    kept = [s for key, s in first.items() if key not in removed]
    return IndomainText(name, shuffled(kept, INDOMAIN_SEED), len(first), len(first) - len(kept))


# -- which test sets a training text holds ------------------------------------------------------------------
def eval_task_sentences(home: Path | None = None) -> dict[str, set[str]]:
    """Keys of the distinct sentences of every test task of the default evaluation table."""
    from cselab.data.evalsets.sts import DEFAULT_TASKS, load_task

    out = {}
    for name in DEFAULT_TASKS:
        task = load_task(name, "test", home=home)
        out[name] = {sentence_key(s) for sub in task.subsets for s in (*sub.sentences1, *sub.sentences2)}
    return out


def text_overlap(sentences: Iterable[str], tasks: Mapping[str, set[str]]) -> dict[str, int]:
    """For each task, how many of its distinct sentences (keys) occur in ``sentences``; 0 = held out. The sentences
    stream by: only the tasks' keys that were found are kept, so a corpus of millions of lines costs no memory."""
    every = set().union(*tasks.values()) if tasks else set()
    found: set[str] = set()
    for sentence in sentences:
        key = sentence_key(sentence)
        if key in every:
            found.add(key)
    return {name: len(keys & found) for name, keys in tasks.items()}


# -- building the files -------------------------------------------------------------------------------------
def indomain_path(name: str, home: Path | None = None) -> Path:
    return (home if home is not None else cselab_home()) / "corpus" / f"{name}.txt"


def build_indomain_corpora(home: Path | None = None) -> list[dict]:
    """Write every in-domain corpus to ``$CSELAB_HOME/corpus/<name>.txt`` with a ``<name>.json`` manifest
    (counts, checksum, test-task overlap); returns the manifests. Needs ``cselab data fetch sts``. A corpus that
    would be empty (every train sentence is held out, as on a tiny or partial STS-B) is refused before any file
    is written: a 0-sentence training text is never built."""
    directory = stsb_dir(home)
    missing = [s for s in SPLITS if not (directory / f"sts-{s}.csv").is_file()]
    if missing:
        raise CselabError(f"STS-B {', '.join(missing)} not found in {directory}: run `cselab data fetch sts` first")
    rows = {split: read_stsb_file(directory / f"sts-{split}.csv") for split in SPLITS}
    texts = [indomain_text(name, rows) for name in INDOMAIN_CORPORA]
    for text in texts:
        if not text.sentences:
            raise CselabError(f"in-domain corpus {text.name} would be empty: all {text.train_sentences} distinct "
                              f"STS-B train sentences of {directory} are held out; is the STS-B there complete? "
                              "(`cselab data fetch sts`); nothing was written")
    tasks = eval_task_sentences(home)
    manifests = []
    for text in texts:
        name = text.name
        path = indomain_path(name, home)
        write_atomic(path, "".join(f"{s}\n" for s in text.sentences))
        overlap = text_overlap(text.sentences, tasks)
        manifest = {**{k: v for k, v in asdict(text).items() if k != "sentences"}, "kept": text.kept,
                    "file": path.name, "sha256": sha256_file(path), "seed": INDOMAIN_SEED,
                    "removed_datasets": [list(entry) for entry in INDOMAIN_CORPORA[name]],
                    "overlap": overlap, "not_held_out": [task for task, n in overlap.items() if n]}
        write_json_atomic(path.with_suffix(".json"), manifest)
        manifests.append(manifest)
    return manifests
