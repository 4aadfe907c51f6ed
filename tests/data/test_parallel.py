"""The line-aligned parallel corpus reader and the pair filter (no network)."""

from __future__ import annotations

import pytest

from cselab.data.text.parallel import is_clean_pair, read_parallel
from cselab.errors import CselabError


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_read_parallel_pairs_and_skips(tmp_path):
    en = _write(
        tmp_path / "a.en", b"The house is red.\n\nA bad \xff line.\nThe cat sleeps.\r\nOnly English.\n"
    )
    de = _write(
        tmp_path / "a.de", b"Das Haus ist rot.\nNur Deutsch.\nEine Zeile.\nDie Katze schl\xc3\xa4ft.\n   \n"
    )
    pairs, skipped = read_parallel(en, de)
    assert pairs == [("The house is red.", "Das Haus ist rot."), ("The cat sleeps.", "Die Katze schläft.")]
    assert skipped == 3


def test_read_parallel_unequal_line_counts(tmp_path):
    en = _write(tmp_path / "a.en", b"one\ntwo\nthree\n")
    de = _write(tmp_path / "a.de", b"eins\nzwei\n")
    with pytest.raises(CselabError, match=r"a\.en has 3 lines, .*a\.de has 2"):
        read_parallel(en, de)


def test_read_parallel_missing_file(tmp_path):
    en = _write(tmp_path / "a.en", b"one\n")
    with pytest.raises(CselabError, match="parallel corpus file not found: .*a.de"):
        read_parallel(en, tmp_path / "a.de")


def test_read_parallel_nothing_left(tmp_path):
    en = _write(tmp_path / "a.en", b"one\n\n")
    de = _write(tmp_path / "a.de", b"\nzwei\n")
    with pytest.raises(CselabError, match="no pair with text on both sides"):
        read_parallel(en, de)


@pytest.mark.parametrize(
    "en, de, ok",
    [
        ("The committee met on Monday.", "Der Ausschuss tagte am Montag.", True),
        ("Hi there", "Hallo", False),  # too short
        ("Ooh, yeah... 4/10 *** !!!", "Ooh, ja... 4/10 *** !!!", False),  # mostly non-letters
        ("See http://example.com for the details.", "Siehe http://example.com für Details.", False),
        ("Here is how it goes today.", "So geht's.", False),  # implausible length ratio
        (
            "真的没选错，喜欢上一个这么关心我的男人",
            "Ich habe wirklich richtig gewählt und mag ihn sehr.",
            False,
        ),
    ],
)
def test_is_clean_pair(en, de, ok):
    assert is_clean_pair(en, de) is ok
