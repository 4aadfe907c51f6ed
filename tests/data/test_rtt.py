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


# issue 92: everything checked before the first write; the user's files never replaced
def _tree(root):
    """Every path under ``root`` -> 'dir', 'link' or the file's sha256 (computed here)."""
    import hashlib

    return {str(p.relative_to(root)): "link" if p.is_symlink() else "dir" if p.is_dir()
            else hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))}


def _bad_model(kind, base, marians, tiny_bert_dir):
    """A --models directory (or name) that cannot translate, of the given ``kind``."""
    import shutil

    if kind == "missing":
        return str(base / "nope")
    if kind == "encoder":
        return str(tiny_bert_dir)
    if kind == "hub-name-offline":
        return "nobody-cselab-test/opus-mt-fr-en"  # in no cache; the hub is offline
    out = base / kind
    if kind == "empty":
        out.mkdir()
        return str(out)
    shutil.copytree(marians["fr-en"], out)
    if kind == "no-tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (out / name).unlink()
    elif kind == "damaged-config":
        (out / "config.json").write_text('{"model_type": "marian", ')
    elif kind == "no-weights":
        (out / "model.safetensors").unlink()
    elif kind == "truncated-weights":
        weights = out / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return str(out)


BAD_MODELS = {"missing": "is not a directory", "encoder": "it is a bert encoder, not a sequence-to-sequence",
              "hub-name-offline": "not in the hub's cache and the hub cannot be reached",
              "empty": "its config does not load", "no-tokenizer": "its tokenizer does not load",
              "damaged-config": "its config does not load", "no-weights": "it holds no weights",
              "truncated-weights": "model.safetensors is not whole safetensors weights"}


@pytest.mark.parametrize("kind", sorted(BAD_MODELS))
def test_a_bad_back_model_is_refused_before_the_forward_file(kind, tmp_path, marians, tiny_bert_dir, capsys,
                                                              monkeypatch):
    import time

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    source = _source(work)
    bad = _bad_model(kind, tmp_path, marians, tiny_bert_dir)
    before = _tree(tmp_path)
    start = time.monotonic()
    rc, _, err = run_cli(["data", "rtt", str(source), "--via", "fr", "--output", str(work / "out"), "--models",
                          f"en-fr={marians['en-fr']},fr-en={bad}", "--device", "cpu"], capsys)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert "cannot load the translation model" in err and "(fr-en)" in err and BAD_MODELS[kind] in err, err
    assert time.monotonic() - start < 20  # checked, not tried for minutes
    assert _tree(tmp_path) == before  # no --output, no forward file, no state


@pytest.mark.parametrize(("args", "message"), [
    (["--via", "fr,,"], "--via 'fr,,' holds an empty language"),
    (["--via", ",fr"], "--via ',fr' holds an empty language"),
    (["--via", "fr", "--models", "en-fr=a,en-fr=b"], "--models gives en-fr twice (a and b): give each direction once"),
    (["--via", "fr", "--models", "en-fr=a,,fr-en=b"], "holds an empty item"),
])
def test_contradictory_options_are_refused(args, message, tmp_path, capsys):
    source = _source(tmp_path)
    before = _tree(tmp_path)
    rc, _, err = run_cli(["data", "rtt", str(source), "--output", str(tmp_path / "out"), *args], capsys)
    assert rc == 2 and err.count("\n") == 1 and message in err, err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_text_is_refused_cleanly(text, tmp_path, marians, capsys):
    source = tmp_path / "empty.txt"
    source.write_text(text)
    before = _tree(tmp_path)
    models = f"en-fr={marians['en-fr']},fr-en={marians['fr-en']}"
    rc, _, err = run_cli(["data", "rtt", str(source), "--via", "fr", "--output", str(tmp_path / "out"), "--models",
                          models, "--device", "cpu"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "holds no sentence to translate" in err, err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("manifest", ["{damaged", '{"lines": 10}', None])
def test_a_users_file_beside_a_manifest_that_proves_nothing_is_kept(manifest, tmp_path, marians, capsys):
    source = _source(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "corpus.fr.txt").write_text("my own french text\n")
    if manifest is not None:
        (out / "corpus.fr.txt.manifest.json").write_text(manifest)
    before = _tree(tmp_path)
    models = f"en-fr={marians['en-fr']},fr-en={marians['fr-en']}"
    rc, _, err = run_cli(["data", "rtt", str(source), "--via", "fr", "--output", str(out), "--models", models,
                          "--device", "cpu"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "corpus.fr.txt exists without a manifest of cselab's" in err, err
    assert _tree(tmp_path) == before


def test_a_finished_translation_is_redone_over_its_own_manifest(tmp_path, marians):
    """A translation cselab wrote (its manifest records its sha256) is cselab's to replace when the options change."""
    source = _source(tmp_path)
    target = rtt_mod.translate_file(source, tmp_path / "t.txt", marians["en-fr"], max_length=4, device="cpu")
    rtt_mod.translate_file(source, target, marians["en-fr"], max_length=5, device="cpu")
    assert target.read_text().split("\n")[:-1] == _reference(marians["en-fr"], SOURCE, 5)


def test_a_part_that_links_out_is_refused(tmp_path, marians):
    from cselab.errors import CselabError

    source = _source(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    (tmp_path / "t.txt.part").symlink_to(outside)
    with pytest.raises(CselabError, match="t.txt.part is a link or a directory"):
        rtt_mod.translate_file(source, tmp_path / "t.txt", marians["en-fr"], device="cpu")
    assert outside.read_text() == "the user's file\n"
