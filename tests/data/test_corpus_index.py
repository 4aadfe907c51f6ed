"""The on-disk corpus index: same sentences and skip counts as reading the file line by line, built once and
reused while the source is unchanged, rebuilt when it changes or the index is damaged; the trainer draws
each epoch's permutation once."""

import io
import json

import numpy as np
import pytest

from cselab.data.stores import corpus_index
from cselab.data.stores.corpus_index import open_indexed_corpus, scan_corpus
from cselab.data.text.corpus import read_corpus
from cselab.errors import CselabError
from tests.helpers import write_corpus

# line by line: what each line is, decided by hand
LINES = [
    (b"A plain sentence of six words.", "A plain sentence of six words."),
    (b"", "blank"),
    (b"   \t ", "blank"),
    (b"  padded both sides  \r", "padded both sides"),  # \r\n line ending
    (b"caf\xc3\xa9 au lait is nice", "caf\u00e9 au lait is nice"),
    (b"bad \xff\xfe bytes here", "invalid"),
    (b"\xc2\xa0\xe2\x80\x83", "blank"),  # only no-break and em spaces: blank for str.strip()
    (b"one two three four five six seven", "too_long"),  # 7 words
    (b"one\x1ftwo\x1fthree\x1ffour\x1ffive\x1fsix", "one\x1ftwo\x1fthree\x1ffour\x1ffive\x1fsix"),  # \x1f splits: 6
    (b"one\xc2\xa0two three four five six seven", "too_long"),  # no-break space splits too: 7 words
    (b"words\xe2\x80\x83six five four three two", "words\u2003six five four three two"),  # 6 words
    (b"last line without newline", "last line without newline"),
]


def _write(path, lines=LINES):
    path.write_bytes(b"\n".join(raw for raw, _ in lines))  # no final newline
    return path


def test_index_gives_the_hand_decided_sentences_and_counts(tmp_path):
    corpus = open_indexed_corpus(_write(tmp_path / "c.txt"), max_words=6, home=tmp_path / "home")
    kept = [want for _, want in LINES if want not in ("blank", "invalid", "too_long")]
    assert list(corpus.sentences) == kept
    assert (corpus.skipped_blank, corpus.skipped_invalid_utf8, corpus.skipped_too_long) == (3, 1, 2)
    # and what the line-by-line reader makes of the same file
    reference = read_corpus(tmp_path / "c.txt", max_words=6)
    assert list(corpus.sentences) == reference.sentences and corpus.summary() == reference.summary()


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_block_boundaries_do_not_change_the_scan(tmp_path, block):
    path = write_corpus(tmp_path / "c.txt", n=300)
    with open(path, "ab") as f:
        f.write(b"\n\n  \nfinal \xc3\xa9 words")
    out = io.BytesIO()
    counts = scan_corpus(path, 9, out, block_bytes=block)
    spans = np.frombuffer(out.getvalue(), dtype=np.int64).reshape(-1, 2)
    data = path.read_bytes()
    # the spans, rebuilt independently with a plain loop over the lines
    expected, position = [], 0
    for line in data.split(b"\n"):
        text = line.decode("utf-8").strip()
        if text and len(text.split()) <= 9:
            expected.append((position, position + len(line)))
        position += len(line) + 1
    assert spans.tolist() == [list(s) for s in expected]
    assert (counts.sentences, counts.blank) == (len(expected), 3)


def test_index_is_reused_then_rebuilt_on_change_or_damage(tmp_path, monkeypatch):
    home = tmp_path / "home"
    path = write_corpus(tmp_path / "c.txt", n=50)
    builds = []
    real_scan = corpus_index.scan_corpus
    monkeypatch.setattr(corpus_index, "scan_corpus", lambda *a, **k: builds.append(1) or real_scan(*a, **k))
    first = open_indexed_corpus(path, home=home)
    assert len(builds) == 1 and len(first) == 50
    assert isinstance(first.sentences.spans, np.memmap)  # served from the file
    again = open_indexed_corpus(path, home=home)
    assert len(builds) == 1 and list(again.sentences) == list(first.sentences)
    # another max_words is another index
    open_indexed_corpus(path, home=home, max_words=8)
    assert len(builds) == 2
    # the source grows: rebuilt, and the new line is there
    with open(path, "a") as f:
        f.write("a new last line of the corpus\n")
    grown = open_indexed_corpus(path, home=home)
    assert len(builds) == 3 and len(grown) == 51 and grown.sentences[50] == "a new last line of the corpus"
    grown_sentences = list(grown.sentences)
    # a damaged index file fails its checksum and is rebuilt
    (index_file,) = [p for p in (home / "corpus-index").glob("*.spans")
                     if json.loads(p.with_suffix(".json").read_text())["max_words"] is None]
    data = bytearray(index_file.read_bytes())
    data[-1] ^= 0xFF
    index_file.write_bytes(bytes(data))
    repaired = open_indexed_corpus(path, home=home)
    assert len(builds) == 4 and list(repaired.sentences) == grown_sentences


def test_slicing_and_errors(tmp_path):
    path = write_corpus(tmp_path / "c.txt", n=20)
    lines = open_indexed_corpus(path, home=tmp_path / "home").sentences
    head = lines[:5]
    assert len(head) == 5 and list(head) == path.read_text().splitlines()[:5]
    assert lines[-1] == path.read_text().splitlines()[-1]
    with pytest.raises(IndexError):
        head[5]
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(CselabError, match="no usable sentence .2 blank"):
        open_indexed_corpus(tmp_path / "blank.txt", home=tmp_path / "home")
    with pytest.raises(CselabError, match="corpus file not found"):
        open_indexed_corpus(tmp_path / "missing.txt", home=tmp_path / "home")


def test_trainer_draws_each_epoch_permutation_once(tiny_bert_dir, tmp_path, monkeypatch):
    import torch

    from cselab.config.run_config import load_config
    from cselab.training import trainer as trainer_module

    corpus = write_corpus(tmp_path / "c.txt", n=40)
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=8",
                                "model.max_length=16", "train.seed=9", f"train.output_dir={tmp_path / 'run'}",
                                "train.length_group_window=null"])  # one permutation per epoch, in order
    trainer = trainer_module.Trainer(config)
    draws = []
    real = trainer_module.epoch_order
    monkeypatch.setattr(trainer_module, "epoch_order", lambda *a: draws.append(a) or real(*a))
    lines = corpus.read_text().splitlines()
    tokenize = trainer.method.encoder.tokenizer
    for step in range(12):  # 5 steps per epoch: epochs 0, 1 and 2
        epoch, position = divmod(step, 5)
        g = torch.Generator()
        g.manual_seed(9 * 1_000_003 + epoch)
        order = torch.randperm(40, generator=g)[position * 8 : position * 8 + 8].tolist()
        expected = tokenize([lines[i] for i in order], padding=True, truncation=True, max_length=16,
                            return_tensors="pt")["input_ids"]
        assert torch.equal(trainer.batch_at(step)["input_ids"], expected)
    assert [a[2] for a in draws] == [0, 1, 2]


def test_encodings_and_empty_corpora_are_refused_before_any_index_is_written(tmp_path):
    home = tmp_path / "home"
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfFirst sentence here.\nSecond one.\n")
    # the byte-order mark is not part of the first sentence (hand-decided, as read_corpus reads it)
    assert list(open_indexed_corpus(bom, home=home).sentences) == ["First sentence here.", "Second one."]
    for name, data, expected in [("u16.txt", "A sentence.\n".encode("utf-16"), "UTF-16"),
                                 ("empty.txt", b"\n  \n", "no usable sentence")]:
        path = tmp_path / name
        path.write_bytes(data)
        before = sorted(p.name for p in (home / corpus_index.INDEX_DIR).iterdir())
        with pytest.raises(CselabError, match=expected):
            open_indexed_corpus(path, home=home)
        assert sorted(p.name for p in (home / corpus_index.INDEX_DIR).iterdir()) == before
