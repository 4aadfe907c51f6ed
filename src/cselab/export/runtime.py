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
from cselab.reporter import report
from cselab.vocabulary import BACKENDS, FORMATS

# the file names sentence-transformers' backends load without model_kwargs={"file_name": ...}
MODEL_FILES = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
# a tokenizer's vocabulary: without one of these, transformers builds an empty tokenizer (every word [UNK])
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
AGAIN = "export the model again (cselab export)"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _read_json(path: Path, kind: type) -> Any:
    """A JSON file of an export that must hold a ``kind`` (dict or list); one-line CselabError otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CselabError(f"{path} is missing; {AGAIN}") from None
    except (OSError, ValueError) as exc:
        raise CselabError(f"{path} cannot be read ({_one_line(exc)}); {AGAIN}") from None
    if not isinstance(data, kind):
        wanted = "an object" if kind is dict else "a list"
        raise CselabError(f"{path} is damaged: a JSON {type(data).__name__}, not {wanted}; {AGAIN}")
    return data


def _positive_int(value: Any, path: Path, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CselabError(f"{path}: {key!r} is {value!r}, not a whole number >= 1; {AGAIN}")
    return value


def _inside(root: Path, name: Any) -> bool:
    """Whether ``name`` is a relative path that stays inside ``root``."""
    return isinstance(name, str) and bool(name) and not Path(name).is_absolute() and ".." not in Path(name).parts


class ExportedModel:
    """An exported directory run by ONNX Runtime or OpenVINO: ``encode`` returns float32 ``[N, d]`` torch
    vectors like :meth:`cselab.models.encoder.Encoder.encode`. ``threads`` defaults to torch's thread count.
    Every file is checked before the runtime loads the model: a damaged or incomplete export is one
    :class:`CselabError` naming the file, never a runtime's exception."""

    kind = "export"

    def __init__(self, path: str | Path, *, backend: str, threads: int | None = None) -> None:
        if backend not in FORMATS:
            raise CselabError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
        self.path = Path(path)
        self.backend = backend
        self.manifest = self._read_manifest(backend)
        name = self.manifest.get("file", MODEL_FILES[backend])
        if not _inside(self.path, name):
            raise CselabError(f"{self.path / MANIFEST}: 'file' is {name!r}, not a path inside the export; {AGAIN}")
        file = self.path / name
        if not file.is_file():
            raise CselabError(f"{self.path} holds no {backend} model ({name}); write one with "
                              f"`cselab export {path} --format {backend}` and load the directory it writes")
        self.file = file
        self._read_modules()
        self.backbone_config = self._read_backbone_config()
        self.tokenizer = self._load_tokenizer()
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        self.threads = int(threads)
        self._run, self.input_names = (self._onnxruntime if backend == "onnx" else self._openvino)(file)

    def _read_manifest(self, backend: str) -> dict[str, Any]:
        """``cselab_export.json`` checked (``{}`` for a sentence-transformers directory without one): its format is
        ``backend`` and every file it lists is there."""
        if not is_export_dir(self.path):
            return {}
        path = self.path / MANIFEST
        manifest = _read_json(path, dict)
        fmt = manifest.get("format", backend)
        if fmt not in FORMATS:
            raise CselabError(f"{path}: 'format' is {fmt!r}, not one of {', '.join(FORMATS)}; {AGAIN}")
        if fmt != backend:
            raise CselabError(f"{self.path} is an {fmt} export; load it with backend {fmt!r}, not {backend!r}")
        listed = manifest.get("files", [])
        if not isinstance(listed, list) or not all(_inside(self.path, name) for name in listed):
            raise CselabError(f"{path}: 'files' is not a list of paths inside the export; {AGAIN}")
        missing = [name for name in listed if not (self.path / name).is_file()]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise CselabError(f"{self.path} lacks {missing[0]}{more}, which its {MANIFEST} lists; {AGAIN}")
        return manifest

    def _read_backbone_config(self) -> Any:
        """The exported encoder's HF ``config.json`` (layers, width, heads: what a batch of long texts holds, for
        :func:`~cselab.runtime.memory.inference_batches`), or None where the directory has none."""
        from types import SimpleNamespace

        path = self.path / "config.json"
        return SimpleNamespace(**_read_json(path, dict)) if path.is_file() else None

    def _load_tokenizer(self) -> Any:
        """The export's tokenizer, refused when it has no vocabulary (transformers would build an empty one that
        turns every word into [UNK])."""
        if not any((self.path / name).is_file() for name in TOKENIZER_FILES):
            raise CselabError(f"{self.path} holds no tokenizer files (one of {', '.join(TOKENIZER_FILES)}): every word "
                              f"would be [UNK]; {AGAIN}, or copy the tokenizer files of the model it came from into it")
        from transformers import AutoTokenizer

        from cselab.models.backbone import quiet_transformers

        quiet_transformers()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CselabError(f"{self.path}: its tokenizer cannot be loaded ({_one_line(exc)}); {AGAIN}") from None
        if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
            raise CselabError(f"{self.path}: its tokenizer has no vocabulary beyond its special tokens: every word "
                              f"would be [UNK]; {AGAIN}")
        return tokenizer

    # -- the sentence-transformers modules after the encoder ---------------------------------------------
    def _read_modules(self) -> None:
        modules_file = self.path / "modules.json"
        modules = _read_json(modules_file, list)
        config_file = self.path / "sentence_bert_config.json"
        config = _read_json(config_file, dict)
        self.max_length = _positive_int(config.get("max_seq_length") or 512, config_file, "max_seq_length")
        self.pooling, self.dense, self.normalize, self.dimension = "cls", None, False, None
        for i, module in enumerate(modules):
            if not (isinstance(module, dict) and isinstance(module.get("type", ""), str)
                    and isinstance(module.get("path", ""), str)):
                raise CselabError(f"{modules_file}: entry {i} is not a module object (type and path); {AGAIN}")
        for module in modules[1:]:
            kind = module.get("type", "").rsplit(".", 1)[-1]
            folder = self.path / module.get("path", "")
            if kind == "Pooling":
                pooling = _read_json(folder / "config.json", dict)
                mean = pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode") == "mean"
                cls = pooling.get("pooling_mode_cls_token") or pooling.get("pooling_mode") == "cls"
                if not (mean or cls):
                    raise CselabError(f"{folder}: only cls and mean pooling run here")
                self.pooling = "mean" if mean else "cls"
                self.dimension = _positive_int(pooling.get("word_embedding_dimension"), folder / "config.json",
                                               "word_embedding_dimension")
            elif kind == "Dense":
                dense = _read_json(folder / "config.json", dict)
                activation = dense.get("activation_function", "")
                if not isinstance(activation, str) or activation.rsplit(".", 1)[-1] not in ("Tanh", "Identity"):
                    raise CselabError(f"{folder}: only a tanh or identity Dense runs here")
                self.dense = (*self._dense_weights(folder, dense), activation.endswith("Tanh"))
                self.dimension = _positive_int(dense.get("out_features"), folder / "config.json", "out_features")
            elif kind == "Normalize":
                self.normalize = True
            else:
                raise CselabError(f"{self.path}: module {module.get('type')} does not run outside torch")
        if self.dimension is None:
            raise CselabError(f"{modules_file} lists no Pooling module, so the vectors' size is unknown; {AGAIN}")

    @staticmethod
    def _dense_weights(folder: Path, config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        path = folder / "model.safetensors"
        try:
            weights = load_file(path)
        except FileNotFoundError:
            raise CselabError(f"{path} is missing; {AGAIN}") from None
        except (OSError, SafetensorError) as exc:
            raise CselabError(f"{path} cannot be read ({_one_line(exc)}); {AGAIN}") from None
        weight, bias = weights.get("linear.weight"), weights.get("linear.bias")
        if weight is None or weight.ndim != 2 or weight.shape[0] != config.get("out_features"):
            raise CselabError(f"{path} holds no linear.weight of {config.get('out_features')} rows; {AGAIN}")
        return weight, bias

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
        from onnxruntime.capi import onnxruntime_pybind11_state as state

        failures = tuple(getattr(state, name) for name in ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf",
                                                            "NoModel", "NoSuchFile", "NotImplemented",
                                                            "RuntimeException") if hasattr(state, name))
        try:
            session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        except (RuntimeError, *failures) as exc:
            raise CselabError(f"{file} cannot be loaded by ONNX Runtime ({_one_line(exc)}); {AGAIN}") from None
        names = [i.name for i in session.get_inputs()]
        self._check_graph(file, names, [o.name for o in session.get_outputs()])
        return (lambda feed: session.run(["last_hidden_state"], feed)[0]), names

    def _openvino(self, file: Path) -> tuple[Any, list[str]]:
        import openvino as ov

        core = ov.Core()
        # optimum-intel's defaults (latency hint) and fp32 arithmetic where the export is fp32
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": self.threads,
                  "INFERENCE_PRECISION_HINT": "f32"}
        try:
            # from the file, not a read model: OpenVINO then holds the weights once (700 MB, not 870, for mpnet-base)
            compiled = core.compile_model(str(file), "CPU", config)
        except RuntimeError as exc:
            raise CselabError(f"{file} cannot be loaded by OpenVINO ({_one_line(exc)}); {AGAIN}") from None
        request = compiled.create_infer_request()
        names = [i.get_any_name() for i in compiled.inputs]
        self._check_graph(file, names, ["last_hidden_state"] if compiled.outputs else [])

        def run(feed: dict[str, np.ndarray]) -> np.ndarray:
            request.infer(feed)
            return request.get_output_tensor(0).data.copy()

        return run, names

    @staticmethod
    def _check_graph(file: Path, inputs: list[str], outputs: list[str]) -> None:
        """The graph takes token ids and an attention mask and returns the token states (optimum's names)."""
        missing = [name for name in ("input_ids", "attention_mask") if name not in inputs]
        if missing or "last_hidden_state" not in outputs:
            raise CselabError(f"{file} is not an encoder graph cselab runs (inputs {', '.join(inputs) or 'none'}; "
                              f"it needs input_ids and attention_mask in and last_hidden_state out); {AGAIN}")

    # -- encoding --------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False,
               normalize: bool = False) -> Any:
        """Embeddings ``[N, d]`` (float32 torch tensor), token-length-sorted batches, original order restored; with
        ``progress`` the reporter in effect shows a bar if it shows bars."""
        import torch

        from cselab.runtime.memory import inference_batches

        rows = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out = np.empty((len(rows), self.dimension), dtype=np.float32)
        bar = report().bar(total=len(rows), desc="encode", unit="sent", show=progress)
        # long passages a few at a time, as torch's encoder runs them: the runtime's arena grows to the largest batch
        for idx in inference_batches([len(row) for row in rows], batch_size, self.backbone_config):
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
    cannot be overridden, so asking to is an error rather than silently ignored (an unknown pooler is refused as
    such first)."""
    if pooler is not None:
        from cselab.models.poolers import check_pooler

        check_pooler(pooler)
    fixed = [f"--{name} {value!r}" for name, value in (("pooler", pooler), ("max-length", max_length))
             if value is not None]
    if precision != "fp32":
        fixed.append(f"--precision {precision}")
    if fixed:
        raise CselabError(f"{' and '.join(fixed)}: an export's pooling, length and precision were fixed when it was "
                          "written (int8: cselab export --quantize int8); drop the option or use --backend torch")
    return load_exported(path, backend, threads=threads)
