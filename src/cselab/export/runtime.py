"""Running an export: :class:`ExportedModel` encodes with a directory ``cselab export`` wrote (or any
sentence-transformers directory holding an ``onnx/`` or ``openvino/`` model), on ONNX Runtime or OpenVINO, with
cselab's batching (token-length-sorted batches) and the sentence-transformers modules after the encoder
(pooling, dense, normalize) computed in numpy, so it returns what the torch model returns;
:func:`load_exported` / :func:`load_for_backend` are how ``cselab.load_model(dir, backend=...)``, ``cselab
encode`` and ``cselab eval --backend`` open one. Running needs only the runtime, none of the exporters."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.errors import CselabError
from cselab.models.exported import MANIFEST, is_export_dir
from cselab.vocabulary import BACKENDS, FORMATS

# the file names sentence-transformers' backends load without model_kwargs={"file_name": ...}
MODEL_FILES = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}


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
