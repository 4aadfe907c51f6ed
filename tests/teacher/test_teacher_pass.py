"""The teacher's pass over a text on disk: the store's fill/resume rule, and the pass against the teacher itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cselab.reporter import Reporter, reporting
from tests.helpers import WORDS, build_tiny_model_dir


def _rows(indices: list[int], dim: int = 3) -> np.ndarray:
    """A known vector per row: row i is (i, 2i, 3i)."""
    return np.array([[i * (k + 1) for k in range(dim)] for i in indices], dtype=np.float32)


def test_store_fills_in_its_order_and_resumes_after_a_kill(tmp_path) -> None:
    from cselab.data.stores.vector_store import VectorStore

    order = [4, 0, 3, 1, 2, 6, 5]
    store = VectorStore.create(tmp_path / "s", "key-a", 7, 3, order=order)
    calls: list[list[int]] = []

    def dying(indices: list[int]) -> np.ndarray:
        calls.append(indices)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the kill, while the second chunk is computed
        return _rows(indices)

    with pytest.raises(KeyboardInterrupt):
        store.fill(dying, chunk=3)
    assert calls == [[4, 0, 3], [1, 2, 6]]
    reopened = VectorStore.open(tmp_path / "s")
    assert reopened is not None and reopened.filled == 3 and not reopened.complete
    resumed: list[list[int]] = []
    reopened.fill(lambda idx: resumed.append(idx) or _rows(idx), chunk=3)
    assert resumed == [[1, 2, 6], [5]]  # the lost chunk again, then the rest; never a counted row twice
    assert reopened.complete
    np.testing.assert_array_equal(reopened.vectors(), _rows(list(range(7))))
    assert json.loads((tmp_path / "s" / "state.json").read_text())["filled"] == 7


def test_store_refuses_a_wrong_shape_and_a_damaged_state(tmp_path) -> None:
    from cselab.data.stores.vector_store import VectorStore
    from cselab.errors import CselabError

    store = VectorStore.create(tmp_path / "s", "k", 4, 3)
    with pytest.raises(ValueError, match="expected"):
        store.fill(lambda idx: np.zeros((len(idx), 2)), chunk=2)
    assert VectorStore.open(tmp_path / "s").filled == 0
    with pytest.raises(CselabError, match="already holds"):
        VectorStore.create(tmp_path / "s", "k", 4, 3)
    (tmp_path / "s" / "state.json").write_text('{"key": "k", "rows": 4, "dim": 3, "filled": 9}')
    with pytest.raises(CselabError, match="damaged"):
        VectorStore.open(tmp_path / "s")
    assert VectorStore.open(tmp_path / "nothing") is None


def test_copy_links_a_complete_store(tmp_path) -> None:
    from cselab.data.stores.vector_store import VectorStore

    store = VectorStore.create(tmp_path / "a", "k", 5, 3)
    store.fill(_rows, chunk=2)
    copy = store.copy_to(tmp_path / "cache" / "k")
    np.testing.assert_array_equal(copy.vectors(), _rows(list(range(5))))
    assert copy.key == "k" and copy.complete
    assert not list((tmp_path / "cache").glob(".*"))  # no staging directory left
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(FileExistsError):
        store.copy_to(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "cache", "mine"]  # nothing staged is left


def test_content_key_separates_its_parts() -> None:
    from cselab.data.stores.vector_store import content_key

    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key(["a", "b"]) != content_key(["ab"])
    assert content_key("x", ["a"]) == content_key("x", ["a"])


@pytest.fixture
def teacher_and_text(tmp_path):
    import random

    teacher = build_tiny_model_dir(tmp_path / "teacher", "bert", seed=5, hidden_size=48)
    rng = random.Random(1)
    words = [w for w in WORDS if w.isalpha()]
    sentences = list(dict.fromkeys(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14)))
                                   for _ in range(150)))
    return teacher, sentences


def _teacher_reference(teacher, sentences) -> np.ndarray:
    """The teacher's own torch fp32 vectors, one sentence at a time, normalised here."""
    import torch

    from cselab.models.sentence_model import load_model

    model = load_model(str(teacher)).eval()
    with torch.no_grad():
        rows = [model.encode([s]).numpy()[0] for s in sentences]
    array = np.stack(rows)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def _killed_at_chunk(monkeypatch, kill_at: int):
    """Make VectorStore.fill die (a kill) while it computes its ``kill_at``-th chunk; returns the real fill, to put
    back for the resume."""
    from cselab.data.stores.vector_store import VectorStore

    fills = {"n": 0}
    original_fill = VectorStore.fill

    def fill_then_die(self, compute, chunk, after_chunk=None):
        def counting(indices):
            fills["n"] += 1
            if fills["n"] == kill_at:
                raise KeyboardInterrupt
            return compute(indices)
        return original_fill(self, counting, chunk, after_chunk)

    monkeypatch.setattr(VectorStore, "fill", fill_then_die)
    return original_fill


def test_teacher_pass_gives_the_teachers_unit_vectors_and_resumes(teacher_and_text, tmp_path, monkeypatch) -> None:
    from cselab.data.stores.vector_store import VectorStore
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    monkeypatch.setattr(teacher_pass, "CHUNK", 40)
    original_fill = _killed_at_chunk(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run" / "teacher", backends=["torch"],
                                     requested_precision="fp32")
    assert VectorStore.open(tmp_path / "run" / "teacher").filled == 80
    monkeypatch.setattr(VectorStore, "fill", original_fill)
    vectors = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run" / "teacher",
                                           backends=["torch"], requested_precision="fp32")
    np.testing.assert_allclose(vectors, _teacher_reference(teacher, sentences), atol=1e-5)
    state = json.loads((tmp_path / "run" / "teacher" / "state.json").read_text())
    assert state["info"]["backend"] == "torch" and state["info"]["candidates"][0]["agreement"] == 1.0


def test_a_finished_pass_is_reused_from_the_cache_and_a_changed_text_is_refused(teacher_and_text, tmp_path,
                                                                               monkeypatch) -> None:
    from cselab.errors import CselabError
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        first = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "a", backends=["torch"],
                                             requested_precision="fp32")
        monkeypatch.setattr(teacher_pass, "choose_runner", lambda *a, **k: pytest.fail("the teacher ran again"))
        second = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "b", backends=["torch"],
                                              requested_precision="fp32")
    np.testing.assert_array_equal(first, second)
    # the same texts in another order (and one twice) are the same pass: read back in the order asked
    order = [*sentences[::-1], sentences[0]]
    third = teacher_pass.teacher_vectors(str(teacher), order, tmp_path / "c", backends=["torch"],
                                         requested_precision="fp32")
    np.testing.assert_array_equal(third, np.concatenate([first[::-1], first[:1]]))
    assert any("reusing" in m for m in messages)
    with pytest.raises(CselabError, match="another text"):
        teacher_pass.teacher_vectors(str(teacher), sentences[:-1], tmp_path / "b", backends=["torch"],
                                     requested_precision="fp32")


def test_a_pass_of_parts_reuses_each_part_and_reads_as_one_store(teacher_and_text, tmp_path, monkeypatch) -> None:
    from cselab.data.stores.vector_store import VectorStore
    from cselab.models import sentence_model
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    lines = sentences[:100]
    passages = [" ".join(sentences[i:i + 3]) for i in range(100, 148, 3)] + [lines[0]]  # one passage is a line
    options = {"backends": ["torch"], "requested_precision": "fp32"}
    teacher_pass.teacher_vectors(str(teacher), lines, tmp_path / "earlier", **options)  # an earlier run on the lines
    runs, loads = [], []
    choose, load = teacher_pass.choose_runner, sentence_model.load_model
    monkeypatch.setattr(teacher_pass, "choose_runner", lambda *a, **k: runs.append(1) or choose(*a, **k))
    monkeypatch.setattr(sentence_model, "load_model", lambda *a, **k: loads.append(1) or load(*a, **k))
    run = tmp_path / "run"
    parts = {"lines": lines, "passages": passages}
    vectors = teacher_pass.teacher_vectors_of_parts(str(teacher), parts, run / "teacher", **options)
    assert len(runs) == 1  # the lines' pass came from the cache; only the passages ran
    assert len(loads) == 1  # the teacher loaded once: for the key and for both parts' passes
    np.testing.assert_allclose(vectors, _teacher_reference(teacher, [*lines, *passages]), atol=1e-5)
    store = VectorStore.open(run / "teacher")
    assert store.complete and store.rows == len(set(lines) | set(passages))
    assert sorted(p.name for p in run.iterdir()) == ["teacher"]  # the parts' passes (teacher-lines, ...) removed
    np.testing.assert_array_equal(teacher_pass.read_teacher_vectors(run / "teacher", passages[::-1]),
                                  vectors[len(lines):][::-1])
    monkeypatch.setattr(teacher_pass, "choose_runner", lambda *a, **k: pytest.fail("the teacher ran again"))
    again = teacher_pass.teacher_vectors_of_parts(str(teacher), parts, run / "teacher", **options)
    np.testing.assert_array_equal(again, vectors)
    # kept in the cache only: the rows of the parts' cached passes, no store assembled (a text in two parts keeps
    # each pass's vector, which batching moves in the last bits; the assembled store holds one of them)
    np.testing.assert_allclose(teacher_pass.teacher_vectors_of_parts(str(teacher), parts, None, **options),
                               vectors, atol=1e-6)
    # one part is one pass, in the store itself
    np.testing.assert_array_equal(teacher_pass.teacher_vectors_of_parts(str(teacher), {"lines": lines},
                                                                        tmp_path / "one", **options),
                                  vectors[:len(lines)])
    assert VectorStore.open(tmp_path / "one").rows == len(lines)


def test_an_export_of_the_teacher_is_made_once_and_timed_again_by_later_passes(teacher_and_text, tmp_path,
                                                                                monkeypatch) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    import cselab.export
    from cselab.data.stores.vector_store import VectorStore
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    exports: list[str] = []
    export = cselab.export.export_model
    monkeypatch.setattr(cselab.export, "export_model", lambda *a, **k: exports.append(a[1]) or export(*a, **k))
    monkeypatch.setattr(teacher_pass, "CHUNK", 40)
    options = {"backends": ["onnx"], "requested_precision": "fp32"}
    half = len(sentences) // 2
    first = teacher_pass.teacher_vectors(str(teacher), sentences[:half], tmp_path / "first", **options)
    original_fill = _killed_at_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):  # another text: a new pass, killed after its first chunk
        teacher_pass.teacher_vectors(str(teacher), sentences[half:], tmp_path / "second", **options)
    monkeypatch.setattr(VectorStore, "fill", original_fill)
    second = teacher_pass.teacher_vectors(str(teacher), sentences[half:], tmp_path / "second", **options)
    assert exports == ["onnx"]  # the second text's pass and its resume ran the kept export
    kept = cselab_home() / "teacher-exports" / teacher_pass.model_fingerprint(teacher) / "onnx"
    assert (kept / "cselab_export.json").is_file()
    for store in ("first", "second"):
        assert json.loads((tmp_path / store / "state.json").read_text())["info"]["backend"] == "onnx"
    reference = _teacher_reference(teacher, sentences)
    np.testing.assert_allclose(np.concatenate([first, second]), reference, atol=1e-4)


def test_a_teacher_made_for_one_run_keeps_its_export_in_that_run(teacher_and_text, tmp_path) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    run_exports = tmp_path / "run" / "teacher-exports"
    vectors = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "store", backends=["onnx"],
                                           requested_precision="fp32", export_dir=run_exports, cache=False)
    kept = run_exports / teacher_pass.model_fingerprint(teacher) / "onnx"
    assert (kept / "cselab_export.json").is_file()
    assert not any((cselab_home() / "teacher-exports").rglob("cselab_export.json"))
    assert json.loads((tmp_path / "store" / "state.json").read_text())["info"]["backend"] == "onnx"
    np.testing.assert_allclose(vectors, _teacher_reference(teacher, sentences), atol=1e-4)


def test_an_export_goes_to_the_scratch_directory_where_the_data_home_cannot_be_written(teacher_and_text, tmp_path,
                                                                                       monkeypatch) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, _ = teacher_and_text
    home, access = str(cselab_home()), teacher_pass.os.access  # root writes anywhere: say the home refuses
    monkeypatch.setattr(teacher_pass.os, "access", lambda path, mode: not str(path).startswith(home)
                        and access(path, mode))
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        path = teacher_pass.teacher_export(str(teacher), "onnx", tmp_path / "scratch")
    assert path == tmp_path / "scratch" / "onnx" and (path / "cselab_export.json").is_file()
    assert not any((cselab_home() / "teacher-exports").rglob("cselab_export.json"))
    assert any("cannot be written" in m for m in messages)


def test_the_teachers_fingerprint_reads_its_files_again_only_when_one_changed(teacher_and_text, monkeypatch) -> None:
    import builtins

    from cselab.teacher import vectors as teacher_pass

    teacher, _ = teacher_and_text
    opened: list[str] = []

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return builtins.open(path, *args, **kwargs)  # noqa: SIM115 (the caller's with closes it)

    monkeypatch.setattr(teacher_pass, "open", counting_open, raising=False)
    first = teacher_pass.model_fingerprint(teacher)
    reads = len(opened)
    assert reads > 0 and teacher_pass.model_fingerprint(teacher) == first and len(opened) == reads
    (teacher / "README.md").write_text("a card changes nothing torch computes\n")
    assert teacher_pass.model_fingerprint(teacher) == first and len(opened) == reads
    config = teacher / "config.json"
    config.write_text(config.read_text() + " ")  # still the same JSON, another file
    assert teacher_pass.model_fingerprint(teacher) != first and len(opened) > reads  # a changed file: hashed again


# -- issue 87: every store read back is checked; the way a teacher runs is chosen once per machine -------------
def _files(root) -> dict[str, str]:
    """Every file under ``root`` -> its sha256 (computed here, not by cselab)."""
    import hashlib

    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _flip_a_row(vectors_file) -> None:
    """Change one float of the last row of a ``.npy`` in place (its size stays)."""
    data = bytearray(vectors_file.read_bytes())
    data[-3] ^= 0x40
    vectors_file.write_bytes(bytes(data))


def test_store_checksums_catch_a_changed_row_a_cut_file_and_changed_texts(tmp_path) -> None:
    from cselab.data.stores.vector_store import DamagedStore, VectorStore

    store = VectorStore.create(tmp_path / "s", "k", 7, 3, order=[4, 0, 3, 1, 2, 6, 5], texts=list("abcdefg"))
    store.fill(_rows, chunk=3)
    state = json.loads((tmp_path / "s" / "state.json").read_text())
    # one sha256 per chunk, of its rows in the order they were filled, computed here independently
    import hashlib

    expected = [[end, hashlib.sha256(_rows(idx).tobytes()).hexdigest()]
                for end, idx in ((3, [4, 0, 3]), (6, [1, 2, 6]), (7, [5]))]
    assert state["checksums"] == expected
    assert state["texts_sha256"] == hashlib.sha256(b"a\nb\nc\nd\ne\nf\ng\n").hexdigest()
    np.testing.assert_array_equal(VectorStore.open(tmp_path / "s").vectors(), _rows(list(range(7))))

    _flip_a_row(tmp_path / "s" / "vectors.npy")  # row 6: filled in the second chunk, positions 3-5
    with pytest.raises(DamagedStore) as err:
        VectorStore.open(tmp_path / "s").vectors()
    assert str(err.value) == (f"{tmp_path / 's' / 'vectors.npy'} is not what was written: the rows filled at "
                              f"positions 3-5 of its order have another sha256 than state.json recorded; delete "
                              f"{tmp_path / 's'} to compute the vectors again")
    full = (tmp_path / "s" / "vectors.npy").read_bytes()
    (tmp_path / "s" / "vectors.npy").write_bytes(full[:-12])  # cut: numpy would fail on mapping it
    with pytest.raises(DamagedStore, match=r"vectors.npy has \d+ bytes, not the \d+ its shape \(7, 3\) takes"):
        VectorStore.open(tmp_path / "s")
    (tmp_path / "s" / "vectors.npy").write_bytes(full)
    (tmp_path / "s" / "texts.txt").write_text("a\nb\nc\nd\ne\ng\nf\n")  # two texts swapped: rows mean other texts
    with pytest.raises(DamagedStore, match="texts.txt is not the file the store was written with"):
        VectorStore.open(tmp_path / "s").texts()


def test_a_resumed_store_checks_what_it_continues(tmp_path) -> None:
    from cselab.data.stores.vector_store import DamagedStore, VectorStore

    store = VectorStore.create(tmp_path / "s", "k", 6, 3)

    def dying(indices):
        if indices[0] >= 4:
            raise KeyboardInterrupt
        return _rows(indices)

    with pytest.raises(KeyboardInterrupt):
        store.fill(dying, chunk=2)
    data = bytearray((tmp_path / "s" / "vectors.npy").read_bytes())
    data[-3 * 4 * 5 + 1] ^= 0x01  # a byte of row 1 (filled, counted), changed before the resume
    (tmp_path / "s" / "vectors.npy").write_bytes(bytes(data))
    with pytest.raises(DamagedStore, match="positions 0-1 of its order"):
        VectorStore.open(tmp_path / "s").fill(_rows, chunk=2)
    assert VectorStore.open(tmp_path / "s").filled == 4  # nothing was filled onto damaged rows


def test_a_damaged_run_store_is_refused_in_one_line_and_left_as_it_is(teacher_and_text, tmp_path) -> None:
    from cselab.errors import CselabError
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    options = {"backends": ["torch"], "requested_precision": "fp32", "cache": False}
    run = tmp_path / "run" / "teacher"
    teacher_pass.teacher_vectors(str(teacher), sentences, run, **options)
    _flip_a_row(run / "vectors.npy")
    before = _files(tmp_path / "run")
    for call in (lambda: teacher_pass.teacher_vectors(str(teacher), sentences, run, **options),
                 lambda: teacher_pass.read_teacher_vectors(run, sentences[:3]),
                 lambda: teacher_pass.pass_is_kept(str(teacher), sentences, run)):
        with pytest.raises(CselabError) as err:
            call()
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"{run / 'vectors.npy'} is not what was written"), message
        assert message.endswith(f"delete {run} to compute the vectors again")
        assert _files(tmp_path / "run") == before
    (run / "vectors.npy").write_bytes((run / "vectors.npy").read_bytes()[:-100])  # cut short (a full disk, a copy)
    before = _files(tmp_path / "run")
    with pytest.raises(CselabError, match=r"vectors.npy has \d+ bytes, not the \d+ its shape \(150, 48\) takes"):
        teacher_pass.teacher_vectors(str(teacher), sentences, run, **options)
    assert _files(tmp_path / "run") == before


@pytest.mark.parametrize("damage", ["changed", "cut"])
def test_a_damaged_cache_store_is_computed_again_with_a_line(teacher_and_text, tmp_path, damage) -> None:
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    options = {"backends": ["torch"], "requested_precision": "fp32"}
    first = teacher_pass.teacher_vectors(str(teacher), sentences, None, **options)  # in the cache only
    (cached,) = (cselab_home() / "teacher-vectors").iterdir()
    if damage == "changed":
        _flip_a_row(cached / "vectors.npy")
    else:
        (cached / "vectors.npy").write_bytes((cached / "vectors.npy").read_bytes()[:-40])
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        again = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    np.testing.assert_array_equal(again, first)
    said = [m for m in messages if "are damaged (" in m]
    assert len(said) == 1 and said[0].startswith(f"teacher pass: the vectors cached in {cached} are damaged (")
    assert said[0].endswith("); computing them again")
    np.testing.assert_array_equal(teacher_pass.teacher_vectors(str(teacher), sentences, None, **options), first)


def test_a_finished_pass_is_published_after_a_kill_before_publishing(teacher_and_text, tmp_path, monkeypatch) -> None:
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    options = {"backends": ["torch"], "requested_precision": "fp32"}
    publish = teacher_pass._publish

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the kill, after the store was finished and before it was linked into the cache

    monkeypatch.setattr(teacher_pass, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    assert not (cselab_home() / "teacher-vectors").exists()
    monkeypatch.setattr(teacher_pass, "_publish", publish)
    first = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)  # read, published
    monkeypatch.setattr(teacher_pass, "choose_runner", lambda *a, **k: pytest.fail("the teacher ran again"))
    np.testing.assert_array_equal(teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "other", **options),
                                  first)


def _fake_timing(monkeypatch, seconds: dict) -> None:
    """The probe's timings as ``seconds[(backend, precision)]`` (the vectors are the runner's own)."""
    from cselab.teacher import vectors as teacher_pass

    monkeypatch.setattr(teacher_pass, "_timed",
                        lambda runner, probe: (seconds[(runner.backend, runner.precision)], runner.encode(probe)))


def test_the_way_a_teacher_runs_is_chosen_once_per_machine_so_two_runs_are_identical(teacher_and_text, tmp_path,
                                                                                      monkeypatch) -> None:
    import cselab.runtime.precision as precision_mod
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    monkeypatch.setattr(precision_mod, "inference_precision",  # a machine where bf16 is a candidate
                        lambda *a, **k: precision_mod.PrecisionChoice("auto", "bf16", "test"))
    options = {"backends": ["torch"], "requested_precision": "auto", "cache": False}
    _fake_timing(monkeypatch, {("torch", "fp32"): 1.0, ("torch", "bf16"): 0.1})  # bf16 is faster now
    first = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "first", **options)
    assert teacher_pass.pass_backend(tmp_path / "first") == {"backend": "torch", "precision": "bf16"}
    kept = json.loads((cselab_home() / "teacher_backend.json").read_text())
    assert [(v["backend"], v["precision"]) for v in kept.values()] == [("torch", "bf16")]
    _fake_timing(monkeypatch, {("torch", "fp32"): 0.1, ("torch", "bf16"): 1.0})  # the machine got busy: fp32 is
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        second = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "second", **options)
    assert teacher_pass.pass_backend(tmp_path / "second") == {"backend": "torch", "precision": "bf16"}
    np.testing.assert_array_equal(second, first)  # bit-identical
    assert any("the way kept for this model on this machine" in m for m in messages)
    # the test can fail: without the kept choice this timing picks fp32, whose vectors are not bf16's
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "another-home"))
    third = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "third", **options)
    assert teacher_pass.pass_backend(tmp_path / "third") == {"backend": "torch", "precision": "fp32"}
    assert not np.array_equal(third, first)


def test_the_kept_way_is_chosen_between_torch_and_an_export_too(teacher_and_text, tmp_path, monkeypatch) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    options = {"backends": ["torch", "onnx"], "requested_precision": "fp32", "cache": False}
    _fake_timing(monkeypatch, {("torch", "fp32"): 1.0, ("onnx", "fp32"): 0.1})
    first = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "first", **options)
    _fake_timing(monkeypatch, {("torch", "fp32"): 0.1, ("onnx", "fp32"): 1.0})
    second = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "second", **options)
    assert teacher_pass.pass_backend(tmp_path / "first") == teacher_pass.pass_backend(tmp_path / "second") == {
        "backend": "onnx", "precision": "fp32"}
    np.testing.assert_array_equal(second, first)


def _another_teachers_export(tmp_path, fmt: str = "onnx"):
    """An export of another tiny teacher (same shapes, other weights)."""
    from cselab.teacher import vectors as teacher_pass

    other = build_tiny_model_dir(tmp_path / "other-teacher", "bert", seed=9, hidden_size=48)
    return teacher_pass.teacher_export(str(other), fmt, tmp_path / "other-scratch", export_dir=tmp_path / "other")


@pytest.mark.parametrize("digest", ["kept", "lost"])
def test_a_resumed_pass_checks_the_export_it_continues_with(teacher_and_text, tmp_path, monkeypatch, digest) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    import shutil

    from cselab.data.stores.vector_store import VectorStore
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    monkeypatch.setattr(teacher_pass, "CHUNK", 40)
    options = {"backends": ["onnx"], "requested_precision": "fp32", "cache": False}
    original_fill = _killed_at_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    monkeypatch.setattr(VectorStore, "fill", original_fill)
    kept = cselab_home() / "teacher-exports" / teacher_pass.model_fingerprint(teacher) / "onnx"
    shutil.rmtree(kept)
    shutil.copytree(_another_teachers_export(tmp_path), kept)  # the kept export is now another teacher's
    if digest == "lost":  # made by a cselab that kept no sha256: the agreement check finds it
        kept.with_name("onnx.sha256").unlink()
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        vectors = teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    why = "its files changed since it was made" if digest == "kept" else "its vectors no longer agree with torch fp32"
    assert [m for m in messages if "is damaged (" in m] == [
        m for m in messages if m.startswith(f"teacher pass: the onnx export kept in {kept} is damaged ({why}")]
    assert any("is damaged (" in m for m in messages)
    np.testing.assert_allclose(vectors, _teacher_reference(teacher, sentences), atol=1e-4)  # every row the teacher's


def test_a_resumed_pass_that_no_longer_agrees_is_refused(teacher_and_text, tmp_path, monkeypatch) -> None:
    from cselab.data.stores.vector_store import VectorStore
    from cselab.errors import CselabError
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    monkeypatch.setattr(teacher_pass, "CHUNK", 40)
    options = {"backends": ["torch"], "requested_precision": "bf16", "cache": False}
    original_fill = _killed_at_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    monkeypatch.setattr(VectorStore, "fill", original_fill)
    assert teacher_pass.pass_backend(tmp_path / "run") == {"backend": "torch", "precision": "bf16"}
    monkeypatch.setattr(teacher_pass, "_agreement", lambda vectors, reference: 0.5)  # bf16 no longer agrees here
    before = _files(tmp_path / "run")
    with pytest.raises(CselabError) as err:
        teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", **options)
    assert str(err.value) == (f"{tmp_path / 'run'}: its pass was started on torch bf16, which no longer agrees with "
                              f"torch fp32 here (mean cosine 0.5000 < 0.995); delete {tmp_path / 'run'} to run the "
                              "pass again")
    assert _files(tmp_path / "run") == before


def test_a_damaged_kept_export_is_made_again_once(teacher_and_text, tmp_path, monkeypatch) -> None:
    pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
    import cselab.export
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    exports: list[str] = []
    export = cselab.export.export_model
    monkeypatch.setattr(cselab.export, "export_model", lambda *a, **k: exports.append(a[1]) or export(*a, **k))
    options = {"backends": ["onnx"], "requested_precision": "fp32", "cache": False}
    third = len(sentences) // 3
    teacher_pass.teacher_vectors(str(teacher), sentences[:third], tmp_path / "a", **options)
    kept = cselab_home() / "teacher-exports" / teacher_pass.model_fingerprint(teacher) / "onnx"
    (kept / "onnx" / "model.onnx").write_bytes(b"not a graph")  # damaged: it would fail to load
    kept.with_name("onnx.sha256").unlink()  # and no sha256 to find it by: found when it does not load
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        second = teacher_pass.teacher_vectors(str(teacher), sentences[third:2 * third], tmp_path / "b", **options)
        third_pass = teacher_pass.teacher_vectors(str(teacher), sentences[2 * third:], tmp_path / "c", **options)
    assert exports == ["onnx", "onnx"]  # made again once, then kept
    said = [m for m in messages if "is damaged (" in m]
    assert len(said) == 1, said
    said = said[0]
    assert said.startswith(f"teacher pass: the onnx export kept in {kept} is damaged (it does not load or run: "), said
    assert said.endswith("); making it again")
    reference = _teacher_reference(teacher, sentences)
    np.testing.assert_allclose(np.concatenate([second, third_pass]), reference[third:], atol=1e-4)


def test_pass_backend_names_the_way_of_a_pass_and_of_parts(teacher_and_text, tmp_path) -> None:
    from cselab.errors import CselabError
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    options = {"backends": ["torch"], "requested_precision": "fp32"}
    teacher_pass.teacher_vectors_of_parts(str(teacher), {"lines": sentences[:80], "passages": sentences[80:]},
                                          tmp_path / "run" / "teacher", **options)
    assert teacher_pass.pass_backend(tmp_path / "run" / "teacher") == {"backend": "torch", "precision": "fp32"}
    with pytest.raises(CselabError, match="holds no teacher pass"):
        teacher_pass.pass_backend(tmp_path / "nothing")


def _disturbed_timing(monkeypatch, per_sentence: dict, disturbed: tuple, factor: float = 10.0) -> list:
    """Timings of ``per_sentence[(backend, precision)]`` seconds a sentence, except that the first timing of the way
    ``disturbed`` takes ``factor`` times as long (another process ran beside it); returns the ways in timing order."""
    from cselab.teacher import vectors as teacher_pass

    order: list = []

    def timed(runner, probe):
        way = (runner.backend, runner.precision)
        seconds = per_sentence[way] * len(probe) * (factor if way == disturbed and way not in order else 1.0)
        order.append(way)
        return seconds, runner.encode(probe)

    monkeypatch.setattr(teacher_pass, "_timed", timed)
    return order


def _bf16_is_a_candidate(monkeypatch):
    import cselab.runtime.precision as precision_mod

    monkeypatch.setattr(precision_mod, "inference_precision",
                        lambda *a, **k: precision_mod.PrecisionChoice("auto", "bf16", "test"))


@pytest.mark.parametrize("disturbed", [("torch", "fp32"), ("torch", "bf16")])
def test_two_homes_choose_the_same_way_when_one_timing_was_disturbed_once(teacher_and_text, tmp_path, monkeypatch,
                                                                         disturbed) -> None:
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    _bf16_is_a_candidate(monkeypatch)
    options = {"backends": ["torch"], "requested_precision": "auto", "cache": False}
    speeds = {("torch", "fp32"): 0.02, ("torch", "bf16"): 0.01}  # bf16 twice as fast on quiet cores
    chosen = []
    for home in ("quiet", "busy"):
        monkeypatch.setenv("CSELAB_HOME", str(tmp_path / home))
        order = _disturbed_timing(monkeypatch, speeds, disturbed if home == "busy" else ("none", "none"))
        messages: list[str] = []
        with reporting(Reporter(lines=messages.append)):
            teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / home / "run", **options)
        chosen.append(teacher_pass.pass_backend(tmp_path / home / "run"))
        assert order.count(("torch", "fp32")) == order.count(("torch", "bf16")) == teacher_pass.TIMING_ROUNDS
        assert any("bf16 (the fastest (best of 3 interleaved timings)) kept" in m for m in messages), messages
    assert chosen == [{"backend": "torch", "precision": "bf16"}] * 2


def test_one_timing_alone_would_be_flipped_by_a_busy_minute(teacher_and_text, tmp_path, monkeypatch) -> None:
    """What the rounds are for: with a single timing of each way, the disturbed bf16 timing loses to fp32."""
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    _bf16_is_a_candidate(monkeypatch)
    monkeypatch.setattr(teacher_pass, "TIMING_ROUNDS", 1)
    _disturbed_timing(monkeypatch, {("torch", "fp32"): 0.02, ("torch", "bf16"): 0.01}, ("torch", "bf16"))
    teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", backends=["torch"], cache=False)
    assert teacher_pass.pass_backend(tmp_path / "run") == {"backend": "torch", "precision": "fp32"}


def test_a_way_within_the_margin_of_the_fastest_leaves_the_one_listed_first(teacher_and_text, tmp_path,
                                                                            monkeypatch) -> None:
    from cselab.paths import cselab_home
    from cselab.teacher import vectors as teacher_pass

    teacher, sentences = teacher_and_text
    _bf16_is_a_candidate(monkeypatch)
    # bf16 10% faster: below the 1.15x margin, so torch fp32 (listed first) runs on every home of this machine
    _disturbed_timing(monkeypatch, {("torch", "fp32"): 0.011, ("torch", "bf16"): 0.010}, ("none", "none"))
    teacher_pass.teacher_vectors(str(teacher), sentences, tmp_path / "run", backends=["torch"], cache=False)
    assert teacher_pass.pass_backend(tmp_path / "run") == {"backend": "torch", "precision": "fp32"}
    kept = json.loads((cselab_home() / "teacher_backend.json").read_text())
    assert [v["why"] for v in kept.values()] == [
        "within 1.15x of the fastest, torch bf16, and listed before it (best of 3 interleaved timings)"]
