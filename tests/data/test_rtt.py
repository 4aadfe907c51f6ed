"""Round-trip translation (``cselab data rtt``) on tiny random MarianMT models built here: the files TNCSE's and
JTCSE's presets read, line-aligned, equal to the model run line by line, and resumed after a kill."""

from __future__ import annotations

import pytest
import torch

from cselab.data.text import rtt as rtt_mod
from cselab.data.text.augment import check_line_aligned
from cselab.data.text.rtt import round_trip, rtt_paths
from tests.helpers import build_tiny_marian_dir, run_cli

SOURCE = ["a man plays the guitar .", "the dog runs in the park", "", "two women are eating food .",
          "a child sits on the chair", "the bird is small and red", "they walk on the road .",
          "my phone is new", "a cat sits on the bed", "the old horse runs fast"]


@pytest.fixture(scope="module")
def marians(tmp_path_factory):
    base = tmp_path_factory.mktemp("marian")
    return {pair: str(build_tiny_marian_dir(base / pair, seed=i))
            for i, pair in enumerate(("en-fr", "fr-en", "en-ru", "ru-en"))}


def _source(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"{line}\n" for line in SOURCE))
    return path


def _reference(model_dir, lines, max_length):
    """Each line translated alone, with transformers directly (greedy), blank for a blank line."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    out = []
    for line in lines:
        if not line.strip():
            out.append("")
            continue
        with torch.no_grad():
            ids = model.generate(**tokenizer([line], return_tensors="pt"), max_new_tokens=max_length, num_beams=1,
                                 do_sample=False)
        out.append(" ".join(tokenizer.decode(ids[0], skip_special_tokens=True).split()))
    return out


def test_round_trip_writes_the_presets_files(tmp_path, marians):
    source = _source(tmp_path)
    out = round_trip(source, ["fr", "ru"], tmp_path / "out", models=marians, batch_size=3, max_length=6,
                     device="cpu")
    assert out == {"fr": tmp_path / "out" / "corpus.rtt-fr.txt", "ru": tmp_path / "out" / "corpus.rtt-ru.txt"}
    for lang in ("fr", "ru"):
        forward, back = rtt_paths(source, lang, tmp_path / "out")
        forward_lines = forward.read_text().split("\n")[:-1]
        assert forward_lines == _reference(marians[f"en-{lang}"], SOURCE, 6)
        assert back.read_text().split("\n")[:-1] == _reference(marians[f"{lang}-en"], forward_lines, 6)
        check_line_aligned(source, back)  # what stage 1 checks before it trains on the file
        assert back.read_text().split("\n")[2] == ""  # the blank line stays blank


def test_a_killed_translation_resumes_after_its_last_whole_chunk(tmp_path, marians, monkeypatch):
    source = _source(tmp_path)
    clean = rtt_mod.translate_file(source, tmp_path / "clean.txt", marians["en-fr"], batch_size=2, max_length=5,
                                   device="cpu")
    monkeypatch.setattr(rtt_mod, "CHUNK_BATCHES", 1)  # chunks of 2 lines
    real_write, writes = rtt_mod._write_chunk, []

    def killed_after_two(part, translated):
        if len(writes) == 2:
            with open(part, "ab") as f:
                f.write(b"half a li")  # the kill tore the third chunk's first line
            raise KeyboardInterrupt
        writes.append(len(translated))
        real_write(part, translated)

    monkeypatch.setattr(rtt_mod, "_write_chunk", killed_after_two)
    target = tmp_path / "resumed.txt"
    with pytest.raises(KeyboardInterrupt):
        rtt_mod.translate_file(source, target, marians["en-fr"], batch_size=2, max_length=5, device="cpu")
    assert not target.exists() and target.with_name("resumed.txt.part").is_file()
    monkeypatch.setattr(rtt_mod, "_write_chunk", real_write)
    translated = []
    real_translate = rtt_mod._Translator.translate
    monkeypatch.setattr(rtt_mod._Translator, "translate",
                        lambda self, texts, bs: translated.append(len(texts)) or real_translate(self, texts, bs))
    rtt_mod.translate_file(source, target, marians["en-fr"], batch_size=2, max_length=5, device="cpu")
    assert target.read_bytes() == clean.read_bytes()
    assert sum(translated) == len(SOURCE) - 4  # only the lines after the two whole chunks
    translated.clear()
    rtt_mod.translate_file(source, target, marians["en-fr"], batch_size=2, max_length=5, device="cpu")
    assert translated == []  # finished, same input, model and options: not translated again


def test_cli_round_trip_and_its_errors(tmp_path, marians, capsys):
    source = _source(tmp_path)
    models = ",".join(f"{k}={v}" for k, v in marians.items() if k in ("en-fr", "fr-en"))
    rc, out, err = run_cli(["data", "rtt", str(source), "--via", "fr", "--output", str(tmp_path / "o"),
                            "--models", models, "--max-length", "4", "--device", "cpu"], capsys)
    assert rc == 0, err
    assert out.strip() == f"fr: {tmp_path / 'o' / 'corpus.rtt-fr.txt'}"
    for args, message in (
        (["--via", "en"], "--via 'en' is not a pivot language code"),
        (["--via", "fr", "--models", "en-fr"], "give SRC-TGT=MODEL pairs"),
        (["--via", "fr", "--models", "en-de=x"], "--models en-de: not a direction of this round trip"),
        (["--via", "fr", "--models", f"en-fr={tmp_path / 'nope'}"], "cannot load the translation model"),
    ):
        rc, _, err = run_cli(["data", "rtt", str(source), "--output", str(tmp_path / "e"), *args], capsys)
        assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
