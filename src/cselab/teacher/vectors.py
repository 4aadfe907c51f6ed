"""The teacher's pass over a text: its unit vectors of every sentence, computed once, kept on disk and reused.

:func:`teacher_vectors` fills a :class:`~cselab.data.stores.vector_store.VectorStore` with the teacher's L2-normalised
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
teacher a recipe's ``adapt_teacher`` adapts first) has its exports kept in that run (``export_dir``) instead,
so they go with it. A way is eligible when its vectors of
the probe agree with torch fp32's to a mean cosine of at least :data:`AGREEMENT`; the fastest eligible one runs the
pass. A precision the run asks for explicitly is kept: ``bf16`` runs torch in bf16 (fp32 only if bf16 does not
agree), ``fp32`` never runs bf16. The choice and every candidate's time and agreement are kept in the store's
``state.json`` (:func:`pass_backend` reads which way computed a pass). A text of fewer than
:data:`EXPORT_MIN_SENTENCES` sentences runs on torch without trying the exports.

**One choice per machine, whatever ran beside it.** The candidates are timed in :data:`TIMING_ROUNDS` interleaved
rounds (the ways take turns, so a busy minute falls on every way's some rounds), each way counts its best time (load
only makes a timing slower, so one disturbed timing is never a way's best), and a way is chosen over one listed
before it (torch fp32, torch bf16, ONNX Runtime, OpenVINO) only where it is faster by :data:`WAY_MARGIN`: two homes
on one machine choose the same way, and two ways as fast as each other never flip between runs. The report says
which way was chosen and why.

**Reproducible by default.** Timings move on a busy machine, so the choice is made once per machine and teacher
(and requested precision and candidates) and kept in ``$CSELAB_HOME/teacher_backend.json``, as the precision probe
keeps its own (:mod:`cselab.runtime.precision`): a later pass with the same teacher on the same machine runs the
kept way without timing anything, so two runs of one command compute the same vectors. The kept way is still
checked against torch fp32 on the pass's probe; where it does not agree, torch fp32 runs the pass.

**Checked when read.** The store keeps checksums of what was written (:mod:`cselab.data.stores.vector_store`). A damaged
store in the cache is computed again (with a line saying so); a damaged store in a run directory is refused in one
line naming the file. A resumed pass checks the way it continues with against torch fp32 again. A kept export whose
files changed (each kept export's sha256 is kept beside it), that no longer loads or no longer agrees is removed
and made again, once. A finished pass is linked into the cache whenever it is read, so a kill between finishing and
publishing costs nothing."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
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

from cselab.data.stores.vector_store import DamagedStore, VectorStore, content_key, write_texts
from cselab.errors import CselabError
from cselab.fileio import write_atomic, write_json_atomic
from cselab.paths import cselab_home, resolve_model_path
from cselab.reporter import QUIET, report, reporting
from cselab.vocabulary import FORMATS

AGREEMENT = 0.995  # the least mean cosine with torch fp32's vectors on the probe for a way to be eligible
PROBE_SENTENCES = 64
EXPORT_MIN_SENTENCES = 2000  # below this, exporting and timing the exports costs more than they can save
CHUNK = 512  # sentences per chunk of the pass (what a kill can lose)
BATCH = 16  # sentences per batch: on a 2-core CPU small batches ran the teacher faster (docs)
TIMING_ROUNDS = 3  # each candidate way is timed this many times, the ways in turn; its best time counts
ROUND_SENTENCES = 16  # the probe's first sentences, timed in every round after the first (the whole probe)
# a way is chosen over one listed before it (torch fp32 first, then torch bf16, ONNX, OpenVINO) only where it is
# faster by more than this factor: two ways as fast as each other give the same choice on every run and home
WAY_MARGIN = 1.15
CACHE_DIR = "teacher-vectors"
EXPORT_CACHE_DIR = "teacher-exports"
CHOICE_FILE = "teacher_backend.json"  # in $CSELAB_HOME: the way each teacher runs on this machine, chosen once
# who is choosing a way, for its lines: the teacher's pass, or a serving cost timing a model (adaptation.serving)
_WAYS_FOR: contextvars.ContextVar[str] = contextvars.ContextVar("ways_for", default="teacher pass")


@contextlib.contextmanager
def choosing_for(purpose: str) -> Any:
    """Within the block, the lines of choosing and exporting a way start with ``purpose`` (``serving cost``) rather
    than ``teacher pass``: the same choice, said as what the user is waiting for."""
    token = _WAYS_FOR.set(purpose)
    try:
        yield
    finally:
        _WAYS_FOR.reset(token)


def _say(message: str) -> None:
    report().say(f"{_WAYS_FOR.get()}: {message}")


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
    """A way of running the teacher: ``encode(texts)`` gives unit vectors ``[N, d]``. An export's runner also knows
    its directory (``path``), so it can be unloaded between timings and loaded again when it next runs: the ways are
    timed one export in memory at a time (an all-mpnet-base-v2 export holds 560 MB in ONNX Runtime, 700 MB in
    OpenVINO, beside the torch model's 440 MB)."""

    def __init__(self, backend: str, precision: str, model: Any, device: Any = None, path: Path | None = None) -> None:
        self.backend, self.precision, self.model, self.device, self.path = backend, precision, model, device, path
        self.warm = False  # whether a timing has run it once at the probe's shapes (_timed)

    def unload(self) -> None:
        """Free an export's runtime (loaded again on the next ``encode``); torch's model is the caller's."""
        if self.backend != "torch" and self.path is not None and self.model is not None:
            import gc

            from cselab.runtime.allocator import give_back_free_memory

            self.model, self.warm = None, False
            gc.collect()  # the runtime's session sits in a reference cycle: freed now, not at the next collection
            give_back_free_memory()

    def loaded(self) -> Any:
        """The model this way runs (an unloaded export loaded again)."""
        if self.model is None:
            from cselab.export import load_exported

            self.model = load_exported(self.path, self.backend)
        return self.model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.backend != "torch":
            return _unit(self.loaded().encode(list(texts), batch_size=BATCH).numpy())
        from cselab.runtime.precision import autocast_context

        # the encoder holds long passages' batches to its memory budget itself (models/encoder.py)
        with autocast_context(self.precision, self.device):
            return _unit(self.model.encode(list(texts), batch_size=BATCH).float().numpy())


def _exports_available() -> list[str]:
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        return []
    runtimes = {"onnx": "onnxruntime", "openvino": "openvino"}
    return [fmt for fmt, module in runtimes.items() if importlib.util.find_spec(module) is not None]


def _timed(runner: _Runner, probe: Sequence[str]) -> tuple[float, np.ndarray]:
    """The seconds ``runner`` takes to encode ``probe`` (warmed up on its first timing), and the vectors."""
    if not getattr(runner, "warm", False):
        runner.encode(probe[:8])  # warm-up: the first call of a shape is slower
        runner.warm = True
    start = time.perf_counter()
    vectors = runner.encode(probe)
    return time.perf_counter() - start, vectors


def _agreement(vectors: np.ndarray, reference: np.ndarray) -> float:
    """The mean cosine of unit vectors with the reference's (torch fp32's) of the same texts."""
    return float((vectors * reference).sum(1).mean())


def choose_runner(teacher: str, model: Any, probe: Sequence[str], scratch: Path, *,
                  requested_precision: str = "auto", backends: Sequence[str] | None = None,
                  export_dir: str | Path | None = None) -> tuple[_Runner, list[Candidate]]:
    """The fastest way of running ``teacher`` on this machine whose vectors of ``probe`` agree with torch fp32's
    (mean cosine >= :data:`AGREEMENT`), and what the probe measured of each candidate. ``model``: the teacher
    loaded for torch, on its device. ``backends`` limits the candidates (default: torch and every installed export
    backend, on a CPU; torch alone on a GPU). ``export_dir``: where the exports are kept (:func:`teacher_export`).

    The way is chosen by timing once per machine, teacher, requested precision and candidates, and kept in
    ``$CSELAB_HOME/teacher_backend.json``; later calls run the kept way without timing the others (still checked
    against torch fp32 on ``probe``: torch fp32 runs where it does not agree)."""
    from cselab.runtime.precision import inference_precision

    device = next(model.parameters()).device
    reference_runner = _Runner("torch", "fp32", model, device)
    reference_seconds, reference = _timed(reference_runner, probe)
    candidates = [Candidate("torch", "fp32", reference_seconds, 1.0)]
    runners = {("torch", "fp32"): reference_runner}
    allowed = (set(backends) if backends is not None
               else {"torch", *(_exports_available() if device.type == "cpu" else [])})
    if requested_precision == "bf16":  # asked for: torch in bf16 runs the pass (fp32 only if bf16 does not agree)
        allowed = {"torch"}
    key = _choice_key(teacher, device, requested_precision, allowed)
    kept = _kept_choice(key)
    if kept is not None:
        return _kept_runner(kept, teacher, probe, scratch, export_dir, reference_runner, reference, candidates)
    precision = inference_precision(requested_precision, model, batch_size=BATCH).precision
    if "torch" in allowed and precision != "fp32":
        runner = _Runner("torch", precision, model, device)
        seconds, vectors = _timed(runner, probe)
        candidates.append(Candidate("torch", precision, seconds, _agreement(vectors, reference)))
        runners[("torch", precision)] = runner
    for fmt in FORMATS:
        if fmt not in allowed:
            continue
        try:
            runner, seconds, agreement = _export_runner(teacher, fmt, scratch, export_dir, probe, reference, model)
        except CselabError as exc:  # a twin or an ensemble has no export: torch runs it
            _say(f"no {fmt} export ({exc})")
            continue
        runner.unload()
        candidates.append(Candidate(fmt, "fp32", seconds, agreement))
        runners[(fmt, "fp32")] = runner

    def eligible(c: Candidate) -> bool:
        if requested_precision == "bf16":
            return c.precision == "bf16" and c.agreement >= AGREEMENT
        return c.backend in allowed and c.agreement >= AGREEMENT

    candidates = _interleaved_best(candidates, runners, probe)
    # torch fp32 is the reference: the way left when no other agrees (or none other is allowed)
    best, why = _with_margin([c for c in candidates if eligible(c)], candidates[0])
    chosen = _keep_choice(key, best, candidates, why)
    return runners.get(chosen, runners[(best.backend, best.precision)]), candidates


def _interleaved_best(candidates: list[Candidate], runners: dict[tuple[str, str], _Runner],
                      probe: Sequence[str]) -> list[Candidate]:
    """Each candidate with its best time of :data:`TIMING_ROUNDS` (the first round: the whole probe, already timed;
    the others: its first :data:`ROUND_SENTENCES`, scaled to the whole probe). The ways take turns within a round,
    each round starting one way further, so a busy minute slows every way's some rounds, and a timing slowed once
    (another process beside it) is not the best of its way's: load only ever makes a timing slower."""
    part = list(probe[:ROUND_SENTENCES])
    if len(candidates) < 2 or not part:
        return candidates
    best = {(c.backend, c.precision): c.seconds for c in candidates}
    ways = [(c.backend, c.precision) for c in candidates if (c.backend, c.precision) in runners]
    for round_ in range(1, TIMING_ROUNDS):
        for way in ways[round_ % len(ways):] + ways[: round_ % len(ways)]:
            seconds, _ = _timed(runners[way], part)
            runners[way].unload()
            best[way] = min(best[way], seconds * len(probe) / len(part))
    return [Candidate(c.backend, c.precision, best[(c.backend, c.precision)], c.agreement) for c in candidates]


def _with_margin(eligible: list[Candidate], reference: Candidate) -> tuple[Candidate, str]:
    """The way to run: the first eligible way, in the candidates' order, within :data:`WAY_MARGIN` of the fastest
    eligible one (``reference`` where none is eligible), and why, in words."""
    if not eligible:
        return reference, "no other way agrees with torch fp32"
    fastest = min(eligible, key=lambda c: c.seconds)
    chosen = next(c for c in eligible if c.seconds <= fastest.seconds * WAY_MARGIN)
    if chosen is fastest:
        return chosen, (f"the fastest (best of {TIMING_ROUNDS} interleaved timings)"
                        if len(eligible) > 1 else "the only way that agrees")
    return chosen, (f"within {WAY_MARGIN:.2f}x of the fastest, {fastest.backend} {fastest.precision}, and listed "
                    f"before it (best of {TIMING_ROUNDS} interleaved timings)")


def pass_backends(sentences: int) -> list[str] | None:
    """The candidate ways of a pass over ``sentences`` sentences: torch alone below :data:`EXPORT_MIN_SENTENCES`,
    else every one (None: :func:`choose_runner`'s default)."""
    return ["torch"] if sentences < EXPORT_MIN_SENTENCES else None


def fastest_way(teacher: str, model: Any, sentences: Sequence[str], *, requested_precision: str = "auto",
                export_dir: str | Path | None = None) -> _Runner:
    """The way :func:`teacher_vectors` runs ``teacher`` over ``sentences`` on this machine, chosen (and kept) now
    where none is kept yet: what else should run the teacher here (its scoring on the user's labels) runs on it."""
    texts = store_texts(list(sentences))
    backends = pass_backends(len(texts))
    with tempfile.TemporaryDirectory(prefix="cselab-teacher-") as scratch:
        runner, _ = choose_runner(teacher, model, _probe(texts), Path(scratch), requested_precision=requested_precision,
                                  backends=backends, export_dir=export_dir)
    return runner


def _choice_key(teacher: str, device: Any, requested_precision: str, allowed: set[str]) -> str:
    """What the kept choice of a way depends on: the machine (chip or GPU, torch build, threads), the teacher's
    files, the requested precision and the candidates."""
    import torch

    from cselab.runtime.precision import cpu_model_name

    if device.type == "cuda":
        chip = torch.cuda.get_device_name(device)
    else:
        chip = cpu_model_name() if device.type == "cpu" else device.type
    return (f"{chip}|{device.type}|torch {torch.__version__}|threads {torch.get_num_threads()}"
            f"|teacher {model_fingerprint(resolve_model_path(teacher))}|precision {requested_precision}"
            f"|candidates {','.join(sorted(allowed))}")


def _choices_file() -> Path:
    return cselab_home() / CHOICE_FILE


def _read_choices() -> dict[str, Any]:
    try:
        data = json.loads(_choices_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # absent or unreadable: chosen again (and kept again)
    return data if isinstance(data, dict) else {}


def _kept_choice(key: str) -> tuple[str, str] | None:
    """The (backend, precision) kept for ``key``, or None."""
    entry = _read_choices().get(key)
    if (isinstance(entry, dict) and entry.get("backend") in ("torch", *FORMATS)
            and entry.get("precision") in ("fp32", "bf16")):
        return str(entry["backend"]), str(entry["precision"])
    return None


def _keep_choice(key: str, best: Candidate, candidates: Sequence[Candidate], why: str = "") -> tuple[str, str]:
    """Keep ``best`` as the way for ``key`` (the first kept stays: another process that chose meanwhile wins); returns
    the kept (backend, precision)."""
    data = _read_choices()
    entry = data.get(key)
    if (isinstance(entry, dict) and entry.get("backend") in ("torch", *FORMATS)
            and entry.get("precision") in ("fp32", "bf16")):
        return str(entry["backend"]), str(entry["precision"])
    data[key] = {"backend": best.backend, "precision": best.precision, "why": why,
                 "chosen": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "candidates": [asdict(c) for c in candidates]}
    with contextlib.suppress(OSError):  # a home that cannot be written: chosen again by the next pass
        write_json_atomic(_choices_file(), data, indent=1)
        _say(f"{best.backend} {best.precision} ({why}) kept as the way to run this model "
             f"on this machine ({_choices_file()}; delete it to choose again)")
    return best.backend, best.precision


def _kept_runner(kept: tuple[str, str], teacher: str, probe: Sequence[str], scratch: Path,
                 export_dir: str | Path | None, reference_runner: _Runner, reference: np.ndarray,
                 candidates: list[Candidate]) -> tuple[_Runner, list[Candidate]]:
    """The kept way, checked against torch fp32 on ``probe`` (torch fp32 where it does not agree)."""
    backend, precision = kept
    where = f"the way kept for this model on this machine ({_choices_file()})"
    if kept == ("torch", "fp32"):
        _say(f"torch fp32, {where}")
        return reference_runner, candidates
    try:
        if backend == "torch":
            runner = _Runner("torch", precision, reference_runner.model, reference_runner.device)
            seconds, vectors = _timed(runner, probe)
            agreement = _agreement(vectors, reference)
        else:
            runner, seconds, agreement = _export_runner(teacher, backend, scratch, export_dir, probe, reference,
                                                        reference_runner.model)
    except CselabError as exc:
        _say(f"{backend} {precision}, {where}, cannot run ({exc}); torch fp32 runs instead")
        return reference_runner, candidates
    candidates.append(Candidate(backend, precision, seconds, agreement))
    if agreement >= AGREEMENT:
        _say(f"{backend} {precision}, {where}")
        return runner, candidates
    _say(f"{backend} {precision}, {where}, does not agree with torch fp32 on this text (mean cosine "
         f"{agreement:.4f} < {AGREEMENT}); torch fp32 runs instead")
    return reference_runner, candidates


def _export_runner(teacher: str, fmt: str, scratch: Path, export_dir: str | Path | None, probe: Sequence[str],
                   reference: np.ndarray, model: Any = None) -> tuple[_Runner, float, float]:
    """The teacher's ``fmt`` export loaded, with its time and agreement on ``probe`` (made from ``model``, the teacher
    loaded for torch, where it is on the CPU: not loaded twice). A kept export whose files
    changed since it was made, that no longer loads or runs, or whose vectors no longer agree with torch fp32's is
    said to be damaged, removed and made again, once."""
    from cselab.export import load_exported

    path = None
    for _ in range(2):
        path, reused = _teacher_export(teacher, fmt, scratch, export_dir, model)
        problem = _export_changed(path) if reused else None
        if problem is None:
            try:
                runner = _Runner(fmt, "fp32", load_exported(path, fmt), path=path)
                seconds, vectors = _timed(runner, probe)
            except Exception as exc:  # a damaged file fails in the runtime's own way
                if not reused:
                    raise
                problem = f"it does not load or run: {type(exc).__name__}"
            else:
                agreement = _agreement(vectors, reference)
                if agreement >= AGREEMENT or not reused:
                    return runner, seconds, agreement
                problem = f"its vectors no longer agree with torch fp32, mean cosine {agreement:.4f}"
        _say(f"the {fmt} export kept in {path} is damaged ({problem}); making it again")
        _remove_export(path)
    raise CselabError(f"the {fmt} export kept in {path} is damaged and could not be made again; delete {path}")


def _export_digest(path: Path) -> str:
    """A sha256 of an export directory's files (names, sizes and contents; hashed again only when one changed)."""
    root = Path(path).resolve()
    files = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        stat = file.stat()
        files.append((file.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns))
    return _hash_of_files(str(root), tuple(files))


def _digest_file(kept: Path) -> Path:
    """Beside a kept export ``<fingerprint>/<fmt>``: ``<fingerprint>/<fmt>.sha256``, its files' sha256 when made."""
    return kept.with_name(f"{kept.name}.sha256")


def _export_changed(kept: Path) -> str | None:
    """What changed in a kept export since it was made (None: nothing, or made before the sha256 was kept)."""
    try:
        recorded = _digest_file(kept).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return None if recorded == _export_digest(kept) else "its files changed since it was made"


def _remove_export(kept: Path) -> None:
    shutil.rmtree(kept, ignore_errors=True)
    _digest_file(kept).unlink(missing_ok=True)


def teacher_export(teacher: str, fmt: str, scratch: Path, export_dir: str | Path | None = None) -> Path:
    """The teacher's fp32 ``fmt`` export: the one kept from an earlier pass in ``$CSELAB_HOME/teacher-exports/<its
    fingerprint>/<fmt>`` (``export_dir/<its fingerprint>/<fmt>`` when given: a teacher made for one run keeps its
    exports in that run, not in the data home), else made there now, or in ``scratch`` where that cannot be
    written."""
    return _teacher_export(teacher, fmt, scratch, export_dir)[0]


def _teacher_export(teacher: str, fmt: str, scratch: Path, export_dir: str | Path | None = None,
                    model: Any = None) -> tuple[Path, bool]:
    """:func:`teacher_export`, and whether the export was kept from before (else made now, from ``model`` where it is
    the teacher loaded on the CPU)."""
    from cselab.export import export_model
    from cselab.export.output import is_earlier_export

    source = resolve_model_path(teacher)
    root = Path(export_dir) if export_dir is not None else cselab_home() / EXPORT_CACHE_DIR
    kept = root / model_fingerprint(source) / fmt
    if is_earlier_export(kept):
        _say(f"the {fmt} export of {teacher} kept in {kept}")
        return kept, True
    if kept.is_dir() and not kept.is_symlink():  # files missing from it or added to it: made again
        _say(f"the {fmt} export kept in {kept} is damaged (its files are not the ones its manifest lists); "
             "making it again")
        _remove_export(kept)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(kept.parent, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if writable:
        _say(f"exporting {teacher} to {fmt} (once; kept in {kept.parent})")
    else:
        _say(f"exporting {teacher} to {fmt} for this run ({kept.parent} cannot be written)")
        kept = scratch / fmt
    with reporting(QUIET):  # the line above says it; the export's own steps are not the pass's
        on_cpu = model is not None and next(model.parameters()).device.type == "cpu"
        made = export_model(source, fmt, output=kept, model=model if on_cpu else None)
    if writable:
        with contextlib.suppress(OSError):
            write_atomic(_digest_file(Path(made)), _export_digest(Path(made)) + "\n")
    return Path(made), False


def _resumed_runner(store: VectorStore, teacher: str, model: Any, sentences: Sequence[str], scratch: Path,
                    export_dir: str | Path | None = None) -> _Runner:
    """The way a store's pass was started with (a resumed pass keeps it, so every row is computed alike), checked
    again against torch fp32 on the probe: :class:`NoLongerAgrees` when it does not agree (an export replaced by
    another teacher's that cannot be made again, say)."""
    info = store.state.get("info", {})
    backend, precision = str(info.get("backend", "torch")), str(info.get("precision", "fp32"))
    device = next(model.parameters()).device
    reference_runner = _Runner("torch", "fp32", model, device)
    if (backend, precision) == ("torch", "fp32"):
        return reference_runner
    probe = _probe(sentences)
    reference = reference_runner.encode(probe)
    if backend == "torch":
        runner = _Runner("torch", precision, model, device)
        agreement = _agreement(runner.encode(probe), reference)
    else:
        runner, _, agreement = _export_runner(teacher, backend, scratch, export_dir, probe, reference, model)
    if agreement < AGREEMENT:
        raise NoLongerAgrees(f"{store.path}: its pass was started on {backend} {precision}, which no longer agrees "
                             f"with torch fp32 here (mean cosine {agreement:.4f} < {AGREEMENT}); delete {store.path} "
                             "to run the pass again")
    return runner


class NoLongerAgrees(CselabError):
    """A resumed pass's way of running the teacher no longer agrees with torch fp32."""


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
    (it holds other vectors), and so is a damaged one (:class:`~cselab.data.stores.vector_store.DamagedStore`,
    naming the file); a damaged store in the cache is computed again. ``store_dir`` ``None``: the pass is kept in the
    cache only. ``model``: the teacher already loaded by :func:`load_teacher` (a caller passing several texts loads it
    once). ``export_dir``: where the teacher's exports are kept (:func:`teacher_export`; default: the data home's).
    What it does is said, and its bar shown, through the reporter in effect (:mod:`cselab.reporter`)."""
    model = model if model is not None else load_teacher(teacher, device)
    request = list(sentences)
    sentences = store_texts(request)
    max_length = _truncation_length(model)
    key = teacher_key(resolve_model_path(teacher), sentences, max_length)
    shared = cselab_home() / CACHE_DIR / key
    in_cache = store_dir is None
    store_dir = Path(store_dir) if store_dir is not None else shared
    store = _open_cached(shared, key, "computing them again") if in_cache else _open_own(store_dir, key)
    if store is None and cache and not in_cache:
        cached = _open_cached(shared, key, "computing them again")
        if cached is not None and cached.complete:
            report().say(f"teacher pass: reusing the vectors of {len(sentences)} sentences from {shared}")
            store = cached.copy_to(store_dir)
    if store is not None and store.texts() is None:
        write_texts(store.path, sentences, store.rows)  # the key says these are the store's texts
    if store is None or not store.complete:
        with tempfile.TemporaryDirectory(prefix="cselab-teacher-") as scratch_name:
            scratch = Path(scratch_name)
            runner = None
            if store is not None:
                try:
                    runner = _resumed_runner(store, teacher, model, sentences, scratch, export_dir)
                except NoLongerAgrees as exc:
                    if not in_cache:
                        raise
                    report().say(f"teacher pass: {exc}; computing the cached pass again")
                    shutil.rmtree(shared, ignore_errors=True)
                    store = None
                else:
                    report().say(f"teacher pass: resuming at {store.filled} of {store.rows} sentences "
                                 f"({runner.backend} {runner.precision})")
            if store is None or runner is None:
                probe = _probe(sentences)
                backends = backends if backends is not None else pass_backends(len(sentences))
                runner, candidates = choose_runner(teacher, model, probe, scratch, backends=backends,
                                                   requested_precision=requested_precision, export_dir=export_dir)
                measured = ", ".join(f"{c.backend} {c.precision} {len(probe) / c.seconds:.1f} sentences/s "
                                     f"(agreement {c.agreement:.4f})" for c in candidates)
                report().say(f"teacher pass: {measured}; running {runner.backend} {runner.precision}")
                order = _length_order(runner, sentences)
                info = {"teacher": str(teacher), "max_length": max_length, "backend": runner.backend,
                        "precision": runner.precision, "candidates": [asdict(c) for c in candidates]}
                store = VectorStore.create(store_dir, key, len(sentences),
                                           int(runner.encode(sentences[:1]).shape[1]), order=order, info=info,
                                           texts=sentences)
            _fill(store, runner, sentences)
    vectors = _in_order(store, request)  # checked against what was written
    if cache and not in_cache:
        _publish(store, shared, key)  # also a pass finished by a process killed before it published it
    return vectors


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
    tokenizer = runner.loaded().tokenizer
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


def _publish(store: VectorStore, shared: Path, key: str) -> None:
    """Link a finished store into the cache (skipped when a sound one is there already or it cannot be written;
    a damaged one there is replaced)."""
    if shared.exists() and _open_cached(shared, key, "putting this pass there instead") is not None:
        return
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the next run a pass, nothing else
        shutil.rmtree(shared, ignore_errors=True)
        store.copy_to(shared)


def _open_cached(shared: Path, key: str, then: str) -> VectorStore | None:
    """The store in the cache at ``shared`` (None: there is none), checked: a damaged one, or one of another key, is
    said (``then``: what happens instead) and removed, and None returned."""
    try:
        store = VectorStore.open(shared)
        if store is None:
            return None
        if store.key != key:
            raise DamagedStore(f"{shared / 'state.json'} names another pass than its directory", shared)
        store.verify()
        return store
    except DamagedStore as exc:
        report().say(f"teacher pass: the vectors cached in {shared} are damaged ({exc.problem}); {then}")
        shutil.rmtree(shared, ignore_errors=True)
        return None


def pass_is_kept(teacher: str, sentences: Sequence[str], store_dir: str | Path, model: Any = None) -> bool:
    """Whether the teacher's pass over ``sentences`` is already finished in ``store_dir`` or in the cache (nothing to
    run), checked against what was written: a damaged store in ``store_dir`` is refused
    (:class:`~cselab.data.stores.vector_store.DamagedStore`), a damaged one in the cache is not kept. ``model``: the
    teacher already loaded (:func:`load_teacher`), else loaded here to read its length."""
    key = _pass_key(teacher, sentences, model)
    store = VectorStore.open(store_dir)
    if store is not None and store.key == key and store.complete:
        store.verify()
        return True
    shared = cselab_home() / CACHE_DIR / key
    try:
        cached = VectorStore.open(shared)
        if cached is not None and cached.key == key and cached.complete:
            cached.verify()
            return True
    except DamagedStore:
        return False  # computed again by the pass (which says so)
    return False


def pass_backend(store_dir: str | Path) -> dict[str, str]:
    """Which way of running the teacher computed the pass in ``store_dir``: ``{"backend": "torch" | "onnx" |
    "openvino", "precision": "fp32" | "bf16"}`` (a pass assembled from parts run differently names each, joined by
    ``+``; ``"unknown"`` for a pass an older cselab made). :class:`CselabError` when ``store_dir`` holds no pass."""
    store = VectorStore.open(store_dir)
    if store is None:
        raise CselabError(f"{store_dir} holds no teacher pass")
    info = store.state.get("info")
    info = info if isinstance(info, dict) else {}
    return {name: str(info.get(name) or "unknown") for name in ("backend", "precision")}


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
        ways: dict[str, list[str]] = {"backend": [], "precision": []}
        for part, part_dir in zip(texts_of, part_dirs, strict=True):
            for text, vector in zip(part, teacher_vectors(teacher, part, part_dir, **options), strict=True):
                row.setdefault(text, vector)  # a text in several parts keeps its first part's vector
            for name, value in pass_backend(part_dir).items():
                ways[name].append(value)
        if store is None:  # which way computed it: each part's, joined where they differ (pass_backend)
            info = {"teacher": str(teacher), "parts": list(parts),
                    **{name: "+".join(dict.fromkeys(values)) for name, values in ways.items()}}
            store = VectorStore.create(store_dir, key, len(texts), len(next(iter(row.values()))), texts=texts,
                                       info=info)
        store.fill(lambda indices: np.stack([row[texts[i]] for i in indices]), chunk=max(1, len(texts)))
        for part_dir in part_dirs:
            shutil.rmtree(part_dir, ignore_errors=True)
    return _in_order(store, request)
