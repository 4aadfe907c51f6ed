"""The encoder as ONNX, and ONNX int8, with the settings optimum's exporters use (which cselab cannot install,
see :mod:`cselab.export`): ``torch.onnx.export`` (the TorchScript exporter optimum uses) of the backbone with
optimum's input and output names (``input_ids``, ``attention_mask`` [, ``token_type_ids``] ->
``last_hidden_state``) and dynamic batch and sequence axes; and ONNX Runtime's dynamic quantizer with the
configuration optimum's ``AutoQuantizationConfig`` picks for this CPU (``arm64``, ``avx2``, ``avx512``,
``avx512_vnni``: per-channel, symmetric weights, the ISA's weight type), which is what
``export_dynamic_quantized_onnx_model`` applies. The ONNX graph is also what the OpenVINO export converts."""

from __future__ import annotations

import logging
import platform
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cselab.errors import CselabError


def _input_names(model: Any) -> list[str]:
    import inspect

    names = ["input_ids", "attention_mask"]
    accepts = inspect.signature(model.backbone.forward).parameters
    if "token_type_ids" in getattr(model.tokenizer, "model_input_names", ()) and "token_type_ids" in accepts:
        names.append("token_type_ids")
    return names


WEIGHTS_SUFFIX = "_data"  # the graph's weights beside it: model.onnx -> model.onnx_data (optimum's name)
WEIGHTS_ALIGNMENT = 4096  # each tensor at a page boundary, so ONNX Runtime can map it rather than copy it


def weights_file(path: Path) -> Path:
    """The file beside the ONNX graph ``path`` that holds its weights."""
    return path.with_name(path.name + WEIGHTS_SUFFIX)


def export_onnx(model: Any, path: Path) -> list[str]:
    """The backbone as ONNX (TorchScript exporter, opset 17): ids -> the token states the pooling reads; the graph
    in ``path``, its weights in :func:`weights_file`.

    The exporter writes the graph alone and the weights are then written one tensor at a time: exporting them with
    the graph holds them three times over (the exporter's graph, the serialized proto, its Python bytes), which for
    all-mpnet-base-v2 peaked at 2.14 GB against 1.03 GB this way (``python -m lab.speed.export_memory``). Constants
    are left to the runtimes to fold when they load the graph (both do)."""
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
                          export_params=False, keep_initializers_as_inputs=True, do_constant_folding=False)
    _write_weights(path, wrapper.state_dict(), names)
    return names


def _write_weights(path: Path, state: dict[str, Any], inputs: Sequence[str]) -> None:
    """Turn the graph's weight inputs (every input but ``inputs``, named as in ``state``) into initializers whose
    data is in :func:`weights_file`, written tensor by tensor."""
    import onnx
    from onnx import TensorProto, helper

    proto = onnx.load(str(path))
    data = weights_file(path)
    kept, offset = [], 0
    with open(data, "wb") as out:
        for value in proto.graph.input:
            if value.name in inputs:
                kept.append(value)
                continue
            if value.name not in state:
                raise CselabError(f"the ONNX exporter named a weight {value.name!r} that the model does not hold; "
                                  "this model cannot be exported")
            array = state[value.name].detach().cpu().contiguous().numpy()
            offset += out.write(b"\0" * (-offset % WEIGHTS_ALIGNMENT))
            length = out.write(array.tobytes())
            tensor = TensorProto(name=value.name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
                                 dims=array.shape, data_location=TensorProto.EXTERNAL)
            for key, field in (("location", data.name), ("offset", offset), ("length", length)):
                tensor.external_data.add(key=key, value=str(field))
            proto.graph.initializer.append(tensor)
            offset += length
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    onnx.save(proto, str(path))


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


def quantize_onnx_dynamic(fp32: Path, out: Path) -> dict[str, Any]:
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

