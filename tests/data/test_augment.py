"""Augmented corpora for TNCSE/JTCSE stage 1: pure augmentations, determinism, line alignment, atomic files."""

import json
import random

import pytest

from cselab.config.run_config import validate
from cselab.data.text.augment import (
    AugmentationSpec,
    augment_lines,
    check_line_aligned,
    line_rng,
    prepare_augmented_corpus,
    word_dropout,
    word_repeat,
    word_swap,
    write_augmented_corpus,
)
from cselab.errors import CselabError

SENTENCE = "the quick brown fox jumps over the lazy dog"


def test_word_dropout_drops_with_its_rate_and_keeps_order():
    rng = random.Random(0)
    words = SENTENCE.split()
    kept_total = 0
    for _ in range(2000):
        out = word_dropout(SENTENCE, rng, p=0.1).split()
        it = iter(words)
        assert all(w in it for w in out), "dropout must keep the remaining words in order"
        kept_total += len(out)
    assert kept_total / (2000 * len(words)) == pytest.approx(0.9, abs=0.01)


def test_word_dropout_keeps_at_least_one_word():
    rng = random.Random(0)
    for _ in range(200):
        out = word_dropout("alpha beta", rng, p=0.99)
        assert len(out.split()) >= 1 and set(out.split()) <= {"alpha", "beta"}


def test_word_swap_swaps_exactly_one_adjacent_pair():
    words = SENTENCE.split()
    rng = random.Random(3)
    for _ in range(100):
        out = word_swap(SENTENCE, rng).split()
        diff = [i for i, (a, b) in enumerate(zip(words, out, strict=True)) if a != b]
        # positions 6/7 hold "the lazy"; every swap of distinct words changes exactly two neighbours
        assert sorted(out) == sorted(words)
        assert len(diff) in (0, 2)
        if diff:
            i = diff[0]
            assert diff == [i, i + 1] and out[i] == words[i + 1] and out[i + 1] == words[i]
    assert word_swap("single", rng) == "single"


def test_word_repeat_repeats_at_least_one_word():
    rng = random.Random(1)
    out = word_repeat("one two three", rng, p=0.0001).split()
    assert len(out) == 4
    deduped = [w for i, w in enumerate(out) if i == 0 or out[i - 1] != w]
    assert deduped == ["one", "two", "three"]


def test_augment_lines_is_deterministic_per_seed_and_line_aligned():
    lines = [SENTENCE, "", "a b c d e f g", "  ", "x y"]
    a = augment_lines(lines, "word_dropout", seed=5, p=0.3)
    b = augment_lines(lines, "word_dropout", seed=5, p=0.3)
    c = augment_lines(lines, "word_dropout", seed=6, p=0.3)
    assert a == b and len(a) == len(lines)
    assert a != c
    assert a[1] == "" and a[3] == "  ", "blank lines are kept as they are"
    # a line's augmentation depends only on (seed, index), never on the other lines
    assert augment_lines(lines, "word_swap", seed=5)[2] == word_swap(lines[2], line_rng(5, 2))


def test_write_is_atomic_aligned_and_skipped_when_manifest_matches(tmp_path):
    source = tmp_path / "corpus.txt"
    raw = [SENTENCE, "", "one two three four", "caf\u00e9 au lait s'il vous pla\u00eet"]
    source.write_bytes(("\n".join(raw) + "\n").encode() + b"\xff\xfe broken line\n")
    target = tmp_path / "aug" / "swap.txt"
    write_augmented_corpus(source, target, "word_swap", seed=1)
    out = target.read_bytes().split(b"\n")[:-1]
    assert len(out) == 5
    assert out[1] == b"" and out[4] == b"\xff\xfe broken line", "blank and invalid lines are copied unchanged"
    assert out[0].decode() == word_swap(SENTENCE, line_rng(1, 0))
    assert not list(target.parent.glob("*.tmp*")), "no temporary file left behind"
    manifest = json.loads((tmp_path / "aug" / "swap.txt.manifest.json").read_text())
    assert manifest["kind"] == "word_swap" and manifest["seed"] == 1 and manifest["lines"] == 5
    # a matching manifest: the file is not rewritten
    target.write_text("sentinel\n")
    write_augmented_corpus(source, target, "word_swap", seed=1)
    assert target.read_text() == "sentinel\n"
    # a different seed (or source) does not match: recomputed
    write_augmented_corpus(source, target, "word_swap", seed=2)
    assert len(target.read_bytes().split(b"\n")[:-1]) == 5 and target.read_bytes() != b"sentinel\n"


def test_user_file_must_be_line_aligned(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text("a b\nc d\ne f\n")
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("b a\nd c\nf e\n")
    bad.write_text("b a\nd c\n")
    check_line_aligned(source, good)
    spec = AugmentationSpec(kind="file", path=str(good))
    assert prepare_augmented_corpus(source, spec, tmp_path / "aug", default_seed=0) == good
    with pytest.raises(CselabError, match="2 lines but the corpus .* has 3"):
        prepare_augmented_corpus(source, AugmentationSpec(kind="file", path=str(bad)), tmp_path, default_seed=0)
    with pytest.raises(CselabError, match="not found"):
        check_line_aligned(source, tmp_path / "missing.txt")


def test_builtin_spec_writes_a_seeded_file_named_after_its_settings(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text("a b c d\ne f g h\n")
    path = prepare_augmented_corpus(source, AugmentationSpec(kind="word_dropout", p=0.5), tmp_path, default_seed=7)
    assert path.name == "word_dropout-p0.5-s7.txt"
    assert path.read_text().splitlines() == augment_lines(["a b c d", "e f g h"], "word_dropout", 7, p=0.5)


@pytest.mark.parametrize("raw, message", [
    ({"kind": "file"}, "needs a path"),
    ({"kind": "word_swap", "p": 0.1}, "has no rate"),
    ({"kind": "word_swap", "path": "x"}, "takes no path"),
    ({"kind": "word_shuffle"}, "kind"),
    ({"kind": "word_swap", "sede": 1}, "unknown key"),
])
def test_spec_validation(raw, message):
    with pytest.raises(CselabError, match=message):
        validate(AugmentationSpec, raw)
