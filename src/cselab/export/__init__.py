"""Serving on CPUs: ``cselab export`` (ONNX Runtime or OpenVINO, fp32 or int8) and running what it writes.

:func:`export_model` turns a saved single-encoder model (any pooler but ``mask``, a distilled student, a fetched or
sentence-transformers checkpoint) into a directory that sentence-transformers' own backends load,
``SentenceTransformer(dir, backend="onnx")`` / ``backend="openvino"``: the sentence-transformers module files
(``modules.json``, pooling, dense), the tokenizer and HF config, and ``onnx/model.onnx`` (fp32: its weights in
``onnx/model.onnx_data`` beside it) or ``openvino/openvino_model.xml`` under the names those backends look for, plus
``cselab_export.json`` (what was exported, how, and a check against torch). Twins, ensembles and prompt (CoT-BERT)
models are refused in one line that says what to export instead. :class:`ExportedModel` runs such a directory
(``cselab.load_model(dir, backend="onnx")``, ``cselab encode`` / ``cselab eval --backend``) with cselab's batching,
so it returns what the torch model returns. One concern per module:

- :mod:`~cselab.export.writer`: :func:`export_model`, its input checks, the files, the manifest, the torch check;
- :mod:`~cselab.export.onnx`: the encoder as ONNX, and ONNX Runtime's int8 quantization;
- :mod:`~cselab.export.openvino`: that ONNX graph as OpenVINO IR, and nncf's int8 quantization;
- :mod:`~cselab.export.calibration`: the sentences OpenVINO int8 is calibrated on;
- :mod:`~cselab.export.output`: the output directory, its checks and lock, staging, the swap and its recovery;
- :mod:`~cselab.export.runtime`: running an export (:class:`ExportedModel`, :func:`load_exported`).

How a directory is recognised as an export (its manifest) is :mod:`cselab.models.exported`, so the floors below
this one can refuse to load one as a torch model without importing it.

Why not sentence-transformers' export functions (``export_dynamic_quantized_onnx_model``,
``export_static_quantized_openvino_model``) or optimum's exporters: both run through optimum-onnx / optimum-intel,
and no release of either installs beside transformers 5 (every optimum-onnx release pins transformers <4.58;
optimum-intel 2.2.0, the newest, pins transformers <5.6 and huggingface-hub <1.22 and pulls a torchvision
that replaces torch). So this package calls the libraries those exporters call, with their settings:

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

The directory is written beside the output and swapped into place: an output that exists is replaced only
when it is empty or an earlier export (every file listed in its ``cselab_export.json``); nothing else is ever
overwritten.
"""

from __future__ import annotations

from cselab.export.calibration import CALIBRATION_READ, CALIBRATION_SAMPLES, calibration_sentences
from cselab.export.onnx import onnx_int8_config
from cselab.export.output import default_output
from cselab.export.runtime import MODEL_FILES, ExportedModel, load_exported, load_for_backend
from cselab.export.writer import CHECK_SENTENCES, export_model
from cselab.models.exported import MANIFEST

__all__ = [
    "CALIBRATION_READ",
    "CALIBRATION_SAMPLES",
    "CHECK_SENTENCES",
    "MANIFEST",
    "MODEL_FILES",
    "ExportedModel",
    "calibration_sentences",
    "default_output",
    "export_model",
    "load_exported",
    "load_for_backend",
    "onnx_int8_config",
]
