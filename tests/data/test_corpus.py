"""The corpus reader and the pure corpus-building steps (no network)."""

from __future__ import annotations

import pytest

from cselab.data.text.corpus import (
    assemble_corpus,
    brown_sentences,
    dedupe,
    detokenize_brown,
    is_clean_sentence,
    normalize_text,
    read_corpus,
    shuffled,
    sotu_sentences,
    split_lines,
    split_sentences,
    strip_wiki_markup,
)
from cselab.errors import CselabError

# --- read_corpus -----------------------------------------------------------------------------------


def test_read_corpus_skips_and_counts_bad_lines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(
        b"A first sentence.\n"
        b"\n"
        b"   \n"
        b"  Second sentence with spaces around.  \r\n"
        b"Broken \xff\xfe bytes here.\n"
        b"one two three four five six seven\n"
        b"Last line without newline."
    )
    corpus = read_corpus(path, max_words=6)
    assert corpus.sentences == [
        "A first sentence.",
        "Second sentence with spaces around.",
        "Last line without newline.",
    ]
    assert (corpus.skipped_blank, corpus.skipped_invalid_utf8, corpus.skipped_too_long) == (2, 1, 1)
    assert corpus.skipped == 4
    assert len(corpus) == 3
    assert "4 skipped" in corpus.summary() and "1 invalid UTF-8" in corpus.summary()


def test_read_corpus_without_max_words_keeps_long_lines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("word " * 100 + "\n", encoding="utf-8")
    assert len(read_corpus(path)) == 1


def test_read_corpus_does_not_split_on_unicode_line_separators(tmp_path):
    # U+2028 and U+0085 inside a sentence must not create extra lines.
    path = tmp_path / "c.txt"
    path.write_text("one\u2028two\nthree\x85four\n", encoding="utf-8")
    assert len(read_corpus(path)) == 2


def test_read_corpus_missing_file(tmp_path):
    with pytest.raises(CselabError, match="corpus file not found"):
        read_corpus(tmp_path / "nope.txt")


def test_read_corpus_empty_result_is_an_error(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"\n  \n\xff\n")
    with pytest.raises(CselabError, match=r"no usable sentence \(2 blank, 1 invalid UTF-8"):
        read_corpus(path)


def test_read_corpus_rejects_bad_max_words(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("A sentence.\n", encoding="utf-8")
    with pytest.raises(CselabError, match="max_words"):
        read_corpus(path, max_words=0)


def test_split_lines_handles_final_newline_and_crlf():
    assert split_lines(b"a\r\nb\n") == [b"a", b"b"]
    assert split_lines(b"a\n\nb") == [b"a", b"", b"b"]
    assert split_lines(b"") == []


# --- sentence splitting and filtering --------------------------------------------------------------


def test_split_sentences_respects_abbreviations_and_initials():
    text = (
        "Mr. Smith went to Washington. He met John F. Kennedy in the U.S. Senate! "
        '"Really?" she asked. 3 men came on Jan. 5 to St. Louis. The end'
    )
    assert split_sentences(text) == [
        "Mr. Smith went to Washington.",
        "He met John F. Kennedy in the U.S. Senate!",
        '"Really?" she asked.',
        "3 men came on Jan. 5 to St. Louis.",
        "The end",
    ]


def test_split_sentences_splits_after_closing_quote_and_on_newlines():
    assert split_sentences('He said "stop." Then he left.\nA new paragraph') == [
        'He said "stop."',
        "Then he left.",
        "A new paragraph",
    ]


def test_split_sentences_does_not_split_before_lowercase():
    assert split_sentences("The value is 3.5 percent. e.g. this stays.") == [
        "The value is 3.5 percent. e.g. this stays."
    ]


def test_normalize_text_collapses_whitespace_and_composes():
    assert normalize_text("  Cafe\u0301\u00a0 au\tlait \n") == "Caf\u00e9 au lait"


@pytest.mark.parametrize(
    "sentence, ok",
    [
        ("The committee met on Monday morning.", True),
        ('"We will win," he said to the crowd.', True),
        ("1990 was a very good year indeed!", True),
        ("Too short a line.", False),  # 4 words
        (" ".join(["word"] * 41) + ".", False),  # 41 words
        ("the sentence starts in lower case here.", False),
        ("This one has no final punctuation at all", False),
        ("See [[Link]] for more about this topic.", False),
        ("Visit http://example.com for the full details.", False),
        ("The figures were 1, 2, 3, 4, 5, 6, 7, 8.", False),  # mostly digits
    ],
)
def test_is_clean_sentence(sentence, ok):
    assert is_clean_sentence(sentence) is ok


def test_dedupe_keeps_first_and_shares_seen():
    seen: set[str] = set()
    assert dedupe(["a", "b", "a"], seen) == ["a", "b"]
    assert dedupe(["b", "c"], seen) == ["c"]


def test_shuffled_is_seeded_and_leaves_input_alone():
    items = [str(i) for i in range(50)]
    first, second = shuffled(items, 0), shuffled(items, 0)
    assert first == second and sorted(first) == sorted(items) and first != items
    assert shuffled(items, 1) != first
    assert items == [str(i) for i in range(50)]


def test_assemble_corpus_counts_per_source_and_dedupes_across_sources():
    a = ["The first source has this sentence.", "The first source has this sentence.", "too short."]
    b = ["The first  source has this sentence.", "The second source adds another one."]
    sentences, counts = assemble_corpus([("a", a), ("b", b)], seed=0)
    assert sorted(sentences) == ["The first source has this sentence.", "The second source adds another one."]
    assert (counts["a"].candidates, counts["a"].clean, counts["a"].kept) == (3, 2, 1)
    assert (counts["b"].candidates, counts["b"].clean, counts["b"].kept) == (2, 2, 1)


# --- source-specific extraction ---------------------------------------------------------------------


def test_detokenize_brown_strips_tags_and_fixes_spacing():
    line = "\t``/`` Only/rb a/at handful/nn ,/, the/at jury/nn said/vbd ''/'' ./."
    assert detokenize_brown(line) == '"Only a handful, the jury said."'
    line = "The/at cost/nn (/( $/nns 5/cd )/) isn't/bez* Mr./np Smith's/np$ ?/."
    assert detokenize_brown(line) == "The cost ($5) isn't Mr. Smith's?"


def test_brown_sentences_joins_semicolon_clauses():
    text = (
        "\n\n\tFritzie/np was/bedz on/in the/at couch/nn reading/vbg ;/. ;/.\n"
        "Laura/np was/bedz sitting/vbg nearby/rb ./.\n\n\n"
        "\tThe/at end/nn ./.\n"
    )
    assert brown_sentences(text) == [
        "Fritzie was on the couch reading; Laura was sitting nearby.",
        "The end.",
    ]


def test_sotu_sentences_drop_stage_directions():
    text = "Thank you all. (Applause.) We will prevail. (Laughter and applause.) Good night."
    assert sotu_sentences(text) == ["Thank you all.", "We will prevail.", "Good night."]


def test_strip_wiki_markup_keeps_prose_only():
    wikitext = (
        "{{Infobox country|name=Testland|capital={{nowrap|Test City}}}}\n"
        "'''Testland''' is a [[country]] in [[Europe|western Europe]].<ref>A source.</ref> "
        "It has a [http://example.com website] and a river.<ref name=x/>\n"
        "[[File:Flag.png|thumb|The [[flag]] of Testland]]\n"
        "<!-- hidden comment -->\n"
        "== History ==\n"
        "* A list item.\n"
        '{| class="wikitable"\n| cell\n|}\n'
        "Its capital &ndash; Test City &ndash; is old (founded {{circa|1200}}).\n"
        "[[Category:Countries]]\n"
        "[[de:Testland]]\n"
    )
    assert strip_wiki_markup(wikitext) == [
        "Testland is a country in western Europe. It has a website and a river.",
        "Its capital \u2013 Test City \u2013 is old (founded).",
    ]
