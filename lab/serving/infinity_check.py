"""Check a cselab model directory served over HTTP by infinity-emb against cselab's own embeddings.

infinity-emb (a server users already run) pins sentence-transformers < 4 and numpy < 2, so it cannot share cselab's
environment: it gets its own virtual environment (``--venv``, default ``$CSELAB_HOME/infinity-venv``), built on
first use and reused after: ``torch==2.13.0`` first (the local CPU wheel), then ``infinity-emb[server,torch]==0.0.78``
(``server``: the FastAPI app and its CLI; ``torch``: sentence-transformers and the torch engine) under a
constraints file that pins the torch just installed, so pip can never bring another torch.

The check starts ``infinity_emb v2 --model-id MODEL_DIR --engine torch --device cpu --dtype float32
--no-bettertransformer`` on 127.0.0.1 with the hub offline (``HF_HUB_OFFLINE=1``) and telemetry off
(``DO_NOT_TRACK=1``), waits for ``/health`` (bounded by ``--startup-timeout``), POSTs a fixed list of sentences to
``/embeddings`` (OpenAI-style body), once all in one request and then one request per sentence, and compares the
vectors with ``cselab.load_model(MODEL_DIR).encode(..., normalize=True)`` (the one request against cselab's default
batch size, the lone ones against ``batch_size=1``, so both sides pad alike; cselab's batch_size=1 against its
batched vectors gives the scale that batching alone makes). infinity's torch engine L2-normalises every embedding
it returns, so the check compares normalised with normalised (the largest difference to cselab's unnormalised
vectors and the served vectors' largest norm deviation from 1 are recorded too, which shows it). It prints the
largest absolute differences and the cosines, stops the server (always), and appends a record to
lab/results/serving_infinity.jsonl. Exit status 1 when a like-for-like difference exceeds ``--tolerance``.

    python -m lab.serving.infinity_check OUTPUT/model [--venv DIR] [--port N] [--startup-timeout S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import NoReturn

import numpy as np

from cselab.fileio import sha256_file
from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "serving_infinity.jsonl"
TORCH_SPEC = "torch==2.13.0"
INFINITY_SPEC = "infinity-emb[server,torch]==0.0.78"
SERVED_NAME = "cselab-model"
MARKER = "cselab-infinity-env.json"  # written last by a finished build: what the venv was built with
VENV_PACKAGES = ("infinity-emb", "sentence-transformers", "transformers", "tokenizers", "torch", "numpy",
                 "huggingface-hub", "fastapi", "uvicorn")

# Fixed, of varied lengths (a padded batch), with non-ASCII text and one sentence longer than the model's
# 256-token limit, so truncation has to agree too.
SENTENCES = [
    "ls",
    "List directory contents.",
    "The cat sat on the mat.",
    "A man is playing a guitar on a stage.",
    "grep searches the named input files for lines containing a match to the given patterns.",
    "If no file is given, recursive searches examine the working directory, and nonrecursive searches read "
    "standard input.",
    "Die Katze schläft auf dem Sofa, während draußen der Regen fällt.",
    "Le système de fichiers est monté en lecture seule après une erreur d'entrée-sortie.",
    "naïve café résumé — “quoted” text with emoji 🙂 and symbols ±×÷",
    "How do I change the permissions of a file so that only its owner can write to it?",
    "chmod u+w,go-w FILE",
    "The quick brown fox jumps over the lazy dog while the dog dreams of chasing rabbits across the meadow.",
    "Two sentences here. The second one talks about something else entirely: the weather in spring.",
    "SIGTERM asks a process to terminate; SIGKILL cannot be caught, blocked or ignored.",
    " ".join(["The manual page describes every option of the command in turn, with its default value."] * 30),
    "0 1 2 3 4 5 6 7 8 9",
]


def fail(message: str) -> NoReturn:
    raise SystemExit(f"infinity_check: {message}")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without PYTHONPATH (cselab's source must not leak into the infinity venv)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def venv_versions(python: Path) -> dict[str, str]:
    """The venv's Python version and the installed versions of VENV_PACKAGES (distribution metadata)."""
    code = ("import importlib.metadata as m, json, platform, sys\n"
            "found = {'python': platform.python_version()}\n"
            "for name in sys.argv[1:]:\n"
            "    try:\n        found[name] = m.version(name)\n"
            "    except m.PackageNotFoundError:\n        pass\n"
            "print(json.dumps(found))")
    out = subprocess.run([str(python), "-c", code, *VENV_PACKAGES], capture_output=True, text=True, check=True,
                         env=clean_env(), timeout=120).stdout
    return json.loads(out)


def pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True, env=clean_env())


def ensure_venv(venv: Path) -> tuple[Path, bool]:
    """The venv's python, building the venv unless its marker says it was built with TORCH_SPEC and INFINITY_SPEC;
    (python, reused)."""
    python = venv / "bin" / "python"
    wanted = {"torch": TORCH_SPEC, "infinity": INFINITY_SPEC}
    marker = venv / MARKER
    if marker.is_file() and python.exists() and json.loads(marker.read_text()) == wanted:
        return python, True
    print(f"building the infinity venv in {venv} ({TORCH_SPEC}, then {INFINITY_SPEC})")
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    pip(python, TORCH_SPEC)
    torch_version = venv_versions(python)["torch"]  # e.g. 2.13.0+cpu: the local wheel, pinned exactly from here on
    constraints = venv / "constraints.txt"
    constraints.write_text(f"torch=={torch_version}\n")
    pip(python, "-c", str(constraints), INFINITY_SPEC)
    after = venv_versions(python)
    if after.get("torch") != torch_version:
        fail(f"the infinity install changed torch {torch_version} to {after.get('torch')} in {venv}")
    marker.write_text(json.dumps(wanted))
    return python, False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, body: dict | None = None, timeout: float = 5.0) -> dict:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def log_tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def wait_ready(process: subprocess.Popen, base: str, log: Path, timeout: float) -> float:
    """Seconds until ``/health`` answers; fails if the server exits or ``timeout`` passes first."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if process.poll() is not None:
            fail(f"the server exited with status {process.returncode} before it was ready:\n{log_tail(log)}")
        try:
            http_json(f"{base}/health", timeout=2)
            return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            time.sleep(1)
    fail(f"the server was not ready after {timeout:.0f} s:\n{log_tail(log)}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def post_embeddings(base: str, sentences: list[str]) -> np.ndarray:
    """The vectors ``POST /embeddings`` returns for ``sentences``, in their order."""
    try:
        answer = http_json(f"{base}/embeddings", {"model": SERVED_NAME, "input": sentences}, timeout=300)
    except urllib.error.HTTPError as error:
        fail(f"POST /embeddings answered {error.code}: {error.read()[:500]!r}")
    rows = sorted(answer["data"], key=lambda item: item["index"])
    if [item["index"] for item in rows] != list(range(len(sentences))):
        fail(f"the server returned {len(rows)} embeddings for {len(sentences)} sentences")
    return np.array([item["embedding"] for item in rows], dtype=np.float64)


def served_embeddings(python: Path, model_dir: Path, port: int, startup_timeout: float,
                      workdir: Path) -> tuple[np.ndarray, np.ndarray, list[str], float, float]:
    """(the served vectors of one request with every sentence, of one request per sentence, the server's command,
    startup seconds, seconds of the one request)."""
    command = [str(python.parent / "infinity_emb"), "v2", "--model-id", str(model_dir),
               "--served-model-name", SERVED_NAME, "--engine", "torch", "--device", "cpu", "--dtype", "float32",
               "--no-bettertransformer", "--host", "127.0.0.1", "--port", str(port)]
    # offline: the model is the local directory; INFINITY_HOME: its cache folder, which is ./.infinity_cache otherwise
    env = clean_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DO_NOT_TRACK="1",
                    INFINITY_ANONYMOUS_USAGE_STATS="0", INFINITY_HOME=str(workdir))
    log = workdir / "server.log"
    base = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    try:
        startup_s = wait_ready(process, base, log, startup_timeout)
        start = time.monotonic()
        together = post_embeddings(base, SENTENCES)
        request_s = time.monotonic() - start
        # one at a time, as lone clients' requests reach the server: each is a batch of its own
        alone = np.concatenate([post_embeddings(base, [sentence]) for sentence in SENTENCES])
    finally:
        stop(process)
    return together, alone, command, startup_s, request_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path, help="a model directory cselab saved (cselab adapt's OUTPUT/model)")
    parser.add_argument("--venv", type=Path, help="infinity's venv (default: $CSELAB_HOME/infinity-venv)")
    parser.add_argument("--port", type=int, default=0, help="the server's port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for the server")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="the largest absolute difference accepted")
    args = parser.parse_args()

    from cselab.paths import cselab_home

    model_dir = args.model_dir.expanduser().resolve()
    venv = (args.venv or cselab_home() / "infinity-venv").expanduser().resolve()
    # everything checked before the first write (the venv)
    if not (model_dir / "modules.json").is_file():
        fail(f"{model_dir} is not a sentence-transformers model directory (no modules.json)")
    if venv.exists() and (not venv.is_dir() or (any(venv.iterdir()) and not (venv / "pyvenv.cfg").exists())):
        fail(f"--venv {venv} exists and is not a virtual environment; name a new or empty directory")
    if not 0 <= args.port <= 65535:
        fail(f"--port {args.port} is not a port (0 to 65535; 0 = a free one)")

    import cselab

    encoder = cselab.load_model(model_dir)
    ours = encoder.encode(SENTENCES, normalize=True).astype(np.float64)
    ours_raw = encoder.encode(SENTENCES, normalize=False).astype(np.float64)
    ours_alone = encoder.encode(SENTENCES, normalize=True, batch_size=1).astype(np.float64)

    python, reused = ensure_venv(venv)
    versions = venv_versions(python)
    with tempfile.TemporaryDirectory(prefix="infinity-check-") as tmp:
        together, alone, command, startup_s, request_s = served_embeddings(
            python, model_dir, args.port or free_port(), args.startup_timeout, Path(tmp))

    def max_abs(a: np.ndarray, b: np.ndarray) -> float:
        if a.shape != b.shape:
            fail(f"the server's embeddings are {a.shape}, cselab's {b.shape}")
        return float(np.abs(a - b).max())

    diff = max_abs(together, ours)
    cosines = (together * ours).sum(1) / (np.linalg.norm(together, axis=1) * np.linalg.norm(ours, axis=1))
    norm_deviation = float(np.abs(np.linalg.norm(together, axis=1) - 1.0).max())
    diff_raw = max_abs(together, ours_raw)
    diff_alone = max_abs(alone, ours_alone)  # batches of one on both sides
    diff_alone_vs_batched = max_abs(alone, ours)
    diff_cselab_batching = max_abs(ours_alone, ours)  # cselab against itself: the scale batching alone gives
    agrees = max(diff, diff_alone) <= args.tolerance
    print(f"infinity-emb {versions.get('infinity-emb')} (sentence-transformers "
          f"{versions.get('sentence-transformers')}, torch {versions.get('torch')}) vs cselab, "
          f"{len(SENTENCES)} sentences, L2-normalised both:")
    print(f"  one request, all sentences:  max |infinity - cselab| = {diff:.3g}; "
          f"cosine min {cosines.min():.9f}, mean {cosines.mean():.9f}")
    print(f"  one request per sentence:    max |infinity - cselab batch_size=1| = {diff_alone:.3g}; "
          f"against cselab batched {diff_alone_vs_batched:.3g}")
    print(f"  cselab batch_size=1 against batched: {diff_cselab_batching:.3g} (tolerance {args.tolerance:g}: "
          f"{'ok' if agrees else 'FAILED'})")
    print(f"  served vectors' largest | |v| - 1 | = {norm_deviation:.3g}; max |infinity - cselab unnormalised| = "
          f"{diff_raw:.3g}")
    print(f"  server ready after {startup_s:.1f} s, the one request {request_s:.2f} s")

    cselab_json = model_dir / "cselab.json"
    weights = model_dir / "model.safetensors"
    record = {
        "benchmark": "serving_infinity",
        "model_dir": str(model_dir),
        "model_sources": json.loads(cselab_json.read_text()).get("sources") if cselab_json.is_file() else None,
        "model_sha256": sha256_file(weights) if weights.is_file() else None,
        "config": {
            "sentences": len(SENTENCES),
            "sentences_sha256": hashlib.sha256("\n".join(SENTENCES).encode("utf-8")).hexdigest(),
            "compared": "cselab encode(normalize=True) vs infinity POST /embeddings (infinity L2-normalises): all "
                        "sentences in one request against cselab's default batch_size; one request per sentence "
                        "against cselab's batch_size=1",
            "server_command": ["infinity_emb", *command[1:]],
            "venv_built_with": [TORCH_SPEC, INFINITY_SPEC],
            "venv_reused": reused,
            "tolerance": args.tolerance,
        },
        "serving_env": versions,
        "max_abs_diff": diff,
        "cosine_min": float(cosines.min()),
        "cosine_mean": float(cosines.mean()),
        "max_abs_diff_one_per_request": diff_alone,
        "max_abs_diff_one_per_request_vs_batched": diff_alone_vs_batched,
        "cselab_batch1_vs_batched_max_abs_diff": diff_cselab_batching,
        "served_norm_max_deviation": norm_deviation,
        "max_abs_diff_unnormalised": diff_raw,
        "startup_s": round(startup_s, 2),
        "request_s": round(request_s, 3),
        "agrees": agrees,
    }
    append_record(RESULTS, record, __file__, sys.argv[1:])
    if not agrees:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
