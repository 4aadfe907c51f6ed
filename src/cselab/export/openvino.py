"""The ONNX graph as OpenVINO IR, in fp32 or int8: OpenVINO's ONNX frontend (what ``openvino.convert_model``
runs for a file), saved uncompressed; int8 is ``nncf.quantize`` with the settings of optimum-intel's default
``OVQuantizationConfig`` (what sentence-transformers' ``export_static_quantized_openvino_model`` uses:
transformer model type, mixed preset, fast bias correction), calibrated on :mod:`cselab.export.calibration`'s
sentences tokenised as :class:`cselab.export.runtime.ExportedModel` feeds them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cselab.reporter import report


def write_openvino(fp32: Path, file: Path, model: Any, quantize: str | None,
                   sentences: list[str] | None) -> dict[str, Any] | None:
    """The ONNX file ``fp32`` saved as OpenVINO IR at ``file`` (int8 when ``quantize``, calibrated on
    ``sentences``); the manifest's record of the quantization (None for fp32)."""
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
        report().say(f"quantized to int8 (static, calibrated on {len(samples)} sentences)")
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

