"""cselab export (ONNX Runtime / OpenVINO, fp32 and int8) and --backend onnx|openvino, on tiny random BERT/RoBERTa.

The reference vectors are sentence-transformers' own torch ``encode`` of the saved cselab model directory, not
cselab's code: an fp32 export must match them to 1e-4 (max abs difference), through cselab's runner and through
plain ``SentenceTransformer(dir, backend=...)``. sentence-transformers' backends need optimum, which cannot be
installed beside transformers 5; where this interpreter lacks it, those checks run in a subprocess over the
package directories of ``lab/speed/st_backend_envs.sh`` (``CSELAB_ST_BACKENDS=DIR``), and are skipped without.
int8 is only checked to run and stay close (cosine > 0.9); its quality is measured on the real checkpoint by
lab/speed/encode_backends.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import build_tiny_model_dir, run_cli, write_corpus, write_distinct_sts_home

pytest.importorskip("onnxruntime", reason="the export extra is not installed (pip install 'cselab[export]')")
pytest.importorskip("openvino", reason="the export extra is not installed (pip install 'cselab[export]')")
st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (extra 'bench')")

import cselab  # noqa: E402
from cselab import export as export_module  # noqa: E402
from cselab import fileio  # noqa: E402
from cselab.errors import CselabError  # noqa: E402
from cselab.export import MANIFEST, export_model  # noqa: E402
from cselab.export import calibration as calibration_module  # noqa: E402
from cselab.export import output as output_module  # noqa: E402
from cselab.models.encoder import Encoder, MLPHead  # noqa: E402
from cselab.models.prompts import PromptTemplate  # noqa: E402
from cselab.models.sentence_model import EnsembleModel, TwinModel, save_model  # noqa: E402

SENTENCES = [
    "a man plays the guitar .",
    "the dog runs on the road with the big red ball , and the cat sits on the chair in the old house . " * 3,
    "two women are eating food in the park",
    "a",
    "is this the old house ?",
]
TOL = 1e-4


def _torch_st(path: Path) -> np.ndarray:
    """sentence-transformers' own torch pipeline on a saved cselab directory (the independent reference)."""
    return st.SentenceTransformer(str(path), device="cpu").encode(SENTENCES, convert_to_numpy=True, batch_size=2)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _plain_st(paths: list[Path], backend: str, tmp_path: Path) -> list[np.ndarray]:
    """``SentenceTransformer(path, backend=backend).encode(SENTENCES)`` in plain sentence-transformers for each
    of ``paths``: in one subprocess that imports no cselab, over the package directory CSELAB_ST_BACKENDS/<backend>
    where this interpreter's sentence-transformers cannot import optimum's backend."""
    module = "optimum.onnxruntime" if backend == "onnx" else "optimum.intel.openvino"
    try:
        available = importlib.util.find_spec("optimum") is not None and bool(importlib.import_module(module))
    except ImportError:
        available = False
    script = ("import json, sys, numpy as np\nfrom sentence_transformers import SentenceTransformer\n"
              "sentences, backend = json.load(open(sys.argv[1])), sys.argv[2]\n"
              "for i, path in enumerate(sys.argv[3:]):\n"
              "    model = SentenceTransformer(path, backend=backend, device='cpu')\n"
              "    np.save(f'{sys.argv[1]}.{i}.npy', model.encode(sentences, convert_to_numpy=True, batch_size=2))\n")
    env = dict(os.environ)
    if not available:
        packages = Path(os.environ.get("CSELAB_ST_BACKENDS", "/nonexistent")) / backend
        if not packages.is_dir():
            pytest.skip(f"sentence-transformers' {backend} backend needs optimum, which does not install beside "
                        "transformers 5: run lab/speed/st_backend_envs.sh DIR and set CSELAB_ST_BACKENDS=DIR")
        env["PYTHONPATH"] = str(packages)  # the backend's packages in front of this venv's
    sentences = tmp_path / f"plain-{backend}.json"
    sentences.write_text(json.dumps(SENTENCES))
    done = subprocess.run([sys.executable, "-c", script, str(sentences), backend, *map(str, paths)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [np.load(f"{sentences}.{i}.npy") for i in range(len(paths))]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """cselab model directories of the standard poolers (BERT) and a RoBERTa (no token type ids)."""
    root = tmp_path_factory.mktemp("export-models")
    bert = build_tiny_model_dir(root / "hf-bert", "bert")
    roberta = build_tiny_model_dir(root / "hf-roberta", "roberta")
    dirs = {}
    for pooler in ("mean", "cls", "pooler", "first_last_avg"):
        encoder = Encoder.from_pretrained(bert, pooler=pooler, max_length=24)
        if pooler == "cls":
            encoder.head = MLPHead(encoder.hidden_size)  # the train-only head is not part of encode
        dirs[pooler] = save_model(encoder, root / f"bert-{pooler}")
    dirs["roberta"] = save_model(Encoder.from_pretrained(roberta, pooler="mean", max_length=24), root / "roberta")
    return dirs


# every standard pooler through ONNX; OpenVINO reads that same ONNX graph, so two of them suffice there
@pytest.mark.parametrize(("fmt", "which"), [*[("onnx", w)
                                               for w in ("mean", "cls", "pooler", "first_last_avg", "roberta")],
                                            ("openvino", "first_last_avg"), ("openvino", "roberta")])
def test_fp32_export_matches_torch(saved, fmt, which, tmp_path):
    out = export_model(saved[which], fmt, output=tmp_path / "export")
    reference = _torch_st(saved[which])
    ours = cselab.load_model(out, backend=fmt).encode(SENTENCES)
    assert ours.shape == reference.shape and ours.dtype == np.float32
    assert np.abs(ours - reference).max() <= TOL
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["format"] == fmt and manifest["quantize"] is None and manifest["check"]["max_abs_diff"] <= TOL
    assert (out / export_module.MODEL_FILES[fmt]).is_file() and not (out / "model.safetensors").exists()


def test_plain_sentence_transformers_loads_the_openvino_export(saved, tmp_path):
    out = export_model(saved["pooler"], "openvino", output=tmp_path / "export")  # a Dense after the pooling, too
    (plain,) = _plain_st([out], "openvino", tmp_path)
    assert np.abs(plain - _torch_st(saved["pooler"])).max() <= TOL


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_int8_runs_and_stays_close(saved, fmt, tmp_path, monkeypatch):
    monkeypatch.setattr(calibration_module, "CALIBRATION_SAMPLES", 32)  # speed; the benchmark calibrates on 300
    calibration = write_corpus(tmp_path / "calibration.txt") if fmt == "openvino" else None
    fp32 = cselab.load_model(export_model(saved["mean"], fmt, output=tmp_path / "fp32"), backend=fmt)
    out = export_model(saved["mean"], fmt, "int8", output=tmp_path / "int8", calibration=calibration)
    int8 = cselab.load_model(out, backend=fmt)
    a, b = int8.encode(SENTENCES), fp32.encode(SENTENCES)
    assert a.shape == b.shape and _cosines(a, b).min() > 0.9
    assert json.loads((out / MANIFEST).read_text())["quantize"] == "int8"
    single = int8.encode("a man plays the guitar .")
    assert single.shape == (int8.embedding_dim,)


def test_model_trained_by_cselab_train_exports_and_loads_in_plain_sentence_transformers(saved, tiny_bert_dir,
                                                                                          tmp_path, capsys,
                                                                                          monkeypatch):
    # every STS sentence differs, so no two cosines tie and float noise cannot reorder the Spearman ranks
    monkeypatch.setenv("CSELAB_HOME", str(write_distinct_sts_home(tmp_path / "home")))
    corpus = write_corpus(tmp_path / "corpus.txt")
    code, _out, err = run_cli(["train", f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}",
                               f"train.output_dir={tmp_path / 'run'}", "train.batch_size=8", "train.max_steps=4",
                               "train.eval_every=4", "train.lr=1e-3", "model.max_length=16"], capsys)
    assert code == 0, err
    best = tmp_path / "run" / "best"
    code, out, err = run_cli(["export", str(best), "--format", "onnx", "--output", str(tmp_path / "served")], capsys)
    assert code == 0, err
    assert f"wrote {tmp_path / 'served'} (onnx fp32)" in out
    trained = cselab.load_model(best).encode(SENTENCES)
    # cselab's own paths on the export: the API, `cselab encode` and `cselab eval` with --backend onnx
    served = cselab.load_model(tmp_path / "served", backend="onnx")
    assert np.abs(served.encode(SENTENCES) - trained).max() <= TOL
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n")
    code, _out, err = run_cli(["encode", str(tmp_path / "served"), "--input", str(tmp_path / "in.txt"),
                               "--output", str(tmp_path / "e.npy"), "--backend", "onnx"], capsys)
    assert code == 0, err
    assert np.abs(np.load(tmp_path / "e.npy") - trained).max() <= TOL
    scores = [cselab.evaluate(cselab.load_model(path, backend=b), ["stsb"])["stsb"]["test"]
              for path, b in ((best, "torch"), (tmp_path / "served", "onnx"))]
    assert scores[0] == pytest.approx(scores[1], abs=0.01)
    code, out, err = run_cli(["eval", str(tmp_path / "served"), "--backend", "onnx", "--tasks", "stsb",
                              "--splits", "test", "--json", "--output", str(tmp_path / "eval.json")], capsys)
    assert code == 0, err
    assert json.loads(out)["stsb"]["test"] == pytest.approx(scores[0], abs=0.01)
    # plain sentence-transformers with backend="onnx" (last: it is skipped where its backend is not installed)
    dense = export_model(saved["pooler"], "onnx", output=tmp_path / "dense")  # and a Dense after the pooling
    plain = _plain_st([tmp_path / "served", dense], "onnx", tmp_path)
    assert np.abs(plain[0] - trained).max() <= TOL
    assert np.abs(plain[1] - _torch_st(saved["pooler"])).max() <= TOL


def test_an_export_replaces_only_an_earlier_export(saved, tmp_path, capsys):
    out = tmp_path / "export"
    export_model(saved["mean"], "onnx", output=out)
    export_model(saved["cls"], "onnx", output=out)  # an earlier export: replaced
    assert json.loads((out / MANIFEST).read_text())["pooler"] == "cls"
    (out / "notes.txt").write_text("mine")  # now it holds a file cselab did not write
    with pytest.raises(CselabError, match="did not write"):
        export_model(saved["mean"], "onnx", output=out)
    assert (out / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "a temporary directory was left behind"


class _Killed(BaseException):
    """A simulated kill, raised where the process would die."""


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _pooler(out: Path) -> str:
    return json.loads((out / MANIFEST).read_text())["pooler"]


def test_an_export_killed_between_the_swaps_renames_is_recovered_by_the_next(saved, tmp_path, monkeypatch):
    out = tmp_path / "export"
    export_model(saved["mean"], "onnx", output=out)

    def kill_between_the_renames():
        def kill(point: str) -> None:
            if point == "swap-moved-aside":
                raise _Killed(point)

        monkeypatch.setattr(fileio, "_kill_point", kill)
        with pytest.raises(_Killed):
            export_model(saved["cls"], "onnx", output=out)
        monkeypatch.undo()
        # the earlier export is left only under its hidden set-aside name
        assert not out.exists()
        (aside,) = [tmp_path / name for name in _hidden(tmp_path)]
        assert aside.name.startswith(f".{out.name}.old-") and _pooler(aside) == "mean"

    kill_between_the_renames()
    with output_module.output_lock(out):  # what the next export does first: the earlier one is put back
        output_module.recover_output(out)
    assert _pooler(out) == "mean" and _hidden(tmp_path) == []
    kill_between_the_renames()
    export_model(saved["cls"], "onnx", output=out)  # the rerun
    assert _pooler(out) == "cls" and _hidden(tmp_path) == []
    assert cselab.load_model(out, backend="onnx").encode(SENTENCES).shape[0] == len(SENTENCES)


def test_an_export_killed_while_writing_leaves_a_staging_directory_the_next_one_removes(saved, tmp_path):
    out = tmp_path / "export"
    # a real kill (SIGKILL, in a subprocess) after the files are written, before the manifest and the swap
    script = ("import os, signal, sys\nfrom cselab.export import writer\n"
              "writer._check_against_torch = lambda *args: os.kill(os.getpid(), signal.SIGKILL)\n"
              "writer.export_model(sys.argv[1], 'onnx', output=sys.argv[2])\n")
    done = subprocess.run([sys.executable, "-c", script, str(saved["mean"]), str(out)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    staging = [tmp_path / name for name in _hidden(tmp_path) if name.startswith(f".{out.name}.export-")]
    assert len(staging) == 1 and (staging[0] / export_module.MODEL_FILES["onnx"]).is_file() and not out.exists()
    # a directory of the user's that only looks like one (no staging mark, no manifest) is never touched
    mine = tmp_path / f".{out.name}.export-12345678"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    export_model(saved["cls"], "onnx", output=out)  # the rerun (it also takes over the killed one's lock)
    assert _pooler(out) == "cls" and (out / export_module.MODEL_FILES["onnx"]).is_file()
    assert _hidden(tmp_path) == [mine.name] and (mine / "keep.txt").read_text() == "keep"


def _one_line_error(args, capsys) -> str:
    code, out, err = run_cli(args, capsys)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_bad_inputs_are_one_line_errors_and_lose_nothing(saved, tmp_path, capsys):
    model = str(saved["mean"])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        "no such directory": [str(tmp_path / "missing"), "--format", "onnx"],
        "--format": [model, "--format", "tflite"],
        "calibration": [model, "--format", "openvino", "--quantize", "int8", "--output", str(tmp_path / "o1")],
        "--calibration is used only": [model, "--format", "onnx", "--quantize", "int8", "--calibration", a_file.name],
        "calibration file not found": [model, "--format", "openvino", "--quantize", "int8", "--calibration",
                                       str(tmp_path / "none.txt"), "--output", str(tmp_path / "o2")],
        "did not write": [model, "--format", "onnx", "--output", str(mine)],
        "is a file": [model, "--format", "onnx", "--output", str(a_file)],
        "model directory itself": [model, "--format", "onnx", "--output", model],
    }
    before = sorted(p.name for p in tmp_path.iterdir())
    for expected, args in cases.items():
        assert expected in _one_line_error(["export", *args], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (mine / "keep.txt").read_text() == "keep" and a_file.read_text() == "x"
    # an export is not a torch model; an export's pooling and precision are fixed; a model without an export
    out = export_model(model, "onnx", output=tmp_path / "export")
    (tmp_path / "in.txt").write_text("a man\n")
    encode = ["encode", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "e.npy")]
    assert "--backend onnx" in _one_line_error([*encode[:1], str(out), *encode[1:]], capsys)
    assert "--precision bf16" in _one_line_error([*encode[:1], str(out), *encode[1:], "--backend", "onnx",
                                                  "--precision", "bf16"], capsys)
    assert "holds no openvino model" in _one_line_error([*encode[:1], model, *encode[1:], "--backend", "openvino"],
                                                        capsys)
    assert "already an export" in _one_line_error(["export", str(out), "--format", "openvino"], capsys)


def test_twins_ensembles_and_cot_bert_are_refused_in_one_line_and_members_export(saved, tmp_path, capsys):
    second = build_tiny_model_dir(tmp_path / "hf-second", "bert", seed=7)
    first = Encoder.from_pretrained(saved["mean"], pooler="cls", max_length=24)
    twin = TwinModel(first, Encoder.from_pretrained(second, pooler="cls", max_length=24))
    twin_dir = save_model(twin, tmp_path / "twin")
    ensemble_dir = save_model(EnsembleModel([first, Encoder.from_pretrained(second, pooler="mean")], [0.3, 0.7]),
                              tmp_path / "ensemble")
    prompt = Encoder.from_pretrained(saved["mean"], pooler="mask", max_length=24,
                                     prompt=PromptTemplate('this sentence : "[X]" means [MASK] .'))
    cot_dir = save_model(prompt, tmp_path / "cot")
    for path, expected in ((twin_dir, "export each member"), (ensemble_dir, "export each member"),
                           (cot_dir, "--backend torch")):
        line = _one_line_error(["export", str(path), "--format", "onnx"], capsys)
        assert expected in line and "distil" in line
    # what the twin's message says works: its members export, and their vectors add up to the twin's
    members = [cselab.load_model(export_model(twin_dir / m, "onnx", output=tmp_path / f"x-{m}"), backend="onnx")
               for m in ("encoder_1", "encoder_2")]
    summed = sum(m.encode(SENTENCES) for m in members)
    assert np.abs(summed - cselab.load_model(twin_dir).encode(SENTENCES)).max() <= 2 * TOL


def test_eval_of_an_export_on_the_users_files_runs_through_its_backend(saved, tmp_path, capsys):
    """`cselab eval EXPORT --labels F --backend onnx` scores the export on ONNX Runtime (it used to drop --backend
    and refuse the export as a torch model), as `cselab.evaluate_domain` does with an export loaded by the API; the
    scores are the torch model's."""
    pytest.importorskip("mteb", reason="mteb is not installed (pip install 'cselab[mteb]')")
    out = export_model(saved["mean"], "onnx", output=tmp_path / "export")
    labels = tmp_path / "labels.tsv"
    labels.write_text("".join(f"{SENTENCES[i % 3]} {i}\t{'abc'[i % 3]}\n" for i in range(15)))
    scores = {}
    for name, model, backend in (("torch", saved["mean"], "torch"), ("onnx", out, "onnx")):
        code, text, err = run_cli(["eval", str(model), "--labels", str(labels), "--backend", backend, "--json"], capsys)
        assert code == 0, err
        scores[name] = json.loads(text.strip().splitlines()[-1])
    assert scores["onnx"] == pytest.approx(scores["torch"], abs=0.01)
    api = cselab.evaluate_domain(cselab.load_model(out, backend="onnx"), labels=labels)
    assert api == pytest.approx(scores["torch"], abs=0.01)


def test_an_export_runs_long_texts_a_few_at_a_time_with_the_same_vectors(saved, tmp_path, monkeypatch):
    """An export's encode cuts each batch at its own width (cselab.runtime.memory.inference_batches), as torch's
    encoder does: with a budget that lets two texts of 20 tokens or more through at once and shorter batches
    whole, the long texts run two at a time, and every vector equals the text's own encoded alone (no padding)."""
    from cselab.export.runtime import ExportedModel
    from cselab.runtime import memory

    out = export_model(saved["mean"], "onnx", output=tmp_path / "export")
    model = ExportedModel(out, backend="onnx")
    texts = ["word " * 40, "a b", "word " * 30 + "end", "c", "word " * 35, "d e f"]
    alone = np.concatenate([model.encode([t], batch_size=1).numpy() for t in texts])
    monkeypatch.setattr(memory, "inference_batch_size",
                        lambda asked, config, width, budget: 2 if width >= 20 else asked)
    seen = []
    run = model._run
    monkeypatch.setattr(model, "_run", lambda feed: seen.append(feed["input_ids"].shape) or run(feed))
    batched = model.encode(texts, batch_size=64).numpy()
    # longest first, truncated at the export's 24 tokens: two long texts, then the third with the longest short one
    # (a batch is cut at its first text's width), then the two short ones left, whole
    assert [rows for rows, _ in seen] == [2, 2, 2]
    assert [width for _, width in seen][:2] == [24, 24] and seen[2][1] < 20
    assert np.abs(batched - alone).max() <= TOL
