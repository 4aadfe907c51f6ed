"""Serving on CPUs: ``cselab export`` (ONNX Runtime or OpenVINO, fp32 or int8) and running what it writes.

This module owns two things:

- :func:`export_model` turns a saved single-encoder model (any pooler but ``mask``, a distilled student, a
  fetched or sentence-transformers checkpoint) into a directory that sentence-transformers' own backends load,
  ``SentenceTransformer(dir, backend="onnx")`` / ``backend="openvino"``: the sentence-transformers module files
  (``modules.json``, pooling, dense), the tokenizer and HF config, and ``onnx/model.onnx`` or
  ``openvino/openvino_model.xml`` under the names those backends look for, plus ``cselab_export.json`` (what
  was exported, how, and a check against torch). Twins, ensembles and prompt (CoT-BERT) models are refused in
  one line that says what to export instead.
- :class:`ExportedModel` runs such a directory (``cselab.load_model(dir, backend="onnx")``, ``cselab encode`` /
  ``cselab eval --backend``) with cselab's batching (token-length-sorted batches), so it returns what the
  torch model returns.

Why not sentence-transformers' export functions (``export_dynamic_quantized_onnx_model``,
``export_static_quantized_openvino_model``) or optimum's exporters: both run through optimum-onnx / optimum-intel,
and no release of either installs beside transformers 5 (every optimum-onnx release pins transformers <4.58;
optimum-intel 2.2.0, the newest, pins transformers <5.6 and huggingface-hub <1.22 and pulls a torchvision
that replaces torch). So this module calls the libraries those exporters call, with their settings:

- ONNX: ``torch.onnx.export`` (the TorchScript exporter optimum uses) of the backbone with optimum's input and
  output names (``input_ids``, ``attention_mask`` [, ``token_type_ids``] -> ``last_hidden_state``) and dynamic
  batch and sequence axes;
- ONNX int8: ONNX Runtime's dynamic quantizer with the configuration optimum's ``AutoQuantizationConfig``
  picks for this CPU (``arm64``, ``avx2``, ``avx512``, ``avx512_vnni``: per-channel, symmetric weights, the
  ISA's weight type), which is what ``export_dynamic_quantized_onnx_model`` applies;
- OpenVINO: ``openvino.convert_model`` of that ONNX file, saved in fp32;
- OpenVINO int8: ``nncf.quantize`` with the settings of optimum-intel's default ``OVQuantizationConfig`` (what
  ``export_static_quantized_openvino_model`` uses: transformer model type, mixed preset, fast bias correction),
  calibrated on the user's sentences (``calibration=FILE``) or the fetched training corpus, never a download.

The directory is written beside the output and renamed into place: an output that exists is replaced only
when it is empty or an earlier export (every file listed in its ``cselab_export.json``); nothing else is ever
overwritten.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import CselabError
from cselab.models.exported import MANIFEST, is_export_dir

FORMATS: tuple[str, ...] = ("onnx", "openvino")
BACKENDS: tuple[str, ...] = ("torch", *FORMATS)
QUANTIZATIONS: tuple[str, ...] = ("int8",)
# the file names sentence-transformers' backends load without model_kwargs={"file_name": ...}
MODEL_FILES = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
CALIBRATION_SAMPLES = 300  # sentences nncf calibrates on (sentence-transformers' default calibration set size)
CALIBRATION_READ = 20_000  # lines read from the top of a calibration file to draw them from
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


# -- export ------------------------------------------------------------------------------------------------
def export_model(model_dir: str | Path, fmt: str, quantize: str | None = None, output: str | Path | None = None,
                 calibration: str | Path | None = None, *, echo: Any = None) -> Path:
    """Export the model in ``model_dir`` to ``fmt`` (``onnx`` or ``openvino``), ``quantize="int8"`` for int8
    (ONNX: dynamic, no calibration; OpenVINO: static, calibrated on ``calibration`` or the fetched corpus),
    into ``output`` (default: ``<model_dir>-<fmt>[-int8]`` beside a local directory, else in the working
    directory). Returns the directory written. Every problem with the inputs is a one-line :class:`CselabError`
    raised before anything is written."""
    say = echo or (lambda _text: None)
    if fmt not in FORMATS:
        raise CselabError(f"unknown export format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if quantize not in (None, *QUANTIZATIONS):
        raise CselabError(f"unknown quantization {quantize!r}; choose: int8 (or none for fp32)")
    _check_packages(fmt, quantize)
    source = _model_source(model_dir)
    _check_exportable(source)
    sentences = calibration_sentences(fmt, quantize, calibration)
    target = _output_dir(model_dir, source, fmt, quantize, output)

    import torch

    from cselab.models.sentence_model import load_sentence_model

    model = load_sentence_model(source).to("cpu").eval()
    _check_exportable_model(model, source)
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=parent))
    try:
        with torch.inference_mode(False), torch.no_grad():
            manifest = _write_export(model, tmp, fmt, quantize, sentences, say)
        manifest.update(source=str(model_dir), calibration=_calibration_record(calibration, sentences))
        manifest["check"] = _check_against_torch(model, tmp, fmt)
        manifest["files"] = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()) + [MANIFEST]
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _install(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _check_packages(fmt: str, quantize: str | None) -> None:
    import importlib.util

    needed = _PACKAGES[fmt] + (_PACKAGES["openvino-int8"] if fmt == "openvino" and quantize else ())
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise CselabError(f"{fmt} export needs {', '.join(missing)}, which is not installed: pip install 'cselab[export]'")


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


def calibration_sentences(fmt: str, quantize: str | None, calibration: str | Path | None) -> list[str] | None:
    """OpenVINO int8's calibration sentences (a sample of the file, or of the fetched corpus); None otherwise."""
    if not (fmt == "openvino" and quantize):
        if calibration is not None:
            which = "ONNX int8 is dynamic (it needs no calibration)" if quantize else "an fp32 export is not calibrated"
            raise CselabError(f"--calibration is used only by --format openvino --quantize int8; {which}")
        return None
    if calibration is not None:
        path = Path(calibration).expanduser()
        if not path.is_file():
            raise CselabError(f"calibration file not found: {calibration} (one sentence a line)")
    else:
        from cselab.data.sources import corpus_path

        path = corpus_path()
        if not path.is_file():
            raise CselabError("OpenVINO int8 needs calibration sentences: give --calibration FILE (one sentence a "
                              "line, e.g. your own texts) or run `cselab data fetch corpus` first")
    lines = _read_head(path, CALIBRATION_READ)
    if not lines:
        raise CselabError(f"calibration file {path} holds no sentences (one sentence a line)")
    rng = random.Random(0)
    return rng.sample(lines, CALIBRATION_SAMPLES) if len(lines) > CALIBRATION_SAMPLES else lines


def _read_head(path: Path, limit: int) -> list[str]:
    lines: list[str] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    lines.append(line.strip())
                if len(lines) >= limit:
                    break
    except UnicodeDecodeError as exc:
        raise CselabError(f"calibration file {path} is not UTF-8 text (byte {exc.start})") from None
    return lines


def _calibration_record(calibration: str | Path | None, sentences: list[str] | None) -> dict[str, Any] | None:
    if sentences is None:
        return None
    from cselab.data.sources import corpus_path

    return {"file": str(calibration if calibration is not None else corpus_path()), "sentences": len(sentences),
            "drawn_from_first_lines": CALIBRATION_READ, "seed": 0}


def default_output(model_dir: str | Path, source: Path, fmt: str, quantize: str | None) -> Path:
    """``<model_dir>-<fmt>[-int8]`` beside a model given as a path, in the working directory for a fetched name."""
    suffix = f"-{fmt}" + (f"-{quantize}" if quantize else "")
    given = Path(model_dir).expanduser()
    if given.exists():
        resolved = given.resolve()
        return resolved.with_name(resolved.name + suffix)
    return Path.cwd() / (source.name + suffix)


def _output_dir(model_dir: str | Path, source: Path, fmt: str, quantize: str | None,
                output: str | Path | None) -> Path:
    target = Path(output).expanduser() if output is not None else default_output(model_dir, source, fmt, quantize)
    if target.exists() and not target.is_dir():
        raise CselabError(f"output {target} is a file; give a new directory")
    if target.is_dir() and target.resolve() == source.resolve():
        raise CselabError(f"output {target} is the model directory itself; give a new directory")
    if target.is_dir() and any(target.iterdir()) and not _is_earlier_export(target):
        raise CselabError(f"output {target} exists and holds files cselab export did not write; give a new "
                          "directory or move it away")
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CselabError(f"output {target} cannot be created: {parent} is not a writable directory")
    return target


def _is_earlier_export(path: Path) -> bool:
    """True when every file under ``path`` is one its ``cselab_export.json`` lists (an export cselab wrote)."""
    try:
        listed = set(json.loads((path / MANIFEST).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    present = {p.relative_to(path).as_posix() for p in path.rglob("*") if not p.is_dir()}
    return present <= listed


def _install(tmp: Path, target: Path) -> None:
    """Rename the finished ``tmp`` to ``target``; an earlier export (or an empty directory) there is set aside
    under a fresh name first and removed only once the new one is in place."""
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.absolute().parent))
        aside.rmdir()
        target.rename(aside)
    try:
        tmp.rename(target)
    except BaseException:
        if aside is not None:
            aside.rename(target)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


# -- writing the files -------------------------------------------------------------------------------------
def _write_export(model: Any, out: Path, fmt: str, quantize: str | None, sentences: list[str] | None,
                  say: Any) -> dict[str, Any]:
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
        input_names = _export_onnx(model, fp32)
        say(f"exported the encoder to ONNX ({', '.join(input_names)} -> token states)")
        file = out / MODEL_FILES[fmt]
        file.parent.mkdir(parents=True)
        if fmt == "onnx" and quantize:
            quantization = _quantize_onnx_dynamic(fp32, file)
            say(f"quantized to int8 (dynamic, {quantization['config']} configuration)")
        elif fmt == "onnx":
            shutil.copyfile(fp32, file)
            quantization = None
        else:
            quantization = _write_openvino(fp32, file, model, quantize, sentences, say)
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


def _input_names(model: Any) -> list[str]:
    import inspect

    names = ["input_ids", "attention_mask"]
    accepts = inspect.signature(model.backbone.forward).parameters
    if "token_type_ids" in getattr(model.tokenizer, "model_input_names", ()) and "token_type_ids" in accepts:
        names.append("token_type_ids")
    return names


def _export_onnx(model: Any, path: Path) -> list[str]:
    """The backbone as ONNX (TorchScript exporter, opset 17): ids -> the token states the pooling reads."""
    import torch
    from torch import nn

    class TokenStates(nn.Module):
        """What the graph computes: the token states the pooling reads, from the inputs in ``names``' order."""

        def __init__(self, backbone: nn.Module, names: Sequence[str], *, first_last: bool) -> None:
            super().__init__()
            self.backbone, self.names, self.first_last = backbone, list(names), first_last

        def forward(self, *inputs: Any) -> Any:
            out = self.backbone(**dict(zip(self.names, inputs, strict=True)), output_hidden_states=self.first_last,
                                return_dict=True)
            return (out.hidden_states[1] + out.last_hidden_state) / 2 if self.first_last else out.last_hidden_state

    names = _input_names(model)
    wrapper = TokenStates(model.backbone, names, first_last=model.pooler == "first_last_avg").eval()
    ids = torch.tensor([[model.tokenizer.cls_token_id or 1] + [5] * 6 + [model.tokenizer.sep_token_id or 2]] * 2)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    example = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    axes = {name: {0: "batch_size", 1: "sequence_length"} for name in [*names, "last_hidden_state"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, tuple(example[n] for n in names), str(path), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False,
                          do_constant_folding=True)
    return names


def onnx_int8_config() -> tuple[str, str]:
    """(optimum's AutoQuantizationConfig name for this CPU, its weight type): the configuration
    ``export_dynamic_quantized_onnx_model`` would be given here."""
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        return "arm64", "QInt8"
    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    if "avx512_vnni" in flags:
        return "avx512_vnni", "QInt8"
    if "avx512f" in flags:
        return "avx512", "QInt8"
    return "avx2", "QUInt8"


def _quantize_onnx_dynamic(fp32: Path, out: Path) -> dict[str, Any]:
    """ONNX Runtime's dynamic int8 quantization with the settings of optimum's AutoQuantizationConfig for this
    CPU (IntegerOps on every operator ONNX Runtime can run in int8, per-channel symmetric weights, full range)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    name, weight_type = onnx_int8_config()
    operators = list(IntegerOpsRegistry)
    options = {"WeightSymmetric": True, "ActivationSymmetric": False, "EnableSubgraph": False, "ForceSymmetric": False}
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process first is logged on the root logger; optimum skips it too
    try:
        quantize_dynamic(fp32, out, op_types_to_quantize=operators, per_channel=True, reduce_range=False,
                         weight_type=getattr(QuantType, weight_type), extra_options=options)
    finally:
        root.setLevel(level)
    return {"method": "dynamic", "config": name, "weights": weight_type, "activations": "QUInt8", "per_channel": True,
            "operators": operators}


def _write_openvino(fp32: Path, file: Path, model: Any, quantize: str | None, sentences: list[str] | None,
                    say: Any) -> dict[str, Any] | None:
    import openvino as ov

    ov_model = ov.Core().read_model(str(fp32))  # OpenVINO's ONNX frontend (what convert_model runs for a file)
    quantization = None
    if quantize:
        import nncf

        names = [i.get_any_name() for i in ov_model.inputs]
        samples = [{k: v.numpy() for k, v in _features(model.tokenizer, [s], model.max_length, names).items()}
                   for s in sentences or []]
        advanced = nncf.AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix.DISABLE)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ov_model = nncf.quantize(ov_model, nncf.Dataset(samples), preset=nncf.QuantizationPreset.MIXED,
                                     model_type=nncf.ModelType.TRANSFORMER, fast_bias_correction=True,
                                     subset_size=len(samples), advanced_parameters=advanced)
        quantization = {"method": "static (nncf.quantize)", "preset": "mixed", "model_type": "transformer",
                        "fast_bias_correction": True, "subset_size": len(samples)}
        say(f"quantized to int8 (static, calibrated on {len(samples)} sentences)")
    ov.save_model(ov_model, str(file), compress_to_fp16=False)
    return quantization


def _features(tokenizer: Any, texts: Sequence[str], max_length: int, names: Sequence[str]) -> dict[str, Any]:
    """Padded int64 inputs of ``texts`` (as :class:`ExportedModel` feeds them), keyed by the graph's input names."""
    from cselab.models.prompts import pad_rows

    rows = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    features = pad_rows(rows, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    if "token_type_ids" in names:
        features["token_type_ids"] = features["input_ids"] * 0
    return features


def _check_against_torch(model: Any, out: Path, fmt: str) -> dict[str, Any]:
    """The export's vectors of :data:`CHECK_SENTENCES` against the torch model's: max |diff| and min cosine."""
    exported = ExportedModel(out, backend=fmt)
    a = exported.encode(CHECK_SENTENCES).numpy()
    b = model.encode(CHECK_SENTENCES).float().numpy()
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return {"sentences": len(CHECK_SENTENCES), "max_abs_diff": float(np.abs(a - b).max()),
            "min_cosine": float(cos.min())}


# -- running an export -------------------------------------------------------------------------------------
class ExportedModel:
    """An exported directory run by ONNX Runtime or OpenVINO: ``encode`` returns float32 ``[N, d]`` torch
    vectors like :meth:`cselab.models.encoder.Encoder.encode`. ``threads`` defaults to torch's thread count."""

    kind = "export"

    def __init__(self, path: str | Path, *, backend: str, threads: int | None = None) -> None:
        if backend not in FORMATS:
            raise CselabError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
        self.path = Path(path)
        self.backend = backend
        try:
            manifest = json.loads((self.path / MANIFEST).read_text()) if is_export_dir(self.path) else {}
        except (OSError, ValueError) as exc:
            raise CselabError(f"{self.path / MANIFEST} cannot be read ({exc}); export the model again") from None
        if manifest.get("format", backend) != backend:
            raise CselabError(f"{self.path} is an {manifest['format']} export; load it with backend "
                              f"{manifest['format']!r}, not {backend!r}")
        file = self.path / (manifest.get("file") or MODEL_FILES[backend])
        if not file.is_file():
            raise CselabError(f"{self.path} holds no {backend} model ({MODEL_FILES[backend]}); write one with "
                              f"`cselab export {path} --format {backend}` and load the directory it writes")
        self.manifest = manifest
        self.file = file
        self._read_modules()
        from transformers import AutoTokenizer

        from cselab.models.backbone import quiet_transformers

        quiet_transformers()
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        self.threads = int(threads)
        self._run, self.input_names = (self._onnxruntime if backend == "onnx" else self._openvino)(file)

    # -- the sentence-transformers modules after the encoder ---------------------------------------------
    def _read_modules(self) -> None:
        try:
            modules = json.loads((self.path / "modules.json").read_text())
            config = json.loads((self.path / "sentence_bert_config.json").read_text())
        except (OSError, ValueError) as exc:
            raise CselabError(f"{self.path} is not a sentence-transformers export directory ({exc})") from None
        self.max_length = int(config.get("max_seq_length") or 512)
        self.pooling, self.dense, self.normalize = "cls", None, False
        for module in modules[1:]:
            kind = module.get("type", "").rsplit(".", 1)[-1]
            folder = self.path / module.get("path", "")
            if kind == "Pooling":
                pooling = json.loads((folder / "config.json").read_text())
                mean = pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode") == "mean"
                cls = pooling.get("pooling_mode_cls_token") or pooling.get("pooling_mode") == "cls"
                if not (mean or cls):
                    raise CselabError(f"{folder}: only cls and mean pooling run here")
                self.pooling = "mean" if mean else "cls"
                self.dimension = int(pooling["word_embedding_dimension"])
            elif kind == "Dense":
                from safetensors.numpy import load_file

                dense = json.loads((folder / "config.json").read_text())
                if dense.get("activation_function", "").rsplit(".", 1)[-1] not in ("Tanh", "Identity"):
                    raise CselabError(f"{folder}: only a tanh or identity Dense runs here")
                weights = load_file(folder / "model.safetensors")
                self.dense = (weights["linear.weight"], weights.get("linear.bias"),
                              dense.get("activation_function", "").endswith("Tanh"))
                self.dimension = int(dense["out_features"])
            elif kind == "Normalize":
                self.normalize = True
            else:
                raise CselabError(f"{self.path}: module {module.get('type')} does not run outside torch")

    @property
    def hidden_size(self) -> int:
        return self.dimension

    @property
    def pooler(self) -> str:
        return str(self.manifest.get("pooler") or self.pooling)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "backend": self.backend, "file": str(self.file.relative_to(self.path)),
                "quantize": self.manifest.get("quantize"), "pooling": self.pooling}

    # -- the runtimes ------------------------------------------------------------------------------------
    def _onnxruntime(self, file: Path) -> tuple[Any, list[str]]:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return (lambda feed: session.run(["last_hidden_state"], feed)[0]), names

    def _openvino(self, file: Path) -> tuple[Any, list[str]]:
        import openvino as ov

        core = ov.Core()
        # optimum-intel's defaults (latency hint) and fp32 arithmetic where the export is fp32
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": self.threads,
                  "INFERENCE_PRECISION_HINT": "f32"}
        compiled = core.compile_model(core.read_model(str(file)), "CPU", config)
        request = compiled.create_infer_request()
        names = [i.get_any_name() for i in compiled.inputs]

        def run(feed: dict[str, np.ndarray]) -> np.ndarray:
            request.infer(feed)
            return request.get_output_tensor(0).data.copy()

        return run, names

    # -- encoding --------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False,
               normalize: bool = False) -> Any:
        """Embeddings ``[N, d]`` (float32 torch tensor), token-length-sorted batches, original order restored."""
        import torch
        from tqdm.auto import tqdm

        rows = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out = np.empty((len(rows), self.dimension), dtype=np.float32)
        bar = tqdm(total=len(rows), desc="encode", unit="sent", disable=not progress)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(rows[i]) for i in idx)
            ids = np.full((len(idx), width), pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for j, i in enumerate(idx):
                ids[j, : len(rows[i])] = rows[i]
                mask[j, : len(rows[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            out[idx] = self._pool(self._run(feed), mask)
            bar.update(len(idx))
        bar.close()
        vectors = torch.from_numpy(out)
        if normalize or self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    def _pool(self, states: np.ndarray, mask: np.ndarray) -> np.ndarray:
        states = states.astype(np.float32, copy=False)
        if self.pooling == "cls":
            pooled = states[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (states * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        if self.dense is not None:
            weight, bias, tanh = self.dense
            pooled = pooled @ weight.T + (bias if bias is not None else 0.0)
            pooled = np.tanh(pooled) if tanh else pooled
        return pooled.astype(np.float32, copy=False)


def load_exported(path: str | Path, backend: str, *, threads: int | None = None) -> ExportedModel:
    """An export directory (or a sentence-transformers directory holding an ``onnx/`` or ``openvino/`` model)."""
    from cselab.paths import resolve_model_path

    if backend not in FORMATS:
        raise CselabError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    source = Path(resolve_model_path(path))
    if not source.is_dir():
        raise CselabError(f"model directory not found: {path}")
    runtime = "onnxruntime" if backend == "onnx" else "openvino"  # running needs only the runtime
    import importlib.util

    if importlib.util.find_spec(runtime) is None:
        raise CselabError(f"--backend {backend} needs {runtime}, which is not installed: pip install 'cselab[export]'")
    return ExportedModel(source, backend=backend, threads=threads)


def load_for_backend(path: str | Path, backend: str, *, pooler: str | None = None, max_length: int | None = None,
                     precision: str = "fp32", threads: int | None = None) -> ExportedModel:
    """:func:`load_exported` for ``cselab encode``/``eval``: what an export fixed (pooling, length, precision)
    cannot be overridden, so asking to is an error rather than silently ignored."""
    fixed = [f"--{name} {value}" for name, value in (("pooler", pooler), ("max-length", max_length)) if value]
    if precision != "fp32":
        fixed.append(f"--precision {precision}")
    if fixed:
        raise CselabError(f"{' and '.join(fixed)}: an export's pooling, length and precision were fixed when it was "
                          "written (int8: cselab export --quantize int8); drop the option or use --backend torch")
    return load_exported(path, backend, threads=threads)
