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
whole chunk (a torn last line is cut off). A finished file has its manifest (``<file>.manifest.json``, recording the
file's sha256), and is not translated again while its input, model and options are the same.

Everything is checked before the first write: the options, the text (at least one sentence), every output file (one
already there is cselab's only when its manifest is readable and records that file's sha256; anything else is the
user's and refused) and every model of the round trip, both directions of each language (a directory holding a
sequence-to-sequence config, a tokenizer and whole weights; a hub name found in the hub's cache, or reachable).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.parse
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
    if text is None:
        return models
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--models {text!r} holds an empty item: give SRC-TGT=MODEL pairs separated by commas")
        pair, sep, name = item.partition("=")
        src, dash, tgt = pair.strip().partition("-")
        if not sep or not dash or not src or not tgt or not name.strip():
            raise UsageError(f"--models {item!r}: give SRC-TGT=MODEL pairs, e.g. en-fr=Helsinki-NLP/opus-mt-en-fr,"
                             "fr-en=/models/opus-mt-fr-en")
        direction = f"{src.strip()}-{tgt.strip()}"
        if direction in models:
            raise UsageError(f"--models gives {direction} twice ({models[direction]} and {name.strip()}): give each "
                             "direction once")
        models[direction] = name.strip()
    return models


def parse_languages(text: str) -> list[str]:
    languages = [part.strip() for part in text.split(",")]
    if any(not lang for lang in languages) and any(languages):
        raise UsageError(f"--via {text!r} holds an empty language: give pivot languages separated by commas, e.g. "
                         "--via fr,ru")
    if not any(languages) or len(set(languages)) != len(languages):
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
    if not any(line.strip() for line in split_lines(source.read_bytes())):
        raise CselabError(f"{source} holds no sentence to translate (it is empty or blank)")
    steps = []
    for lang in via:
        forward, back = rtt_paths(source, lang, output_dir)
        for src_path, dst_path, src, tgt in ((source, forward, SOURCE_LANGUAGE, lang),
                                             (forward, back, lang, SOURCE_LANGUAGE)):
            steps.append((src_path, dst_path, models.get(f"{src}-{tgt}") or default_model(src, tgt), f"{src}-{tgt}"))
    for _, dst_path, _, _ in steps:  # every output and every model, before the first write
        check_output_file(dst_path)
    for model, direction in dict.fromkeys((m, d) for _, _, m, d in steps):
        check_translation_model(model, direction)
    output_dir.mkdir(parents=True, exist_ok=True)
    for src_path, dst_path, model, _ in steps:
        translate_file(src_path, dst_path, model, batch_size=batch_size, max_length=max_length,
                       num_beams=num_beams, device=device)
    return {lang: rtt_paths(source, lang, output_dir)[1] for lang in via}


def _manifest_path(target: Path) -> Path:
    return target.with_name(target.name + MANIFEST_SUFFIX)


def _owned(target: Path) -> dict[str, Any] | None:
    """The manifest of ``target`` when it proves the file is a translation cselab wrote (readable, and recording
    the file's sha256); None otherwise."""
    manifest = _read_json(_manifest_path(target))
    if (not isinstance(manifest, dict) or target.is_symlink() or not target.is_file()
            or manifest.get("output_sha256") != sha256_file(target)):
        return None
    return manifest


def check_output_file(target: Path) -> None:
    """Refuse, in one line, to write ``target`` (or its part) where something is that cselab cannot prove its own: a
    file without a manifest that records its sha256, a link, a directory."""
    target = Path(target)
    part = target.with_name(target.name + ".part")
    for path in (target, _manifest_path(target), part, part.with_name(part.name + ".json")):
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise CselabError(f"{path} is a link or a directory, where cselab writes a translation: move it away or "
                              "choose another --output")
    if target.exists() and _owned(target) is None:
        raise CselabError(f"{target} exists without a manifest of cselab's that records it (its sha256): it is not "
                          "cselab's to replace; move it away or choose another --output")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub (``$HF_ENDPOINT`` or huggingface.co) accepts a connection, unless ``HF_HUB_OFFLINE`` is set."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    parts = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)),
                                      timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def check_translation_model(model: str, direction: str) -> None:
    """Refuse, in one line and before anything is written, a model the ``direction`` cannot translate with: a
    directory that is missing or holds no sequence-to-sequence config (an encoder), no tokenizer or no whole weights;
    a hub name that is neither in the hub's cache nor reachable (checked in seconds, not after the hub's retries)."""
    from transformers import AutoConfig, AutoTokenizer

    hint = f"give a local directory of a MarianMT-style model with --models {direction}=DIR"
    where = f"the translation model {model!r} ({direction})"
    path = Path(model).expanduser()
    local = path.is_dir()
    # a hub name is NAME or OWNER/NAME; anything else that names no directory is a path that is not there
    if not local and (path.exists() or model.startswith(("/", ".", "~")) or model.count("/") > 1):
        raise CselabError(f"cannot load {where}: {model} is not a directory; {hint}")
    cached_only = False
    if not local:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
        cached_only = isinstance(cached, str)
        if not cached_only and not _hub_reachable():
            raise CselabError(f"cannot load {where}: it is not in the hub's cache and the hub cannot be reached; "
                              f"{hint}")
    try:
        config = AutoConfig.from_pretrained(model, local_files_only=cached_only)
    except Exception as exc:  # noqa: BLE001 (transformers raises OSError, ValueError, KeyError... for a bad config)
        raise CselabError(f"cannot load {where}: its config does not load ({_first_line(exc)}); {hint}") from None
    if not getattr(config, "is_encoder_decoder", False):
        raise CselabError(f"cannot load {where}: it is a {getattr(config, 'model_type', 'model')} encoder, not a "
                          f"sequence-to-sequence translation model; {hint}")
    try:
        AutoTokenizer.from_pretrained(model, local_files_only=cached_only)
    except Exception as exc:  # noqa: BLE001 (a missing or damaged tokenizer raises many kinds of error)
        raise CselabError(f"cannot load {where}: its tokenizer does not load ({_first_line(exc)}); {hint}") from None
    if local:
        _check_weights(path, where, hint)


def _check_weights(directory: Path, where: str, hint: str) -> None:
    """Whole weights in ``directory``: a safetensors file whose header covers the file (a cut file is refused), or a
    PyTorch weights file."""
    from safetensors import SafetensorError, safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files and not any(directory.glob("pytorch_model*.bin")):
        raise CselabError(f"cannot load {where}: it holds no weights (model.safetensors or pytorch_model.bin); "
                          f"{hint}")
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError) as exc:
            raise CselabError(f"cannot load {where}: {file} is not whole safetensors weights ({_first_line(exc)}), a "
                              f"cut or damaged file; {hint}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    manifest = _manifest_path(target)
    check_output_file(target)
    owned = _owned(target)
    if owned is not None and {k: v for k, v in owned.items() if k != "output_sha256"} == state:
        report().say(f"{target}: already translated ({len(lines)} lines, {model})")
        return target
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
    if not part.exists():
        part.touch()  # no line to translate: an empty file
    check_output_file(target)  # again, just before the rename: nothing of the user's is replaced
    if target.exists():  # an earlier translation with other inputs or options: cselab's (its manifest proves it)
        manifest.unlink()
    os.replace(part, target)
    write_json_atomic(manifest, {**state, "output_sha256": sha256_file(target)})
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
        from safetensors import SafetensorError

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForSeq2SeqLM.from_pretrained(model).to(self.device).eval()
        except (OSError, ValueError, SafetensorError) as exc:
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
