"""Round-trip translation (``cselab data rtt TEXT --via fr,ru --output DIR``): TNCSE's and JTCSE's stage-1 corpora
(EN -> fr -> EN and EN -> ru -> EN), written as the line-aligned files their presets read with
``augmentation: {kind: file, path: ...}``.

For a text ``DIR/<stem>.txt`` and a language ``xx`` it writes ``OUT/<stem>.xx.txt`` (the forward translation, also
what IFCL's parallel ``target`` reads) and ``OUT/<stem>.rtt-xx.txt`` (its translation back). Line ``i`` of each is the
translation of line ``i`` of its input; a blank (or non-UTF-8) input line gives a blank line, which the training
reader skips. The models are MarianMT-style sequence-to-sequence models run through transformers
(``AutoModelForSeq2SeqLM``): a hub name or a local directory per direction, by default ``Helsinki-NLP/opus-mt-SRC-TGT``.

Batched (lines sorted by length inside each chunk, so a batch pads little), on the GPU when there is one, greedy
decoding unless ``num_beams`` says otherwise. Resumable: a file grows as ``<file>.part`` one chunk at a time beside
its state (``<file>.part.json``: the input's sha256, the model and the options); a killed run continues after the last
whole chunk (a torn last line is cut off). A finished file has its manifest (``<file>.manifest.json``), and is not
translated again while its input, model and options are the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cselab.data.text.corpus import split_lines
from cselab.errors import CselabError, UsageError
from cselab.fileio import sha256_file, write_json_atomic
from cselab.reporter import report

SOURCE_LANGUAGE = "en"
MODEL_PATTERN = "Helsinki-NLP/opus-mt-{src}-{tgt}"
CHUNK_BATCHES = 16  # batches per chunk: the unit written (and resumed) at once
MANIFEST_SUFFIX = ".manifest.json"


def default_model(src: str, tgt: str) -> str:
    return MODEL_PATTERN.format(src=src, tgt=tgt)


def parse_models(text: str | None) -> dict[str, str]:
    """``--models en-fr=DIR,fr-en=Helsinki-NLP/opus-mt-fr-en`` as ``{"en-fr": "DIR", ...}``."""
    models: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        pair, sep, name = item.partition("=")
        src, dash, tgt = pair.strip().partition("-")
        if not sep or not dash or not src or not tgt or not name.strip():
            raise UsageError(f"--models {item!r}: give SRC-TGT=MODEL pairs, e.g. en-fr=Helsinki-NLP/opus-mt-en-fr,"
                             "fr-en=/models/opus-mt-fr-en")
        models[f"{src.strip()}-{tgt.strip()}"] = name.strip()
    return models


def parse_languages(text: str) -> list[str]:
    languages = [part.strip() for part in text.split(",") if part.strip()]
    if not languages or len(set(languages)) != len(languages):
        raise UsageError(f"--via {text!r}: give distinct pivot languages, e.g. --via fr,ru")
    for lang in languages:
        if not lang.replace("_", "").isalnum() or lang == SOURCE_LANGUAGE:
            raise UsageError(f"--via {lang!r} is not a pivot language code (e.g. fr, ru, de)")
    return languages


def rtt_paths(source: Path, lang: str, output_dir: Path) -> tuple[Path, Path]:
    """(forward, back) files of ``source`` through ``lang`` in ``output_dir``."""
    stem = source.name[:-4] if source.name.endswith(".txt") else source.name
    return output_dir / f"{stem}.{lang}.txt", output_dir / f"{stem}.rtt-{lang}.txt"


def round_trip(source: str | Path, via: Sequence[str], output_dir: str | Path, *,
               models: Mapping[str, str] | None = None, batch_size: int = 32, max_length: int = 256,
               num_beams: int = 1, device: str | None = None) -> dict[str, Path]:
    """Translate ``source`` to each language of ``via`` and back; returns language -> round-trip file (see the
    module docstring for the files and how a killed run resumes)."""
    source, output_dir = Path(source), Path(output_dir)
    if not source.is_file():
        raise CselabError(f"text file not found: {source}")
    if batch_size < 1 or max_length < 1 or num_beams < 1:
        raise UsageError("batch size, max length and beams must be at least 1")
    models = dict(models or {})
    unknown = [pair for pair in models if pair.split("-", 1)[0] not in (SOURCE_LANGUAGE, *via)
               or pair.split("-", 1)[1] not in (SOURCE_LANGUAGE, *via)]
    if unknown:
        raise UsageError(f"--models {unknown[0]}: not a direction of this round trip "
                         f"({', '.join(f'en-{v}, {v}-en' for v in via)})")
    output_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for lang in via:
        forward, back = rtt_paths(source, lang, output_dir)
        for src_path, dst_path, src, tgt in ((source, forward, SOURCE_LANGUAGE, lang),
                                             (forward, back, lang, SOURCE_LANGUAGE)):
            model = models.get(f"{src}-{tgt}") or default_model(src, tgt)
            translate_file(src_path, dst_path, model, batch_size=batch_size, max_length=max_length,
                           num_beams=num_beams, device=device)
        out[lang] = back
    return out


def _state(source: Path, model: str, options: dict[str, Any], n_lines: int) -> dict[str, Any]:
    return {"source": str(source.resolve()), "source_sha256": sha256_file(source), "model": str(model),
            "options": options, "lines": n_lines}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _whole_lines(part: Path) -> int:
    """The whole lines of ``part``, a torn last line cut off (a kill mid-write)."""
    data = part.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep != len(data):
        with open(part, "r+b") as f:
            f.truncate(keep)
    return data[:keep].count(b"\n")


def translate_file(source: str | Path, target: str | Path, model: str, *, batch_size: int = 32,
                   max_length: int = 256, num_beams: int = 1, device: str | None = None) -> Path:
    """Translate ``source`` line by line into ``target`` with ``model`` (resumable; see the module docstring)."""
    source, target = Path(source), Path(target)
    lines = split_lines(source.read_bytes())
    options = {"batch_size": batch_size, "max_length": max_length, "num_beams": num_beams}
    state = _state(source, model, {k: v for k, v in options.items() if k != "batch_size"}, len(lines))
    manifest = target.with_name(target.name + MANIFEST_SUFFIX)
    if target.is_file() and _read_json(manifest) == state:
        report().say(f"{target}: already translated ({len(lines)} lines, {model})")
        return target
    if target.exists() and not manifest.is_file():
        raise CselabError(f"{target} exists without the manifest cselab writes beside a translation: it is not "
                          "cselab's to replace; move it away or choose another --output")
    part = target.with_name(target.name + ".part")
    state_file = part.with_name(part.name + ".json")
    done = 0
    if part.is_file() and _read_json(state_file) == state:
        done = _whole_lines(part)
        if done > len(lines):
            done = 0
    if done == 0:
        part.unlink(missing_ok=True)
        write_json_atomic(state_file, state)
    if done:
        report().say(f"{target}: resuming after {done} of {len(lines)} lines")
    translator = _Translator(model, device=device, max_length=max_length, num_beams=num_beams) \
        if done < len(lines) else None
    chunk = batch_size * CHUNK_BATCHES
    with report().bar(len(lines), initial=done, desc=target.name, unit="line") as bar:
        for start in range(done, len(lines), chunk):
            raw = lines[start:start + chunk]
            texts = []
            for line in raw:
                try:
                    texts.append(" ".join(line.decode("utf-8").split()))
                except UnicodeDecodeError:
                    texts.append("")
            translated = translator.translate(texts, batch_size) if translator is not None else []
            _write_chunk(part, translated)
            bar.update(len(raw))
    if target.exists():  # an earlier translation with other inputs or options: cselab's (its manifest says so)
        manifest.unlink()
    os.replace(part, target)
    write_json_atomic(manifest, state)
    state_file.unlink(missing_ok=True)
    return target


def _write_chunk(part: Path, translated: list[str]) -> None:
    with open(part, "ab") as f:
        f.write("".join(f"{line}\n" for line in translated).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


class _Translator:
    """A sequence-to-sequence model and its tokenizer on a device, translating lists of sentences."""

    def __init__(self, model: str, *, device: str | None, max_length: int, num_beams: int) -> None:
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from cselab.runtime.devices import inference_device, pick_device

        self.device = pick_device(device) if device else inference_device()  # --device, or the GPU when present
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForSeq2SeqLM.from_pretrained(model).to(self.device).eval()
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CselabError(f"cannot load the translation model {model!r} ({first}); give a local directory of a "
                              "MarianMT-style model with --models SRC-TGT=DIR") from None
        positions = getattr(self.model.config, "max_position_embeddings", None)
        # tokens in and out: never more than the model has positions for
        self.max_length = min(max_length, positions) if isinstance(positions, int) else max_length
        self.num_beams, self.torch = num_beams, torch

    def translate(self, texts: list[str], batch_size: int) -> list[str]:
        out = [""] * len(texts)
        order = sorted((i for i, t in enumerate(texts) if t), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            batch = self.tokenizer([texts[i] for i in index], return_tensors="pt", padding=True, truncation=True,
                                   max_length=self.max_length).to(self.device)
            with self.torch.inference_mode():
                generated = self.model.generate(**batch, max_new_tokens=self.max_length, num_beams=self.num_beams,
                                                do_sample=False)
            for i, text in zip(index, self.tokenizer.batch_decode(generated, skip_special_tokens=True), strict=True):
                out[i] = " ".join(text.split())
        return out
