"""The teacher's pass over a text: its unit vectors of every sentence, computed once, kept on disk and reused.

:func:`teacher_vectors` fills a :class:`~cselab.data.vector_store.VectorStore` with the teacher's L2-normalised
inference vectors of the sentences, in token-length-sorted chunks (so a kill resumes where the pass stopped). The
store's key is the teacher's files, its truncation length and the sentences (:func:`teacher_key`): a store made
under another key is never read. A finished store is also linked into ``$CSELAB_HOME/teacher-vectors/<key>`` (a hard
link where the file system allows: no second copy), so the next run on the same text with the same teacher, in any
directory, reads it instead of running the teacher again.

**The fastest path that agrees.** Before the pass, each way this machine can run the teacher encodes the same probe
of the user's sentences: torch at the precision the probe of :mod:`cselab.runtime.precision` picks (bf16 where it
pays), and, with ``cselab[export]`` installed, an ONNX Runtime and an OpenVINO export of the teacher (fp32). An
export is made once per teacher and kept in ``$CSELAB_HOME/teacher-exports/<the teacher's fingerprint>`` (in the
run's scratch directory where that cannot be written), so a later pass with the same teacher (another text, another
seed, a resume) times the kept export instead of paying for the export again; a teacher made for one run (the
teacher ``cselab adapt --adapt-teacher`` adapts first) has its exports kept in that run (``export_dir``) instead,
so they go with it. A way is eligible when its vectors of
the probe agree with torch fp32's to a mean cosine of at least :data:`AGREEMENT`; the fastest eligible one runs the
pass. A precision the run asks for explicitly is kept: ``bf16`` runs torch in bf16 (fp32 only if bf16 does not
agree), ``fp32`` never runs bf16. The choice and every candidate's time and agreement are kept in the store's
``state.json``. A text of fewer than :data:`EXPORT_MIN_SENTENCES` sentences runs on torch without trying the
exports."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cselab.data.vector_store import VectorStore, content_key, write_texts
from cselab.errors import CselabError
from cselab.paths import cselab_home, resolve_model_path
from cselab.reporter import QUIET, report, reporting
from cselab.vocabulary import FORMATS

AGREEMENT = 0.995  # the least mean cosine with torch fp32's vectors on the probe for a way to be eligible
PROBE_SENTENCES = 64
EXPORT_MIN_SENTENCES = 2000  # below this, exporting and timing the exports costs more than they can save
CHUNK = 512  # sentences per chunk of the pass (what a kill can lose)
BATCH = 16  # sentences per batch: on a 2-core CPU small batches ran the teacher faster (docs)
CACHE_DIR = "teacher-vectors"
EXPORT_CACHE_DIR = "teacher-exports"


@dataclass(frozen=True)
class Candidate:
    """One way of running the teacher, as the probe measured it."""

    backend: str  # torch, onnx or openvino
    precision: str  # fp32 or bf16 (torch); fp32 for the exports
    seconds: float  # the probe's encoding time
    agreement: float  # mean cosine with torch fp32 on the probe


def model_fingerprint(model_dir: str | Path) -> str:
    """A sha256 of a model directory's files (names, sizes and contents), so a changed teacher is a new key. A pass
    asks for it once per part and once per export; the contents are hashed again only when a file's name, size or
    modification time changed since the last time in this process."""
    root = Path(model_dir).resolve()
    files = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = file.relative_to(root).as_posix()
        if relative.startswith(("onnx/", "openvino/")) or relative == "README.md":
            continue  # other backends' files and the card do not change what torch computes
        stat = file.stat()
        files.append((relative, stat.st_size, stat.st_mtime_ns))
    return _hash_of_files(str(root), tuple(files))


@functools.lru_cache(maxsize=16)
def _hash_of_files(root: str, files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for relative, size, _ in files:
        digest.update(f"{relative}\0{size}\0".encode())
        with open(Path(root) / relative, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def store_texts(sentences: Sequence[str]) -> list[str]:
    """The texts a pass over ``sentences`` stores, one row each: the distinct ones, sorted. A pass is then the same
    for any order of the same texts (a run's training and held-out parts read the pass of the whole text)."""
    return sorted(set(sentences))


def teacher_key(teacher_dir: str | Path, sentences: Sequence[str], max_length: int) -> str:
    """The key of the teacher's pass over ``sentences``: its files, its truncation length and the distinct texts."""
    return content_key("teacher-vectors/2", model_fingerprint(teacher_dir), str(max_length), store_texts(sentences))


def _unit(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    return array / np.clip(np.linalg.norm(array, axis=1, keepdims=True), 1e-12, None)


def _probe(sentences: Sequence[str]) -> list[str]:
    picks = random.Random(0).sample(range(len(sentences)), min(PROBE_SENTENCES, len(sentences)))
    return [sentences[i] for i in sorted(picks)]


class _Runner:
    """A loaded way of running the teacher: ``encode(texts)`` gives unit vectors ``[N, d]``."""

    def __init__(self, backend: str, precision: str, model: Any, device: Any = None) -> None:
        self.backend, self.precision, self.model, self.device = backend, precision, model, device

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.backend != "torch":
            return _unit(self.model.encode(list(texts), batch_size=BATCH).numpy())
        from cselab.runtime.precision import autocast_context

        with autocast_context(self.precision, self.device):
            return _unit(self.model.encode(list(texts), batch_size=BATCH).float().numpy())


def _exports_available() -> list[str]:
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        return []
    runtimes = {"onnx": "onnxruntime", "openvino": "openvino"}
    return [fmt for fmt, module in runtimes.items() if importlib.util.find_spec(module) is not None]


def _timed(runner: _Runner, probe: Sequence[str]) -> tuple[float, np.ndarray]:
    runner.encode(probe[:8])  # warm-up: the first call of a shape is slower
    start = time.perf_counter()
    vectors = runner.encode(probe)
    return time.perf_counter() - start, vectors


def choose_runner(teacher: str, model: Any, probe: Sequence[str], scratch: Path, *,
                  requested_precision: str = "auto", backends: Sequence[str] | None = None,
                  export_dir: str | Path | None = None) -> tuple[_Runner, list[Candidate]]:
    """The fastest way of running ``teacher`` on this machine whose vectors of ``probe`` agree with torch fp32's
    (mean cosine >= :data:`AGREEMENT`), and what the probe measured of each candidate. ``model``: the teacher
    loaded for torch, on its device. ``backends`` limits the candidates (default: torch and every installed export
    backend, on a CPU; torch alone on a GPU). ``export_dir``: where the exports are kept (:func:`teacher_export`)."""
    from cselab.runtime.precision import inference_precision

    device = next(model.parameters()).device
    reference_runner = _Runner("torch", "fp32", model, device)
    reference_seconds, reference = _timed(reference_runner, probe)
    candidates = [Candidate("torch", "fp32", reference_seconds, 1.0)]
    runners = {("torch", "fp32"): reference_runner}
    allowed = (set(backends) if backends is not None
               else {"torch", *(_exports_available() if device.type == "cpu" else [])})
    precision = inference_precision(requested_precision, model, batch_size=BATCH).precision
    if requested_precision == "bf16":  # asked for: torch in bf16 runs the pass (fp32 only if bf16 does not agree)
        allowed = {"torch"}
    if "torch" in allowed and precision != "fp32":
        runner = _Runner("torch", precision, model, device)
        seconds, vectors = _timed(runner, probe)
        candidates.append(Candidate("torch", precision, seconds, float((vectors * reference).sum(1).mean())))
        runners[("torch", precision)] = runner
    for fmt in FORMATS:
        if fmt not in allowed:
            continue
        from cselab.export import load_exported

        try:
            runner = _Runner(fmt, "fp32", load_exported(teacher_export(teacher, fmt, scratch, export_dir), fmt))
        except CselabError as exc:  # a twin or an ensemble has no export: torch runs it
            report().say(f"teacher pass: no {fmt} export ({exc})")
            continue
        seconds, vectors = _timed(runner, probe)
        candidates.append(Candidate(fmt, "fp32", seconds, float((vectors * reference).sum(1).mean())))
        runners[(fmt, "fp32")] = runner

    def eligible(c: Candidate) -> bool:
        if requested_precision == "bf16":
            return c.precision == "bf16" and c.agreement >= AGREEMENT
        return c.backend in allowed and c.agreement >= AGREEMENT

    # torch fp32 is the reference: the way left when no other agrees (or none other is allowed)
    best = min((c for c in candidates if eligible(c)), key=lambda c: c.seconds, default=candidates[0])
    return runners[(best.backend, best.precision)], candidates


def teacher_export(teacher: str, fmt: str, scratch: Path, export_dir: str | Path | None = None) -> Path:
    """The teacher's fp32 ``fmt`` export: the one kept from an earlier pass in ``$CSELAB_HOME/teacher-exports/<its
    fingerprint>/<fmt>`` (``export_dir/<its fingerprint>/<fmt>`` when given: a teacher made for one run keeps its
    exports in that run, not in the data home), else made there now, or in ``scratch`` where that cannot be
    written."""
    from cselab.export import export_model
    from cselab.export.output import is_earlier_export

    source = resolve_model_path(teacher)
    root = Path(export_dir) if export_dir is not None else cselab_home() / EXPORT_CACHE_DIR
    kept = root / model_fingerprint(source) / fmt
    if is_earlier_export(kept):
        report().say(f"teacher pass: the {fmt} export of {teacher} kept in {kept}")
        return kept
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(kept.parent, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if writable:
        report().say(f"teacher pass: exporting {teacher} to {fmt} (once; kept in {kept.parent})")
    else:
        report().say(f"teacher pass: exporting {teacher} to {fmt} for this pass ({kept.parent} cannot be written)")
        kept = scratch / fmt
    with reporting(QUIET):  # the line above says it; the export's own steps are not the pass's
        return export_model(source, fmt, output=kept)


def _load_runner(teacher: str, model: Any, backend: str, precision: str, scratch: Path,
                 export_dir: str | Path | None = None) -> _Runner:
    """The way a store's pass was started with (a resumed pass keeps it, so every row is computed alike)."""
    if backend == "torch":
        return _Runner("torch", precision, model, next(model.parameters()).device)
    from cselab.export import load_exported

    return _Runner(backend, "fp32", load_exported(teacher_export(teacher, backend, scratch, export_dir), backend))


def load_teacher(teacher: str, device: Any = None) -> Any:
    """The teacher loaded for torch inference (on ``device``, default the inference device); refused in one line when
    ``teacher`` is no model directory."""
    if not Path(resolve_model_path(teacher)).is_dir():
        raise CselabError(f"teacher not found: {teacher}")
    from cselab.models.sentence_model import load_model

    model = load_model(teacher).eval()
    if device is not None:
        model.to(device)
    return model


def teacher_vectors(teacher: str, sentences: Sequence[str], store_dir: str | Path | None, *, device: Any = None,
                    requested_precision: str = "auto", backends: Sequence[str] | None = None,
                    cache: bool = True, model: Any = None, export_dir: str | Path | None = None) -> np.ndarray:
    """The teacher's unit vectors of ``sentences`` ``[N, d]`` (float32, in the order of ``sentences``; the store holds
    each distinct text once, :func:`store_texts`), computed on the fastest agreeing path (module docstring) unless a
    store of the same key is in ``store_dir`` or in the cache. A store of another key in ``store_dir`` is refused
    (it holds other vectors). ``store_dir`` ``None``: the pass is kept in the cache only. ``model``: the teacher
    already loaded by :func:`load_teacher` (a caller passing several texts loads it once). ``export_dir``: where the
    teacher's exports are kept (:func:`teacher_export`; default: the data home's). What it does is said, and its bar
    shown, through the reporter in effect (:mod:`cselab.reporter`)."""
    model = model if model is not None else load_teacher(teacher, device)
    request = list(sentences)
    sentences = store_texts(request)
    max_length = _truncation_length(model)
    key = teacher_key(resolve_model_path(teacher), sentences, max_length)
    shared = cselab_home() / CACHE_DIR / key
    store_dir = Path(store_dir) if store_dir is not None else shared
    store = _open_own(store_dir, key)
    if store is None and cache and VectorStore.open(shared) is not None:
        cached = VectorStore.open(shared)
        if cached is not None and cached.complete and cached.key == key:
            report().say(f"teacher pass: reusing the vectors of {len(sentences)} sentences from {shared}")
            store = cached.copy_to(store_dir)
    if store is not None and store.texts() is None:
        write_texts(store.path, sentences, store.rows)  # the key says these are the store's texts
    if store is not None and store.complete:
        return _in_order(store, request)
    with tempfile.TemporaryDirectory(prefix="cselab-teacher-") as scratch_name:
        scratch = Path(scratch_name)
        if store is None:
            probe = _probe(sentences)
            if backends is None and len(sentences) < EXPORT_MIN_SENTENCES:
                backends = ["torch"]
            runner, candidates = choose_runner(teacher, model, probe, scratch, backends=backends,
                                               requested_precision=requested_precision, export_dir=export_dir)
            measured = ", ".join(f"{c.backend} {c.precision} {len(probe) / c.seconds:.1f} sentences/s "
                                 f"(agreement {c.agreement:.4f})" for c in candidates)
            report().say(f"teacher pass: {measured}; running {runner.backend} {runner.precision}")
            order = _length_order(runner, sentences)
            info = {"teacher": str(teacher), "max_length": max_length, "backend": runner.backend,
                    "precision": runner.precision, "candidates": [asdict(c) for c in candidates]}
            store = VectorStore.create(store_dir, key, len(sentences), int(runner.encode(sentences[:1]).shape[1]),
                                       order=order, info=info, texts=sentences)
        else:
            info = store.state.get("info", {})
            runner = _load_runner(teacher, model, info.get("backend", "torch"), info.get("precision", "fp32"), scratch,
                                  export_dir)
            report().say(f"teacher pass: resuming at {store.filled} of {store.rows} sentences "
                f"({runner.backend} {runner.precision})")
        _fill(store, runner, sentences)
    if cache:
        _publish(store, shared)
    return _in_order(store, request)


def _in_order(store: VectorStore, request: Sequence[str]) -> np.ndarray:
    """The store's vectors of the texts ``request``, in that order; a text the store does not hold is refused."""
    texts = store.texts()
    if texts is None:
        raise CselabError(f"{store.path} keeps no texts, so its rows cannot be matched to sentences")
    row = {text: i for i, text in enumerate(texts)}
    missing = [s for s in request if s not in row]
    if missing:
        raise CselabError(f"{store.path} holds no teacher vector of {len(missing)} training sentence(s), e.g. "
                          f"{missing[0][:60]!r}: the vectors are of another text")
    return np.asarray(store.vectors()[[row[s] for s in request]])


def _length_order(runner: _Runner, sentences: Sequence[str]) -> list[int]:
    """Longest first by token count (chunks of similar length pad least), ties in text order."""
    tokenizer = runner.model.tokenizer
    lengths = [len(ids) for ids in tokenizer(list(sentences), truncation=False)["input_ids"]]
    return sorted(range(len(sentences)), key=lambda i: (-lengths[i], i))


def _fill(store: VectorStore, runner: _Runner, sentences: Sequence[str]) -> None:
    bar = report().bar(total=store.rows, initial=store.filled, desc="teacher pass", unit="sent")

    def advance(filled: int, _rows: int) -> None:
        bar.update(filled - bar.n)

    try:
        store.fill(lambda indices: runner.encode([sentences[i] for i in indices]), CHUNK, advance)
    finally:
        bar.close()


def _publish(store: VectorStore, shared: Path) -> None:
    """Link a finished store into the cache (skipped when it is there already or cannot be written)."""
    if shared.exists():
        return
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the next run a pass, nothing else
        store.copy_to(shared)


def pass_is_kept(teacher: str, sentences: Sequence[str], store_dir: str | Path, model: Any = None) -> bool:
    """Whether the teacher's pass over ``sentences`` is already finished in ``store_dir`` or in the cache (nothing to
    run). ``model``: the teacher already loaded (:func:`load_teacher`), else loaded here to read its length."""
    key = _pass_key(teacher, sentences, model)
    for place in (Path(store_dir), cselab_home() / CACHE_DIR / key):
        store = VectorStore.open(place) if (place / "state.json").is_file() else None
        if store is not None and store.key == key and store.complete:
            return True
    return False


def read_teacher_vectors(store_dir: str | Path, sentences: Sequence[str]) -> np.ndarray:
    """The rows of a finished teacher pass in ``store_dir`` for ``sentences`` ``[len(sentences), d]``, found by
    their text (the store may hold more sentences, e.g. a held-out part)."""
    store = VectorStore.open(store_dir)
    if store is None or not store.complete:
        raise CselabError(f"{store_dir} holds no finished teacher pass (cselab adapt writes one in OUTPUT/teacher)")
    return _in_order(store, sentences)


def _pass_key(teacher: str, sentences: Sequence[str], model: Any = None) -> str:
    """The key of the teacher's pass over ``sentences`` (:func:`teacher_key`), with the truncation length of the
    loaded teacher ``model`` (``None``: loaded here to read it)."""
    model = model if model is not None else load_teacher(teacher)
    return teacher_key(resolve_model_path(teacher), sentences, _truncation_length(model))


def _truncation_length(model: Any) -> int:
    """The loaded teacher's truncation length, part of the pass's key (0: a kind that keeps none of its own)."""
    return int(getattr(model, "max_length", 0) or 0)


def _open_own(store_dir: str | Path, key: str) -> VectorStore | None:
    """The store in ``store_dir`` (``None``: none yet), refused in one line when it holds another pass than ``key``."""
    store = VectorStore.open(store_dir)
    if store is not None and store.key != key:
        raise CselabError(f"{store_dir} holds the teacher's vectors of another text or teacher; delete it or choose "
                          "another directory")
    return store


def teacher_vectors_of_parts(teacher: str, parts: dict[str, Sequence[str]], store_dir: str | Path | None,
                             **options: Any) -> np.ndarray:
    """The teacher's unit vectors of the texts of ``parts`` (name -> texts), one part after another, each part run
    as a pass of its own (:func:`teacher_vectors` with ``options``; resumable, found in the cache when made before).
    Why: a text made of texts already passed (a run's lines and the passages made of them) reuses their passes.

    With ``store_dir``, the parts' passes are made beside it (``STORE-NAME``), then assembled into one store in
    ``store_dir`` (what a training run reads) and removed; one part is passed in ``store_dir`` directly. ``None``:
    the parts' passes are kept in the cache only, and nothing is assembled."""
    texts_of = list(parts.values())
    if options.get("model") is None:  # loaded once for every part
        options["model"] = load_teacher(teacher, options.get("device"))
    if len(parts) == 1:
        return teacher_vectors(teacher, texts_of[0], store_dir, **options)
    if store_dir is None:
        return np.concatenate([teacher_vectors(teacher, part, None, **options) for part in texts_of])
    store_dir = Path(store_dir)
    request = [text for part in texts_of for text in part]
    texts = store_texts(request)
    key = _pass_key(teacher, texts, options["model"])
    store = _open_own(store_dir, key)
    if store is None or not store.complete:
        part_dirs = [store_dir.with_name(f"{store_dir.name}-{name}") for name in parts]
        row: dict[str, np.ndarray] = {}
        for part, part_dir in zip(texts_of, part_dirs, strict=True):
            for text, vector in zip(part, teacher_vectors(teacher, part, part_dir, **options), strict=True):
                row.setdefault(text, vector)  # a text in several parts keeps its first part's vector
        if store is None:
            store = VectorStore.create(store_dir, key, len(texts), len(next(iter(row.values()))), texts=texts,
                                       info={"teacher": str(teacher), "parts": list(parts)})
        store.fill(lambda indices: np.stack([row[texts[i]] for i in indices]), chunk=max(1, len(texts)))
        for part_dir in part_dirs:
            shutil.rmtree(part_dir, ignore_errors=True)
    return _in_order(store, request)
