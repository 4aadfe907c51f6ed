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
    from cselab.data.vector_store import VectorStore

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
    from cselab.data.vector_store import VectorStore
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
    from cselab.data.vector_store import VectorStore

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
    from cselab.data.vector_store import content_key

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
    from cselab.data.vector_store import VectorStore

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
    from cselab import teacher_pass
    from cselab.data.vector_store import VectorStore

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
    from cselab import teacher_pass
    from cselab.errors import CselabError

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
    from cselab import teacher_pass
    from cselab.data.vector_store import VectorStore
    from cselab.models import sentence_model

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
    from cselab import teacher_pass
    from cselab.data.vector_store import VectorStore
    from cselab.paths import cselab_home

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
    from cselab import teacher_pass
    from cselab.paths import cselab_home

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
    from cselab import teacher_pass
    from cselab.paths import cselab_home

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

    from cselab import teacher_pass

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
