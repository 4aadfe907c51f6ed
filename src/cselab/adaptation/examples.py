"""The user's text into training examples: its distinct sentences, the held-out part, lines or passages of lines
(shuffled, or grouped by TF-IDF neighbours), the general sentences beside them, and the seeded draw that makes the
examples the budget trains on (so the cost follows the budget, not the size of the text). No model is loaded here
but a tokenizer (a passage is as long as its lines' tokens)."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cselab.data.text.corpus import read_corpus
from cselab.errors import CselabError
from cselab.paths import resolve_model_path
from cselab.vocabulary import PASSAGE_GROUPINGS

HELD_OUT_FRACTION, HELD_OUT_MAX, HELD_OUT_MIN = 0.05, 500, 20
SPLIT_SEED = 0
UNITS_SEED = 0
UNIT_COPIES = {"lines": 1, "passages": 1, "mixed": 2}  # how many times the training examples hold each line
SIMILAR_CANDIDATES = 32  # the nearest lines in words a similar passage may take, for each line that starts one
NEIGHBOUR_BLOCK_CELLS = 50_000_000  # cosines held at once while finding them (400 MB)
MAX_GENERAL_CHARACTERS = 10_000  # a longer "sentence" of the general text is a file that is not one per line


def read_text(path: str | Path, max_sentences: int | None = None) -> list[str]:
    """The user's distinct sentences in file order (the first ``max_sentences`` of them when given)."""
    unique = list(dict.fromkeys(read_corpus(path).sentences))
    return unique if max_sentences is None else unique[:max_sentences]


def split_held_out(sentences: Sequence[str], seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(train, held out): distinct sentences, a seeded 5% (20 to 500) held out."""
    unique = list(dict.fromkeys(sentences))
    n_held = min(HELD_OUT_MAX, max(HELD_OUT_MIN, round(HELD_OUT_FRACTION * len(unique))))
    order = list(range(len(unique)))
    random.Random(seed).shuffle(order)
    held = set(order[:n_held])
    return [s for i, s in enumerate(unique) if i not in held], [s for i, s in enumerate(unique) if i in held]


def nearest_in_words(sentences: Sequence[str], k: int = SIMILAR_CANDIDATES) -> list[list[int]]:
    """For each sentence, the indices of the ``k`` other sentences nearest to it by the cosine of their TF-IDF
    vectors (sublinear term frequencies; scikit-learn's), nearest first; a sentence that shares no word with any
    other has none. No model is needed, so the plan can make similar passages before any model loads. Every pair is
    compared (the cost grows with the square of the text), a block of rows at a time, with a progress bar."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    from cselab.reporter import report

    n = len(sentences)
    if n < 2:
        return [[] for _ in sentences]
    try:
        vectors = TfidfVectorizer(sublinear_tf=True).fit_transform(sentences)
    except ValueError:  # no word at all in the text (only punctuation or stop characters)
        return [[] for _ in sentences]
    k = min(k, n - 1)
    chunk = max(1, min(1024, NEIGHBOUR_BLOCK_CELLS // n))  # rows whose cosines with every sentence are held at once
    nearest: list[list[int]] = []
    with report().bar(total=n, desc="passages: nearest lines in words", unit="line") as bar:
        for start in range(0, n, chunk):
            sims = (vectors[start:start + chunk] @ vectors.T).toarray()
            rows = np.arange(sims.shape[0])
            sims[rows, rows + start] = -1.0  # never a sentence's own neighbour
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            top_sims = np.take_along_axis(sims, top, axis=1)
            ranked = np.lexsort((top, -top_sims), axis=1)  # nearest first, the lower index first on a tie
            top, top_sims = np.take_along_axis(top, ranked, axis=1), np.take_along_axis(top_sims, ranked, axis=1)
            nearest.extend(row[row_sims > 0].tolist() for row, row_sims in zip(top, top_sims, strict=True))
            bar.update(len(rows))
    return nearest


def make_passages(sentences: Sequence[str], lengths: Sequence[int], max_tokens: int,
                  seed: int = UNITS_SEED, grouping: str = "shuffled") -> list[str]:
    """The sentences grouped into passages joined by a space; every sentence is in exactly one passage, each passage
    takes sentences while their token ``lengths`` sum to at most a target drawn uniformly from 1 to ``max_tokens``
    (always at least one sentence). ``shuffled``: the sentences shuffled (seeded), each passage the next ones.
    ``similar``: each passage starts at the next unused sentence of the shuffled order and takes its unused nearest
    sentences in words (:func:`nearest_in_words`), nearest first, while they fit."""
    if grouping not in PASSAGE_GROUPINGS:
        raise CselabError(f"passages must be one of {', '.join(PASSAGE_GROUPINGS)}, got {grouping!r}")
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    nearest = nearest_in_words(sentences) if grouping == "similar" else None
    used = [False] * len(sentences)
    passages, i = [], 0
    while i < len(order):
        if used[order[i]]:
            i += 1
            continue
        target = rng.randint(1, max_tokens)
        first = order[i]
        group, total = [first], lengths[first]
        used[first] = True
        following = (j for j in nearest[first] if not used[j]) if nearest is not None else (
            order[n] for n in range(i + 1, len(order)))
        for j in following:
            if total + lengths[j] > target:
                break
            group.append(j)
            total += lengths[j]
            used[j] = True
        i += 1
        passages.append(" ".join(sentences[j] for j in group))
    return passages


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str) -> Any:
    """``path``'s tokenizer, loaded once for every text a plan makes into passages (the training examples, the
    held-out text and the guard's view)."""
    from transformers import AutoTokenizer

    from cselab.models.backbone import quiet_transformers

    quiet_transformers()
    return AutoTokenizer.from_pretrained(path)


def training_units(model: str, train: Sequence[str], units: str, max_length: int,
                   passages: str = "shuffled") -> list[str]:
    """The training examples of ``train``: its lines, passages of them up to ``max_length`` of ``model``'s tokens
    grouped as ``passages`` says (:func:`make_passages`), or (``mixed``) its lines followed by those passages."""
    if units == "lines":
        return list(train)
    tokenizer = _tokenizer(str(Path(resolve_model_path(model)).resolve()))
    special = len(tokenizer("")["input_ids"])  # [CLS] and [SEP] (or <s> and </s>), once per passage
    lengths = [len(ids) - special for ids in tokenizer(list(train), truncation=False)["input_ids"]]
    made = make_passages(train, lengths, max(1, max_length - special), grouping=passages)
    return [*train, *made] if units == "mixed" else made


def read_general(path: str | Path) -> list[str]:
    """The distinct sentences of a general text, refused in one line where it is not one UTF-8 sentence per line
    (a line that is not UTF-8, or one longer than :data:`MAX_GENERAL_CHARACTERS`): a line dropped or a file read as
    one sentence would change the training without a word."""
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"general sentences {path}: no such file (general sentences, one per line)")
    corpus = read_corpus(path)
    if corpus.skipped_invalid_utf8:
        raise CselabError(f"general sentences {path}: {corpus.skipped_invalid_utf8} lines are not valid UTF-8; give "
                          "a UTF-8 file, one sentence per line")
    longest = max(corpus.sentences, key=len)
    if len(longest) > MAX_GENERAL_CHARACTERS:
        raise CselabError(f"general sentences {path}: a line of {len(longest):,} characters; give one sentence per "
                          f"line (at most {MAX_GENERAL_CHARACTERS:,} characters)")
    return list(dict.fromkeys(corpus.sentences))


def draw_general(path: str | Path, own: Sequence[str], count: int, seed: int = UNITS_SEED) -> list[str]:
    """``count`` distinct sentences of the general text ``path`` (all of them when it has fewer), drawn at random
    (seeded), none of them a sentence of the user's text ``own`` (so no held-out sentence is trained on through it)."""
    mine = set(own)
    pool = [s for s in read_general(path) if s not in mine]
    if not pool:
        raise CselabError(f"general sentences {path}: no sentence that is not also in the text to adapt to")
    random.Random(seed).shuffle(pool)
    return pool[:count]


def drawn_units(model: str, train: Sequence[str], units: str, max_length: int, passages: str = "shuffled",
                limit: int | None = None, seed: int = UNITS_SEED) -> tuple[list[str], list[str]]:
    """(the lines trained on, the training examples made of them): every line of ``train`` when its examples fit in
    ``limit`` (or no limit is given), else a seeded draw of lines, kept in file order, that makes at most ``limit``
    examples: ``limit`` lines; for passages, lines drawn until their passages reach ``limit`` (only the drawn lines
    are tokenised; the passages beyond ``limit`` dropped); for mixed, ``limit // 2`` lines, each as itself and in a
    passage. So the tokenising, the teacher's pass and every other per-example cost follow the budget."""
    if limit is None or len(train) * UNIT_COPIES[units] <= limit:
        return list(train), training_units(model, train, units, max_length, passages)
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)

    def lines(m: int) -> list[str]:
        return [train[i] for i in sorted(order[:m])]

    if units == "lines":
        drawn = lines(limit)
        return drawn, drawn
    if units == "mixed":
        drawn = lines(max(1, limit // 2))
        return drawn, training_units(model, drawn, units, max_length, passages)
    count = limit
    while True:
        drawn = lines(count)
        made = training_units(model, drawn, units, max_length, passages)
        if len(made) >= limit or count == len(train):
            return drawn, made[:limit]
        count = min(len(train), math.ceil(count * limit / max(1, len(made)) * 1.1))
