"""Unlabelled training sentences: the reader used for training and the pure steps that build a corpus.

A training corpus is a UTF-8 text file with one sentence per line. :func:`read_corpus` reads it and
reports what it skipped instead of failing on the first bad line, because large scraped corpora always
contain a few. The building steps (sentence splitting, source-specific clean-up, filtering,
deduplication, seeded shuffling) are small pure functions so that `cselab.data.registry.fetch` stays a thin
download-and-assemble layer and every rule is unit-tested here.
"""

from __future__ import annotations

import html
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cselab.errors import CselabError

MIN_WORDS = 5
MAX_WORDS = 40


# --------------------------------------------------------------------------------------------------
# Reading a corpus file
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """The usable sentences of a corpus file and how many lines were skipped, by reason."""

    path: Path
    sentences: list[str]
    skipped_blank: int = 0
    skipped_invalid_utf8: int = 0
    skipped_too_long: int = 0

    @property
    def skipped(self) -> int:
        return self.skipped_blank + self.skipped_invalid_utf8 + self.skipped_too_long

    def __len__(self) -> int:
        return len(self.sentences)

    def summary(self) -> str:
        """One line for logs, e.g. ``1000 sentences from x.txt (3 skipped: 2 blank, 1 invalid UTF-8)``."""
        text = f"{len(self.sentences)} sentences from {self.path}"
        if self.skipped:
            parts = [
                f"{n} {reason}"
                for n, reason in (
                    (self.skipped_blank, "blank"),
                    (self.skipped_invalid_utf8, "invalid UTF-8"),
                    (self.skipped_too_long, "over max_words"),
                )
                if n
            ]
            text += f" ({self.skipped} skipped: {', '.join(parts)})"
        return text


def split_lines(data: bytes) -> list[bytes]:
    """Split file content on ``\\n`` only (like ``wc -l``), dropping the empty piece after a final newline.

    ``str.splitlines`` is not used because it also splits on characters such as U+2028 and U+0085 that
    may occur inside a sentence, which would shift line alignment in parallel files.
    """
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
    (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"),
)
UTF8_BOM = b"\xef\xbb\xbf"


def guess_non_utf8_encoding(data: bytes) -> str | None:
    """The encoding ``data`` looks like when it is clearly NOT UTF-8 text, else None.

    A UTF-16/32 byte-order mark names it; without one, NUL bytes (which UTF-8 text never holds) in the first
    4 KiB give it away: mostly at odd offsets is UTF-16-LE (ASCII text), at even offsets UTF-16-BE, else the
    file is binary. Such a file often DECODES as UTF-8 (ASCII plus NULs), so decoding alone would train on
    garbage.
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    head = data[:4096]
    nuls = [i for i, byte in enumerate(head) if byte == 0]
    if not nuls:
        return None
    odd = sum(i % 2 for i in nuls)
    if len(nuls) >= len(head) // 4:
        if odd >= 0.9 * len(nuls):
            return "UTF-16-LE"
        if odd <= 0.1 * len(nuls):
            return "UTF-16-BE"
    return "binary (NUL bytes)"


def utf8_payload(data: bytes, path: Path, what: str) -> bytes:
    """``data`` without a UTF-8 byte-order mark; a file that looks like another encoding is refused, naming it."""
    encoding = guess_non_utf8_encoding(data)
    if encoding is not None:
        convert = f"iconv -f {encoding} -t UTF-8" if encoding.startswith("UTF") else "a text export"
        raise CselabError(f"{what} {path} is not UTF-8 text: it looks like {encoding}; convert it ({convert})")
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def read_corpus(path: str | Path, *, max_words: int | None = None) -> Corpus:
    """Read a one-sentence-per-line UTF-8 file for training.

    Blank lines, lines that are not valid UTF-8 and (when ``max_words`` is given) lines with more than
    ``max_words`` whitespace-separated words are skipped and counted in the returned :class:`Corpus`.
    Leading and trailing whitespace is stripped. Raises :class:`CselabError` if the file is missing, is in
    another encoding (:func:`guess_non_utf8_encoding`) or has no usable line.
    """
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"corpus file not found: {path}")
    if max_words is not None and max_words < 1:
        raise CselabError(f"max_words must be at least 1, got {max_words}")
    sentences: list[str] = []
    blank = invalid = too_long = 0
    for raw in split_lines(utf8_payload(path.read_bytes(), path, "corpus file")):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            invalid += 1
            continue
        if not line:
            blank += 1
        elif max_words is not None and len(line.split()) > max_words:
            too_long += 1
        else:
            sentences.append(line)
    if not sentences:
        raise CselabError(
            f"corpus file {path} has no usable sentence ({blank} blank, {invalid} invalid UTF-8, "
            f"{too_long} over max_words lines skipped)"
        )
    return Corpus(path, sentences, blank, invalid, too_long)


# --------------------------------------------------------------------------------------------------
# Sentence splitting, normalisation and filtering
# --------------------------------------------------------------------------------------------------

# Words that end with a period without ending a sentence. Lower-case, without the final period.
_ABBREVIATION_WORDS = (
    "mr mrs ms messrs dr prof st jr sr gen col lt maj capt cmdr adm sgt rev hon gov sen rep pres supt "
    "no nos vol pp fig figs inc ltd co corp bros dept univ assn vs viz cf ca approx est "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ft ave blvd e.g i.e u.s u.k u.n a.m p.m d.c "
    "ph.d b.c a.d"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace, then
# something that can start a sentence (an opening quote or bracket, a capital letter or a digit).
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"(\S+)$")


def normalize_text(text: str) -> str:
    """NFC-normalise and collapse every run of whitespace (including no-break spaces) to one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def split_sentences(text: str) -> list[str]:
    """Split running text into sentences with a regular expression.

    A boundary is ``. ! ?`` (plus closing quotes/brackets) followed by whitespace and a capital letter,
    digit or opening quote. A single period after a known abbreviation (``Mr.``, ``U.S.``, ``Jan.``) or
    a single-letter initial does not end a sentence. Newlines always end a sentence (paragraphs).
    """
    sentences: list[str] = []
    for paragraph in text.split("\n"):
        start = 0
        for match in _BOUNDARY.finditer(paragraph):
            punct_end = match.start() + 1
            if paragraph[match.start()] == "." and _is_abbreviation(paragraph[start:punct_end]):
                continue
            piece = paragraph[start : match.end()].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _is_abbreviation(text_with_period: str) -> bool:
    match = _LAST_WORD.search(text_with_period)
    if match is None:
        return False
    word = match.group(1).lstrip("(\"'\u201c\u2018[").rstrip(".").lower()
    # Single-letter initials ("John F. Kennedy") and known abbreviations.
    return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


_OPENERS = "\"'\u201c\u2018(["
_CLOSERS = "\"'\u201d\u2019)]"
_MARKUP = re.compile(r"\[\[|\]\]|\{\{|\}\}|[|<>=_~^\\{}*#@]|https?:|www\.|\.(?:com|org|html?)\b")


def word_count(sentence: str) -> int:
    return len(sentence.split())


def letter_fraction(text: str) -> float:
    """Share of letters among the non-space characters (0 for an empty string)."""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in chars) / len(chars) if chars else 0.0


def is_clean_sentence(sentence: str, *, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS) -> bool:
    """True for a normalised sentence fit for the training corpus.

    It must have ``min_words``..``max_words`` words, start with a capital letter or digit (after an
    opening quote/bracket), end with ``. ! ?`` (before closing quotes/brackets), be mostly letters and
    contain no markup or URL left over from the source.
    """
    if not min_words <= word_count(sentence) <= max_words:
        return False
    head = sentence.lstrip(_OPENERS)
    tail = sentence.rstrip(_CLOSERS)
    if not head or not (head[0].isupper() or head[0].isdigit()):
        return False
    if not tail or tail[-1] not in ".!?":
        return False
    if _MARKUP.search(sentence):
        return False
    return letter_fraction(sentence) >= 0.75


def dedupe(sentences: Iterable[str], seen: set[str] | None = None) -> list[str]:
    """Drop repeated sentences (exact match), keeping the first occurrence.

    ``seen`` carries the sentences already taken across calls, so that later sources never repeat
    earlier ones. Normalise with :func:`normalize_text` first so that spacing differences do not count.
    """
    seen = set() if seen is None else seen
    out = []
    for sentence in sentences:
        if sentence not in seen:
            seen.add(sentence)
            out.append(sentence)
    return out


def shuffled(sentences: Sequence[str], seed: int) -> list[str]:
    """A copy of ``sentences`` shuffled with ``random.Random(seed)``, stable across Python versions."""
    out = list(sentences)
    random.Random(seed).shuffle(out)
    return out


@dataclass(frozen=True)
class SourceCount:
    """What one source contributed: candidate sentences, those passing the filter, and those kept."""

    candidates: int
    clean: int
    kept: int


def assemble_corpus(
    sources: Sequence[tuple[str, Iterable[str]]],
    *,
    seed: int,
    min_words: int = MIN_WORDS,
    max_words: int = MAX_WORDS,
) -> tuple[list[str], dict[str, SourceCount]]:
    """Normalise, filter, deduplicate (across sources, first source wins) and shuffle candidate sentences.

    ``sources`` is a sequence of ``(name, candidate sentences)`` in priority order. Returns the shuffled
    sentences and per-source counts.
    """
    seen: set[str] = set()
    kept_all: list[str] = []
    counts: dict[str, SourceCount] = {}
    for name, candidates in sources:
        n_candidates = 0
        clean = []
        for sentence in candidates:
            n_candidates += 1
            sentence = normalize_text(sentence)
            if is_clean_sentence(sentence, min_words=min_words, max_words=max_words):
                clean.append(sentence)
        kept = dedupe(clean, seen)
        counts[name] = SourceCount(n_candidates, len(clean), len(kept))
        kept_all.extend(kept)
    return shuffled(kept_all, seed), counts


# --------------------------------------------------------------------------------------------------
# Source-specific extraction
# --------------------------------------------------------------------------------------------------

_STAGE_DIRECTION = re.compile(r"\s*\((?:Applause|Laughter|Cheers|Booing|Boos)\b[^)]{0,40}\)")


def sotu_sentences(text: str) -> list[str]:
    """Sentences of a State of the Union address, without stage directions such as ``(Applause.)``."""
    return split_sentences(_STAGE_DIRECTION.sub("", text))


# Brown tokens that attach to the previous token (no space before) or to the next one (no space after).
_NO_SPACE_BEFORE = frozenset({",", ".", ";", ":", "?", "!", ")", "]", "''", "'", "n't"})
_NO_SPACE_AFTER = frozenset({"(", "[", "``", "$"})


def detokenize_brown(line: str) -> str:
    """Turn a Brown-corpus line of ``word/tag`` tokens into plain text.

    Tags are stripped (the text before the last ``/``), LaTeX-style quotes ``` `` ``` and ``''`` become
    ``"``, spaces before punctuation / after opening brackets are removed, and a period or comma after
    a closing quote moves inside it.
    """
    out: list[str] = []
    glue = True  # no space before the first token
    previous = ""
    for token in line.split():
        word = token.rsplit("/", 1)[0] if "/" in token[1:] else token
        if not word:
            continue
        if word == ";" and out and out[-1] == ";":
            continue  # Brown ends a clause that continues on the next line with ";/. ;/."
        if word in (".", ",") and previous == "''":
            out.insert(len(out) - 1, word)  # Brown writes `quote''.`; American style puts it inside
            previous = word
            continue
        text = {"``": '"', "''": '"'}.get(word, word)
        if out and not glue and word not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(text)
        glue = word in _NO_SPACE_AFTER
        previous = word
    return "".join(out)


def brown_sentences(text: str) -> list[str]:
    """Sentences of one Brown-corpus file (one tagged sentence per line).

    Brown splits sentences at semicolons; a line ending in ``;`` is joined with the next one so that
    the clauses form the original sentence again.
    """
    sentences: list[str] = []
    pending = ""
    for line in text.split("\n"):
        if not line.strip():
            continue
        sentence = detokenize_brown(line).removeprefix("-- ")
        pending = f"{pending} {sentence}" if pending else sentence
        if not pending.endswith(";"):
            sentences.append(pending)
            pending = ""
    if pending:
        sentences.append(pending)
    return sentences


_WIKI_BLOCK_TAGS = (
    "ref|gallery|math|timeline|table|pre|code|source|syntaxhighlight|score|chem|imagemap|poem|hiero"
)
_WIKI_COMMENT = re.compile(r"<!--.*?-->", re.S)
_WIKI_SELF_CLOSING = re.compile(rf"<(?:{_WIKI_BLOCK_TAGS})\b[^>]*/>", re.I)
_WIKI_BLOCK = re.compile(rf"<({_WIKI_BLOCK_TAGS})\b[^>]*>.*?</\1\s*>", re.I | re.S)
_WIKI_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_WIKI_TABLE = re.compile(r"\{\|(?:(?!\{\|).)*?\|\}", re.S)
_WIKI_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_WIKI_EXTERNAL = re.compile(r"\[(?:https?|ftp)://[^\s\]]*(?:\s+([^\]]*))?\]")
_WIKI_TAG = re.compile(r"<[^<>]*>")
_WIKI_EMPHASIS = re.compile(r"'{2,}")
_WIKI_DROP_PREFIXES = ("file", "image", "category", "media")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)])")
_SPACE_AFTER_BRACKET = re.compile(r"\(\s+")


def _resolve_link(match: re.Match[str]) -> str:
    content = match.group(1)
    prefix, colon, _ = content.partition(":")
    prefix = prefix.strip().lower()
    if colon and (prefix in _WIKI_DROP_PREFIXES or (len(prefix) <= 3 and "|" not in content)):
        return ""  # images, categories and interlanguage links ("de:Anarchismus") carry no prose
    return content.rsplit("|", 1)[-1]


def _repeat_sub(pattern: re.Pattern[str], repl, text: str, limit: int = 100) -> str:
    # Nested constructs are removed from the inside out, one level per pass.
    for _ in range(limit):
        text, n = pattern.subn(repl, text)
        if n == 0:
            break
    return text


def strip_wiki_markup(wikitext: str) -> list[str]:
    """Plain-text paragraphs of a MediaWiki article (prose only; lists, headings and tables dropped).

    Removes comments, references and other block tags, templates and tables (nested), image/category
    links; keeps the label of internal and external links; drops bold/italic quotes and HTML tags.
    """
    text = _WIKI_COMMENT.sub("", wikitext)
    text = _WIKI_SELF_CLOSING.sub("", text)
    text = _WIKI_BLOCK.sub("", text)
    text = _repeat_sub(_WIKI_TEMPLATE, "", text)
    text = _repeat_sub(_WIKI_TABLE, "", text)
    text = _repeat_sub(_WIKI_LINK, _resolve_link, text)
    text = _WIKI_EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _WIKI_TAG.sub("", text)
    text = html.unescape(text)  # entities were escaped twice in the dump (&amp;nbsp;)
    text = _WIKI_EMPHASIS.sub("", text)
    paragraphs = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or line[0] in "=*#:;|!{}":
            continue
        line = _EMPTY_BRACKETS.sub("", line)
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
        line = _SPACE_AFTER_BRACKET.sub("(", line)
        paragraphs.append(line)
    return paragraphs
