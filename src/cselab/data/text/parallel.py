"""Line-aligned parallel corpora (e.g. English-German for IFCL's fraternal twins).

A parallel corpus is two UTF-8 files where line ``i`` of one is the translation of line ``i`` of the
other. :func:`read_parallel` reads them for training; :func:`is_clean_pair` is the filter used when the
fetched corpus is built (the English side of nlp-corpus is web text of mixed quality).
"""

from __future__ import annotations

from pathlib import Path

from cselab.data.text.corpus import letter_fraction, split_lines, word_count
from cselab.errors import CselabError

MIN_PAIR_WORDS = 3
MAX_PAIR_WORDS = 60


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[tuple[str, str]], int]:
    """Read two line-aligned files into ``(source, target)`` pairs.

    Returns the pairs and the number of skipped pairs: a pair is skipped when either side is blank or
    not valid UTF-8. Raises :class:`CselabError` when a file is missing, the files have different line
    counts (they cannot be aligned), or no pair is left.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    for path in (src_path, tgt_path):
        if not path.is_file():
            raise CselabError(f"parallel corpus file not found: {path}")
    src_lines = split_lines(src_path.read_bytes())
    tgt_lines = split_lines(tgt_path.read_bytes())
    if len(src_lines) != len(tgt_lines):
        raise CselabError(
            f"parallel files are not line-aligned: {src_path} has {len(src_lines)} lines, "
            f"{tgt_path} has {len(tgt_lines)}"
        )
    pairs: list[tuple[str, str]] = []
    skipped = 0
    for raw_src, raw_tgt in zip(src_lines, tgt_lines, strict=True):
        try:
            src = raw_src.decode("utf-8").strip()
            tgt = raw_tgt.decode("utf-8").strip()
        except UnicodeDecodeError:
            skipped += 1
            continue
        if src and tgt:
            pairs.append((src, tgt))
        else:
            skipped += 1
    if not pairs:
        raise CselabError(f"parallel corpus {src_path} / {tgt_path} has no pair with text on both sides")
    return pairs, skipped


def _clean_side(text: str) -> bool:
    if not MIN_PAIR_WORDS <= word_count(text) <= MAX_PAIR_WORDS:
        return False
    if any(ord(c) < 32 for c in text) or "http" in text or "www." in text:
        return False
    return letter_fraction(text) >= 0.7


def is_clean_pair(source: str, target: str) -> bool:
    """True for a normalised English/translation pair worth training on.

    Each side needs 3-60 words, mostly letters, no control characters or URLs; the English side must be
    written in Latin letters (mostly ASCII) and the character-length ratio of the two sides must lie in
    [0.5, 3] (a much shorter or longer "translation" is a truncation or a hallucination).
    """
    if not (_clean_side(source) and _clean_side(target)):
        return False
    letters = [c for c in source if c.isalpha()]
    if sum(c.isascii() for c in letters) < 0.9 * len(letters):
        return False
    return 0.5 <= len(target) / len(source) <= 3.0
