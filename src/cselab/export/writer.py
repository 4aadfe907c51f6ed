"""``cselab export``: :func:`export_model` checks its inputs (every refusal a one-line :class:`CselabError`
before anything is written: packages, the model's kind from ``cselab.json``, calibration, the output), loads the
model, writes the sentence-transformers files (``modules.json``, pooling, dense, the tokenizer and HF config) and
the backend's model file (:mod:`cselab.export.onnx`, :mod:`cselab.export.openvino`) into a staging directory,
checks the export's vectors against torch's, writes the manifest ``cselab_export.json`` (what was exported, how,
by which versions, and that check) and swaps the directory in (:mod:`cselab.export.output`)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import CselabError
from cselab.export.calibration import calibration_record, calibration_sentences
from cselab.export.onnx import export_onnx, quantize_onnx_dynamic, weights_file
from cselab.export.openvino import write_openvino
from cselab.export.output import install, new_staging, output_dir, output_lock, recover_output, seal
from cselab.export.runtime import MODEL_FILES, ExportedModel
from cselab.models.exported import MANIFEST
from cselab.reporter import report
from cselab.vocabulary import FORMATS, QUANTIZATIONS

CHECK_SENTENCES = [
    "A man is playing the guitar.",
    "The dog runs in the park.",
    "Two women are sitting on a bench and talking about the weather.",
    "A child eats food.",
    "Stock markets fell sharply on Monday after the central bank raised interest rates again.",
    "she is happy",
    "Is this the road to the old house?",
    "A young man rides a horse along the beach while the sun sets behind him.",
]
_PACKAGES = {"onnx": ("onnx", "onnxruntime"), "openvino": ("onnx", "openvino"), "openvino-int8": ("nncf",)}


def export_model(model_dir: str | Path, fmt: str, quantize: str | None = None, output: str | Path | None = None,
                 calibration: str | Path | None = None, model: Any = None) -> Path:
    """Export the model in ``model_dir`` to ``fmt`` (``onnx`` or ``openvino``), ``quantize="int8"`` for int8
    (ONNX: dynamic, no calibration; OpenVINO: static, calibrated on ``calibration`` or the fetched corpus),
    into ``output`` (default: ``<model_dir>-<fmt>[-int8]`` beside a local directory, else in the working
    directory). Returns the directory written. Every problem with the inputs is a one-line :class:`CselabError`
    raised before anything is written. Each step is said through the reporter in effect (:mod:`cselab.reporter`).
    ``model``: the model of ``model_dir`` already loaded on the CPU, by a caller that holds it (not loaded twice)."""
    if fmt not in FORMATS:
        raise CselabError(f"unknown export format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if quantize not in (None, *QUANTIZATIONS):
        raise CselabError(f"unknown quantization {quantize!r}; choose: int8 (or none for fp32)")
    _check_packages(fmt, quantize)
    source = _model_source(model_dir)
    _check_exportable(source)
    sentences = calibration_sentences(fmt, quantize, calibration)
    target = output_dir(model_dir, source, fmt, quantize, output)

    import torch

    from cselab.models.sentence_model import load_sentence_model

    with output_lock(target):
        model = (load_sentence_model(source) if model is None else model).to("cpu").eval()
        _check_exportable_model(model, source)
        recover_output(target)  # what an export into the same output that was killed left
        tmp = new_staging(target)
        try:
            with torch.inference_mode(False), torch.no_grad():
                manifest = _write_export(model, tmp, fmt, quantize, sentences)
            manifest.update(source=str(model_dir), calibration=calibration_record(calibration, sentences))
            manifest["check"] = _check_against_torch(model, tmp, fmt)
            seal(tmp, manifest)
            install(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _check_packages(fmt: str, quantize: str | None) -> None:
    import importlib.util

    needed = _PACKAGES[fmt] + (_PACKAGES["openvino-int8"] if fmt == "openvino" and quantize else ())
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise CselabError(f"{fmt} export needs {', '.join(missing)}, which is not installed: "
                          "pip install 'cselab[export]'")


def _model_source(model_dir: str | Path) -> Path:
    from cselab.paths import resolve_model_path

    source = Path(resolve_model_path(model_dir))
    if not source.is_dir():
        raise CselabError(f"model directory not found: {model_dir} (give a saved model directory or a fetched "
                          "model name such as all-MiniLM-L6-v2)")
    if (source / MANIFEST).is_file():
        raise CselabError(f"{model_dir} is already an export; export the model directory it was made from")
    return source


def _check_exportable(source: Path) -> None:
    """Refuse, from ``cselab.json`` alone (before loading any weights), the kinds no single exported file computes."""
    from cselab.models.sentence_model import read_description

    description = read_description(source) or {}
    kind = description.get("kind", "encoder")
    members = description.get("members") or []
    parts = " and ".join(f"{source / m}" for m in members[:2]) + (" ..." if len(members) > 2 else "")
    if kind == "twin":
        raise CselabError(f"a twin sums two encoders' vectors, which no single ONNX/OpenVINO sentence-transformers "
                          f"model computes: export each member ({parts}) and add their vectors, or distil the twin "
                          f"into one encoder (cselab distill) and export that")
    if kind == "ensemble":
        raise CselabError(f"an ensemble combines its members' vectors with the weights in cselab.json, which no single "
                          f"ONNX/OpenVINO sentence-transformers model computes: export each member ({parts}) and "
                          f"combine their vectors, or distil the ensemble into one encoder (cselab distill) and "
                          f"export that")
    if kind != "encoder":
        raise CselabError(f"{source}: a model of kind {kind!r} cannot be exported; export a single encoder")
    if description.get("prompt") or description.get("pooler") == "mask":
        raise CselabError("a prompt-template (CoT-BERT) model tokenises through cselab's template and reads the "
                          "[MASK] row, which sentence-transformers' onnx/openvino backends cannot do: serve it with "
                          "--backend torch, or distil it into a plain encoder (cselab distill) and export that")


def _check_exportable_model(model: Any, source: Path) -> None:
    """The same refusal for what a foreign directory turned out to hold (its pooler is known only once loaded)."""
    from cselab.models.encoder import Encoder

    if not isinstance(model, Encoder):
        raise CselabError(f"{source}: only single encoders can be exported, not {type(model).__name__}")
    if model.pooler == "pooler" and model._standard_st_modules() is None:
        raise CselabError(f"{source}: its pooler layer has no tanh activation, which sentence-transformers' Dense "
                          "module cannot express; save it with pooler cls or mean (cselab.load_model(DIR, "
                          "pooler='cls').save(NEW)) and export that")


# -- writing the files -------------------------------------------------------------------------------------
def _write_export(model: Any, out: Path, fmt: str, quantize: str | None, sentences: list[str] | None) -> dict[str, Any]:
    """Write the sentence-transformers files and the backend's model file into ``out``; the manifest's facts."""
    from cselab.models import st_layout

    token_states = "(layer 1 + last layer) / 2" if model.pooler == "first_last_avg" else "last layer"
    if model.pooler == "first_last_avg":
        # the graph returns the averaged token states, so a plain mean Pooling gives cselab's first_last_avg
        modules = [st_layout.StModule(st_layout.TRANSFORMER), st_layout.pooling(model.hidden_size, "mean")]
        transformer = st_layout.transformer_config(model.max_length)
    else:
        modules, transformer = model._standard_st_modules()
    st_layout.write_modules(out, modules, transformer=transformer)
    model.backbone.config.save_pretrained(out)
    _save_tokenizer(model.tokenizer, out)

    scratch = Path(tempfile.mkdtemp(prefix="cselab-export-"))
    try:
        fp32 = scratch / "model.onnx"
        input_names = export_onnx(model, fp32)
        report().say(f"exported the encoder to ONNX ({', '.join(input_names)} -> token states)")
        file = out / MODEL_FILES[fmt]
        file.parent.mkdir(parents=True)
        if fmt == "onnx" and quantize:
            quantization = quantize_onnx_dynamic(fp32, file)
            report().say(f"quantized to int8 (dynamic, {quantization['config']} configuration)")
        elif fmt == "onnx":  # the graph and its weights, under the names the graph gives them
            shutil.move(fp32, file)
            shutil.move(weights_file(fp32), weights_file(file))
            quantization = None
        else:
            quantization = write_openvino(fp32, file, model, quantize, sentences)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"format": fmt, "quantize": quantize, "file": MODEL_FILES[fmt], "pooler": model.pooler,
            "token_states": token_states, "max_length": model.max_length, "embedding_dim": model.hidden_size,
            "inputs": input_names, "quantization": quantization, "versions": _versions(fmt, quantize)}


def _versions(fmt: str, quantize: str | None) -> dict[str, str]:
    """The versions of what wrote the files (module attributes: reading package metadata is slow)."""
    import onnx
    import torch
    import transformers

    from cselab.version import __version__

    versions = {"cselab": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
                "onnx": onnx.__version__}
    if fmt == "onnx":
        import onnxruntime

        versions["onnxruntime"] = onnxruntime.__version__
    else:
        import openvino

        versions["openvino"] = openvino.get_version()
        if quantize:
            import nncf

            versions["nncf"] = nncf.__version__
    return versions


def _save_tokenizer(tokenizer: Any, out: Path) -> None:
    """The tokenizer files; a ``TokenizersBackend`` class name (transformers 5) is written as the equivalent
    ``PreTrainedTokenizerFast``, which transformers 4 (where sentence-transformers' ONNX backend runs) also reads."""
    tokenizer.save_pretrained(out)
    config_file = out / "tokenizer_config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text())
        if config.get("tokenizer_class") == "TokenizersBackend":
            config["tokenizer_class"] = "PreTrainedTokenizerFast"
            config_file.write_text(json.dumps(config, indent=2) + "\n")


def _check_against_torch(model: Any, out: Path, fmt: str) -> dict[str, Any]:
    """The export's vectors of :data:`CHECK_SENTENCES` against the torch model's: max |diff| and min cosine."""
    exported = ExportedModel(out, backend=fmt)
    a = exported.encode(CHECK_SENTENCES).numpy()
    b = model.encode(CHECK_SENTENCES).float().numpy()
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return {"sentences": len(CHECK_SENTENCES), "max_abs_diff": float(np.abs(a - b).max()),
            "min_cosine": float(cos.min())}

