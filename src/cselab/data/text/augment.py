"""Line-aligned augmented copies of a corpus (TNCSE/JTCSE stage 1, docs/methods.md#tncse).

Stage 1 trains each twin encoder with SimCSE on a DIFFERENTLY augmented copy of the training corpus. The
papers use round-trip translation (EN -> fr/ru -> EN), which needs a translation model that is not
available offline, so augmentation is pluggable:

- ``file``: a user-supplied augmented corpus (e.g. round-trip-translation output made elsewhere). It must be
  line-aligned with the source corpus (same number of lines); it is checked, not copied.
- built-in offline augmentations, seeded and deterministic, applied line by line:
  ``word_dropout`` (drop each word with probability ``p``, keep at least one word), ``word_swap`` (swap one
  random adjacent word pair), ``word_repeat`` (repeat each word with probability ``p``, at least one word;
  ESimCSE's word repetition).

Line alignment is kept exactly: line ``i`` of the output is the augmentation of line ``i`` of the source;
blank lines and lines that are not valid UTF-8 are copied unchanged (the training reader skips them in both
files alike). Each line draws from its own generator seeded by ``(seed, line index)``, so a line's
augmentation does not depend on the other lines.

**Decision:** words are whitespace-separated tokens (the corpora are untokenised text; punctuation stays
attached to its word).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from cselab.config.stages import AugmentationSpec
from cselab.data.text.corpus import split_lines
from cselab.errors import CselabError
from cselab.fileio import sha256_file, write_atomic

MANIFEST_SUFFIX = ".manifest.json"


# -- pure augmentations -----------------------------------------------------------------------------
def word_dropout(sentence: str, rng: random.Random, p: float = 0.1) -> str:
    """Drop each word independently with probability ``p``; if every word would go, keep one at random."""
    words = sentence.split()
    if not words:
        return sentence
    kept = [w for w in words if rng.random() >= p]
    if not kept:
        kept = [words[rng.randrange(len(words))]]
    return " ".join(kept)


def word_swap(sentence: str, rng: random.Random) -> str:
    """Swap one uniformly chosen pair of adjacent words (a one-word sentence is returned unchanged)."""
    words = sentence.split()
    if len(words) < 2:
        return " ".join(words) if words else sentence
    i = rng.randrange(len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def word_repeat(sentence: str, rng: random.Random, p: float = 0.2) -> str:
    """Repeat each word independently with probability ``p``; at least one word is repeated."""
    words = sentence.split()
    if not words:
        return sentence
    repeat = [rng.random() < p for _ in words]
    if not any(repeat):
        repeat[rng.randrange(len(words))] = True
    return " ".join(w for word, r in zip(words, repeat, strict=True) for w in ((word, word) if r else (word,)))


BUILTIN: dict[str, Callable[..., str]] = {
    "word_dropout": word_dropout,
    "word_swap": word_swap,
    "word_repeat": word_repeat,
}


def augment_sentence(sentence: str, kind: str, rng: random.Random, **params: float) -> str:
    """Apply the built-in augmentation ``kind`` to one sentence."""
    if kind not in BUILTIN:
        raise CselabError(f"unknown augmentation {kind!r}; built-in ones: {', '.join(BUILTIN)}")
    return BUILTIN[kind](sentence, rng, **params)


def line_rng(seed: int, index: int) -> random.Random:
    """The generator of line ``index``: depends only on (seed, index)."""
    return random.Random(seed * 1_000_003 + index)


def augment_lines(lines: Sequence[str], kind: str, seed: int, **params: float) -> list[str]:
    """Augment every line (blank lines stay blank); the result has exactly one line per input line."""
    return [
        augment_sentence(line.strip(), kind, line_rng(seed, i), **params) if line.strip() else line
        for i, line in enumerate(lines)
    ]


# -- files ------------------------------------------------------------------------------------------
def count_lines(path: str | Path) -> int:
    """Lines as the corpus reader splits them (on ``\\n`` only)."""
    path = Path(path)
    if not path.is_file():
        raise CselabError(f"corpus file not found: {path}")
    return len(split_lines(path.read_bytes()))


def check_line_aligned(source: str | Path, augmented: str | Path) -> None:
    """Raise a clear :class:`CselabError` unless ``augmented`` has as many lines as ``source``."""
    n_source, n_augmented = count_lines(source), count_lines(augmented)
    if n_source != n_augmented:
        raise CselabError(
            f"augmented corpus {augmented} has {n_augmented} lines but the corpus {source} has {n_source}: "
            "an augmented copy must be line-aligned (one output line per input line)"
        )




def _manifest(source: Path, kind: str, seed: int, params: dict[str, float], n_lines: int) -> dict[str, object]:
    return {"source": str(source.resolve()), "source_sha256": sha256_file(source), "kind": kind, "seed": seed,
            "params": params, "lines": n_lines}


def _augment_bytes_line(raw: bytes, index: int, kind: str, seed: int, params: dict[str, float]) -> bytes:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw  # kept byte for byte: the reader skips it in both files, so alignment holds
    if not text.strip():
        return raw
    return augment_sentence(text.strip(), kind, line_rng(seed, index), **params).encode("utf-8")


def write_augmented_corpus(
    source: str | Path, target: str | Path, kind: str, *, seed: int, params: dict[str, float] | None = None
) -> Path:
    """Write the ``kind`` augmentation of ``source`` to ``target`` (line-aligned), atomically.

    A manifest (``target`` + ``.manifest.json``) records source hash, kind, seed and parameters; when
    ``target`` already exists with a matching manifest nothing is recomputed. The file is written to a
    temporary name and renamed into place, so an interrupted run never leaves a partial corpus.
    """
    source, target = Path(source), Path(target)
    params = dict(params or {})
    if not source.is_file():
        raise CselabError(f"corpus file not found: {source}")
    if kind not in BUILTIN:
        raise CselabError(f"unknown augmentation {kind!r}; built-in ones: {', '.join(BUILTIN)}")
    lines = split_lines(source.read_bytes())
    manifest = _manifest(source, kind, seed, params, len(lines))
    manifest_file = target.with_name(target.name + MANIFEST_SUFFIX)
    if target.is_file() and manifest_file.is_file():
        try:
            if json.loads(manifest_file.read_text()) == manifest:
                return target
        except (OSError, json.JSONDecodeError):
            pass  # unreadable manifest: recompute
    target.parent.mkdir(parents=True, exist_ok=True)
    manifest_file.unlink(missing_ok=True)  # a target without its manifest is never trusted
    out = b"".join(_augment_bytes_line(raw, i, kind, seed, params) + b"\n" for i, raw in enumerate(lines))
    # ranks of a data-parallel run may all prepare the same (identical) file: temporary names are per process
    write_atomic(target, out)
    write_atomic(manifest_file, json.dumps(manifest, indent=2) + "\n")
    return target


def augmented_corpus_path(spec: AugmentationSpec, out_dir: str | Path, *, default_seed: int) -> Path:
    """Where the augmented corpus of ``spec`` lives: the user's file, or ``out_dir/<label>.txt``."""
    if spec.kind == "file":
        return Path(spec.path or "").expanduser()
    seed = spec.seed if spec.seed is not None else default_seed
    return Path(out_dir) / f"{spec.model_copy(update={'seed': seed}).label()}.txt"


def prepare_augmented_corpus(source: str | Path, spec: AugmentationSpec, out_dir: str | Path, *,
                             default_seed: int) -> Path:
    """The augmented corpus ``spec`` describes: the checked user file, or a built-in one written to ``out_dir``
    (skipped when it already exists with a matching manifest)."""
    path = augmented_corpus_path(spec, out_dir, default_seed=default_seed)
    if spec.kind == "file":
        check_line_aligned(source, path)
        return path
    seed = spec.seed if spec.seed is not None else default_seed
    return write_augmented_corpus(source, path, spec.kind, seed=seed, params=spec.params())
