"""The serving paths of a model trained on a CUDA GPU (the last step of ``lab/gpu/gpu_check.sh``).

    python -m lab.gpu.gpu_export_check MODEL_DIR SENTENCES_FILE RESULTS_JSONL

``MODEL_DIR`` is a model that a CUDA mixed-precision run saved. The check encodes ``SENTENCES_FILE``'s first
512 lines five ways and compares each with cselab's torch encoder on the GPU (cosine per sentence):

- sentence-transformers' own ``SentenceTransformer(MODEL_DIR, device="cuda")``: the saved directory loads
  into the library on the GPU and gives the same vectors;
- cselab's torch encoder on the CPU;
- ``cselab export`` to ONNX fp32 and ONNX int8, run by :class:`cselab.export.ExportedModel`. cselab's export
  serves on CPUs (``CPUExecutionProvider``), so this checks that a GPU-trained model exports and serves there.
  The ONNX Runtime providers the machine has are recorded too.

Prints one line per path and appends one JSON line (with provenance) to ``RESULTS_JSONL``. Exits 1 when
a path fails or when an fp32 path's smallest cosine is below 0.999 (int8 is recorded, not judged: random
weights quantize badly, and the scores mean nothing here).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cselab.data.stores.jsonl import append_jsonl

FP32_MIN_COSINE = 0.999


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def main(model_dir: str, sentences_file: str, results: str) -> int:
    import onnxruntime
    import torch
    from sentence_transformers import SentenceTransformer

    from cselab.api import load_model
    from cselab.export import export_model
    from cselab.provenance import provenance

    texts = Path(sentences_file).read_text().splitlines()[:512]
    encoder = load_model(model_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke run of this script
    encoder.model.to(device).eval()
    start = time.perf_counter()
    reference = encoder.encode(texts)
    if device == "cuda":
        torch.cuda.synchronize()
    row: dict[str, Any] = {"benchmark": "gpu_export_check", "model": model_dir, "sentences": len(texts),
                 "device": device, "torch_s": round(time.perf_counter() - start, 2),
                 "onnxruntime": onnxruntime.__version__, "ort_providers": onnxruntime.get_available_providers(),
                 "paths": {}}
    failed = []

    def check(name: str, make: Callable[[], Any], judged: bool = True) -> None:
        try:
            start = time.perf_counter()
            vectors = make()
            seconds = time.perf_counter() - start
            cos = cosines(reference, np.asarray(vectors, dtype=np.float32))
            row["paths"][name] = {"min_cosine": round(float(cos.min()), 6), "mean_cosine": round(float(cos.mean()), 6),
                                  "seconds": round(seconds, 2)}
            ok = not judged or cos.min() >= FP32_MIN_COSINE
            print(f"{name:28s} min cos {cos.min():.6f}  mean {cos.mean():.6f}  {seconds:6.1f} s  "
                  f"{'ok' if ok else 'LOW'}")
            if not ok:
                failed.append(name)
        except Exception as error:  # the check records every path, then fails at the end
            row["paths"][name] = {"error": f"{type(error).__name__}: {error}"[:500]}
            print(f"{name:28s} FAILED: {type(error).__name__}: {error}")
            failed.append(name)

    check(f"sentence-transformers {device}",
          lambda: SentenceTransformer(model_dir, device=device).encode(texts, batch_size=64))
    check("cselab torch cpu", lambda: load_model(model_dir).encode(texts))
    work = Path(model_dir).parent
    for quantize in (None, "int8"):
        name = "onnx" + ("-int8" if quantize else "")
        target = work / f"export-{name}"

        def exported(quantize: str | None = quantize, target: Path = target) -> np.ndarray:
            export_model(model_dir, "onnx", quantize, output=target)
            return load_model(target, backend="onnx").encode(texts)
        check(f"cselab export {name} (cpu)", exported, judged=quantize is None)
    row["failed"] = failed
    row.update(provenance())
    append_jsonl(results, row)
    print(f"ONNX Runtime {onnxruntime.__version__}, providers {onnxruntime.get_available_providers()}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    sys.exit(main(*sys.argv[1:]))
