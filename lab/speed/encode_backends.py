"""CPU serving speed: cselab's torch and exported backends against sentence-transformers' own backends.

One model (default all-MiniLM-L6-v2), one machine, interleaved: every variant encodes the same sentence sets in
turn, round after round, so machine noise hits all alike. Variants:

- cselab torch fp32 / bf16 / auto (``cselab.load_model`` + ``--precision``);
- cselab's exports (``cselab export``): onnx, openvino, onnx int8 (dynamic), openvino int8 (static, calibrated
  on 300 sentences of the fetched corpus), run by cselab (:class:`cselab.export.ExportedModel`);
- sentence-transformers' own: torch, onnx, openvino (``backend=``, exported by optimum), onnx-qint8
  (``export_dynamic_quantized_onnx_model`` with the configuration for this CPU) and openvino-qint8
  (``export_static_quantized_openvino_model``, default configuration, calibrated on the same 300 sentences, read
  from a local directory instead of its hub default).

Each variant runs in its own worker process, for two reasons: a per-variant peak RSS exists only per process, and
sentence-transformers' onnx/openvino backends need optimum, which does not install beside transformers 5: their
workers run over the package directories of ``lab/speed/st_backend_envs.sh`` (``--st-backends DIR``). The
coordinator sends "encode set S" to one worker at a time (the others wait idle), the worker times only its own
``encode`` call; odd rounds go through the variants in reverse order, against load that drifts. Per threads
setting (2, then 1): sentences/s on each set (median over rounds), the ratio to sentence-transformers torch fp32,
the worker's peak RSS, and STS-B test Spearman x 100 (cselab's evaluator on the vectors each variant returns). One
record per (threads, variant) goes to lab/results/encode_backends.jsonl.

    bash lab/speed/st_backend_envs.sh /tmp/st-backends
    python -m lab.speed.encode_backends --st-backends /tmp/st-backends --threads 2,1 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR

RESULTS = RESULTS_DIR / "encode_backends.jsonl"
BATCH_SIZE = 32  # sentence-transformers' default encode batch, for every variant
CSELAB_TORCH = ("cselab torch fp32", "cselab torch bf16", "cselab torch auto")
CSELAB_EXPORTS = {"cselab onnx": ("onnx", None), "cselab openvino": ("openvino", None),
                  "cselab onnx int8": ("onnx", "int8"), "cselab openvino int8": ("openvino", "int8")}
ST_VARIANTS = ("st torch", "st onnx", "st openvino", "st onnx-qint8", "st openvino-qint8")
BASELINE = "st torch"


# -- workers (no cselab import in the sentence-transformers ones: they may run over another transformers) ------
def _worker(spec: dict[str, Any]) -> None:
    """Load one variant, then answer commands on stdin (one JSON per line) until 'stop'."""
    threads = int(spec["threads"])
    import torch

    torch.set_num_threads(threads)
    start = time.perf_counter()
    encode = _load_variant(spec, threads)
    sets = json.loads(Path(spec["sets"]).read_text())
    for texts in sets.values():  # warm-up: first calls, allocations, kernels for a few shapes
        encode(texts[:8])
    _reply({"ready": True, "load_s": round(time.perf_counter() - start, 2)})
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "time":
            texts = sets[command["set"]]
            start = time.perf_counter()
            encode(texts)
            _reply({"seconds": time.perf_counter() - start})
        elif command["cmd"] == "embed":
            import numpy as np

            np.save(command["out"], np.asarray(encode(json.loads(Path(command["file"]).read_text())), dtype=np.float32))
            _reply({"ok": True})
        elif command["cmd"] == "stop":
            _reply({"peak_rss_mb": _peak_rss_mb()})
            return


def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: unlike ru_maxrss it starts afresh at exec, so a worker does not
    inherit the coordinator's peak through fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _load_variant(spec: dict[str, Any], threads: int) -> Any:
    name, path = spec["variant"], spec["path"]
    if name.startswith("st "):
        from sentence_transformers import SentenceTransformer

        kwargs: dict[str, Any] = {}
        if "onnx" in name:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            kwargs = {"backend": "onnx", "model_kwargs": {"session_options": options,
                                                          "provider": "CPUExecutionProvider"}}
        elif "openvino" in name:
            kwargs = {"backend": "openvino",
                      "model_kwargs": {"ov_config": {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}}}
        if spec.get("file"):
            kwargs["model_kwargs"]["file_name"] = spec["file"]
        model = SentenceTransformer(path, device="cpu", **kwargs)
        return lambda texts: model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True)
    import cselab

    if name in CSELAB_TORCH:
        from cselab.training.precision import inference_precision

        from cselab.training.trainer import autocast_context

        encoder = cselab.load_model(path)
        choice = inference_precision(name.rsplit(" ", 1)[-1], encoder.model, BATCH_SIZE)

        def run(texts: list[str]) -> Any:
            with autocast_context(choice.precision, encoder.model.device):
                return encoder.encode(texts, batch_size=BATCH_SIZE)

        print(json.dumps({"precision": choice.to_dict()}), file=sys.stderr)
        return run
    encoder = cselab.load_model(path, backend=CSELAB_EXPORTS[name][0])
    return lambda texts: encoder.encode(texts, batch_size=BATCH_SIZE)


class Worker:
    """One variant's process; commands and answers are JSON lines."""

    def __init__(self, spec: dict[str, Any], pythonpath: str | None, log: Path) -> None:
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.name = spec["variant"]

    def ask(self, command: dict[str, Any] | None = None) -> dict[str, Any]:
        if command is not None:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.name!r} died; see {self.log.name}")
        return json.loads(line)

    def stop(self) -> dict[str, Any]:
        answer = self.ask({"cmd": "stop"})
        self.proc.wait(timeout=60)
        self.log.close()
        return answer


# -- preparation (coordinator) ------------------------------------------------------------------------------
def _sentence_sets(n_sts: int, n_long: int) -> dict[str, list[str]]:
    from cselab.data.evalsets.sts import load_task
    from cselab.paths import cselab_home

    sts: list[str] = []
    for split in ("test", "dev"):
        for sub in load_task("stsb", split).subsets:
            sts += list(sub.sentences1) + list(sub.sentences2)
    bbc = cselab_home() / "zeroshot" / "bbc-news.jsonl"
    if not bbc.is_file():
        sys.exit("the BBC articles are missing: run `cselab data fetch zeroshot` first")
    with open(bbc, encoding="utf-8") as f:
        long = [json.loads(line)["text"] for line in f][:n_long]
    return {"stsb": sts[:n_sts], "bbc": long}


def _st_python(backends: Path | None, which: str) -> str | None:
    """PYTHONPATH of sentence-transformers' ``which`` backend: this interpreter's when optimum's backend imports."""
    module = "optimum.onnxruntime" if which == "onnx" else "optimum.intel.openvino"
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    if probe.returncode == 0:
        return None
    if backends is None or not (backends / which).is_dir():
        sys.exit(f"sentence-transformers' {which} backend needs optimum, which does not install beside transformers 5:"
                 f" run `bash lab/speed/st_backend_envs.sh DIR` and pass --st-backends DIR")
    return str(backends / which)


def _st_exports(model: Path, work: Path, calibration: list[str], backends: Path | None,
                reuse: bool = False) -> dict[str, Any]:
    """sentence-transformers' own exports of ``model``, each by its own functions in its own package directory."""
    import shutil

    from cselab.export import onnx_int8_config

    config, _weights = onnx_int8_config()
    calibration_dir = work / "st-calibration"
    calibration_dir.mkdir(parents=True, exist_ok=True)
    with open(calibration_dir / "train.jsonl", "w", encoding="utf-8") as f:
        for sentence in calibration:
            f.write(json.dumps({"text": sentence}) + "\n")
    out = {}
    for backend in ("onnx", "openvino"):
        target = work / f"st-{backend}"
        if reuse and (target / backend).is_dir() and len(list((target / backend).glob("*.onnx" if backend == "onnx"
                                                                                       else "*.xml"))) == 2:
            files = sorted(p.relative_to(target).as_posix() for p in (target / backend).iterdir()
                           if p.suffix in (".onnx", ".xml"))
            out[backend] = {"path": str(target), "files": files, "pythonpath": _st_python(backends, backend)}
            continue
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(model, target)
        quantize = (f"export_dynamic_quantized_onnx_model(model, {config!r}, path)" if backend == "onnx" else
                    "export_static_quantized_openvino_model(model, OVQuantizationConfig(), path, dataset_name="
                    f"{str(calibration_dir)!r}, dataset_config_name='default', dataset_split='train', "
                    "column_name='text')")
        script = ("import sys\nfrom sentence_transformers import SentenceTransformer, "
                  "export_dynamic_quantized_onnx_model, export_static_quantized_openvino_model\n"
                  + ("from optimum.intel import OVQuantizationConfig\n" if backend == "openvino" else "")
                  + f"path = sys.argv[1]\nmodel = SentenceTransformer(path, backend={backend!r}, device='cpu')\n"
                  "model.save_pretrained(path)\n" + quantize + "\n")
        env = dict(os.environ)
        pythonpath = _st_python(backends, backend)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        done = subprocess.run([sys.executable, "-c", script, str(target)], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"sentence-transformers' {backend} export failed:\n{done.stderr[-3000:]}")
        files = sorted(p.relative_to(target).as_posix() for p in (target / backend).iterdir()
                       if p.suffix in (".onnx", ".xml"))
        out[backend] = {"path": str(target), "files": files, "pythonpath": pythonpath}
        print(f"sentence-transformers' {backend} exports: {files}")
    return out


def _cselab_exports(model: str, work: Path, reuse: bool = False) -> dict[str, dict[str, Any]]:
    from cselab.export import MANIFEST, export_model

    out = {}
    for name, (fmt, quantize) in CSELAB_EXPORTS.items():
        target = work / name.replace(" ", "-")
        start = time.perf_counter()
        if not (reuse and (target / MANIFEST).is_file()):
            export_model(model, fmt, quantize, output=target)
        manifest = json.loads((target / MANIFEST).read_text())
        out[name] = {"path": str(target), "export_s": round(time.perf_counter() - start, 1),
                     "calibration": manifest.get("calibration"), "quantization": manifest.get("quantization")}
        print(f"{name}: exported in {out[name]['export_s']} s")
    return out


def _specs(model_dir: Path, cselab_exports: dict[str, Any], st_exports: dict[str, Any]) -> list[dict[str, Any]]:
    specs = [{"variant": name, "path": str(model_dir)} for name in CSELAB_TORCH]
    specs += [{"variant": name, "path": info["path"]} for name, info in cselab_exports.items()]
    specs.append({"variant": "st torch", "path": str(model_dir)})
    for backend in ("onnx", "openvino"):
        info = st_exports[backend]
        plain = next(f for f in info["files"] if "qint8" not in f and "quantized" not in f)
        quantized = next(f for f in info["files"] if f != plain)
        for variant, file in ((f"st {backend}", plain), (f"st {backend}-qint8", quantized)):
            specs.append({"variant": variant, "path": info["path"], "file": file, "pythonpath": info["pythonpath"]})
    return specs


class _Vectors:
    """A model for cselab's STS evaluator whose ``encode`` asks a worker for the vectors."""

    def __init__(self, worker: Worker, work: Path) -> None:
        self.worker, self.work = worker, work

    def encode(self, sentences: list[str], **_kwargs: Any) -> Any:
        import numpy as np
        import torch

        file, out = self.work / "score-input.json", self.work / "score-output.npy"
        file.write_text(json.dumps(list(sentences)))
        self.worker.ask({"cmd": "embed", "file": str(file), "out": str(out)})
        return torch.from_numpy(np.load(out))


def render_table(records: list[dict[str, Any]]) -> str:
    """The Markdown table of the latest record of every (threads, variant): sentences/s and the ratio to
    sentence-transformers torch fp32 per set, peak RSS, STS-B test and its share of the fp32 score."""
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    for record in records:
        if record.get("benchmark") == "encode_backends":
            latest[(record["threads"], record["variant"])] = record
    order = [*CSELAB_TORCH, *CSELAB_EXPORTS, *ST_VARIANTS]
    lines = ["| threads | variant | STS-B sentences/s (x st torch) | BBC articles/s (x st torch) | peak RSS MB | "
             "STS-B test | % of fp32 |", "|---|---|---|---|---|---|---|"]
    for (threads, variant), r in sorted(latest.items(), key=lambda kv: (-kv[0][0], order.index(kv[0][1]))):
        cells = []
        for s in ("stsb", "bbc"):
            rate = r["sentences_per_s"].get(s)
            cells.append(f"{rate:.1f} ({r['ratio_to_st_torch'][s]:.2f}x)" if rate is not None else "-")
        share = f"{r['stsb_test_of_fp32']:.2f}" if r.get("stsb_test_of_fp32") is not None else "-"
        lines.append(f"| {threads} | {variant} | {cells[0]} | {cells[1]} | {r['peak_rss_mb']:.0f} | "
                     f"{r['stsb_test']:.2f} | {share} |")
    return "\n".join(lines)


def _cpu() -> dict[str, Any]:
    """The CPU as lscpu names it, with the vector extensions that decide int8 and bf16 speed."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}
    flags = set(fields.get("Flags", "").split())
    return {"model_name": fields.get("Model name"), "cpus": fields.get("CPU(s)"),
            "threads_per_core": fields.get("Thread(s) per core"), "family": fields.get("CPU family"),
            "model": fields.get("Model"), "hypervisor": fields.get("Hypervisor vendor"),
            "extensions": sorted(f for f in flags if f in {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16",
                                                           "amx_bf16", "amx_int8", "fma"})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--threads", default="2,1", help="comma-separated thread counts, each a pass of its own")
    parser.add_argument("--rounds", type=int, default=1, help="timed passes over each set per variant (median)")
    parser.add_argument("--rounds-long", type=int, default=1, help="rounds on the long set (it costs most)")
    parser.add_argument("--reuse", action="store_true", help="keep the exports already in --work")
    parser.add_argument("--long-threads", default="2,1", help="the thread counts at which the long set is timed")
    parser.add_argument("--skip-long", default="", help="comma-separated variants not timed on the long set")
    parser.add_argument("--n-sts", type=int, default=1000)
    parser.add_argument("--n-long", type=int, default=1000)
    parser.add_argument("--st-backends", type=Path, help="the DIR of lab/speed/st_backend_envs.sh")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cselab-encode-backends"))
    parser.add_argument("--variants", help="comma-separated subset of the variants (default: all)")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--table", action="store_true", help="print the Markdown table of the records and stop")
    args = parser.parse_args()
    if args.worker:
        return _worker(json.loads(args.worker))
    if args.table:
        from cselab.data.stores.jsonl import read_log

        return print(render_table(read_log(RESULTS)))

    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.export import CALIBRATION_SAMPLES, calibration_sentences
    from cselab.models.backbone import resolve_model_path
    from lab.record import append_record

    started = time.perf_counter()
    args.work.mkdir(parents=True, exist_ok=True)
    model_dir = Path(resolve_model_path(args.model))
    sets = _sentence_sets(args.n_sts, args.n_long)
    (args.work / "sets.json").write_text(json.dumps(sets))
    calibration = calibration_sentences("openvino", "int8", None)  # what cselab export calibrates on by default
    cselab_exports = _cselab_exports(args.model, args.work, args.reuse)
    st_exports = _st_exports(model_dir, args.work, calibration, args.st_backends, args.reuse)
    specs = _specs(model_dir, cselab_exports, st_exports)
    if args.variants:
        wanted = {v.strip() for v in args.variants.split(",")}
        specs = [s for s in specs if s["variant"] in wanted or s["variant"] == BASELINE]
    evaluator = StsEvaluator.from_names(["stsb"], ["test"], batch_size=BATCH_SIZE)
    cpu = _cpu()
    print(f"CPU: {cpu['model_name']} ({cpu['cpus']} CPUs; {', '.join(cpu['extensions'])})")
    scores: dict[str, float] = {}
    for threads in [int(t) for t in args.threads.split(",")]:
        workers = []
        for spec in specs:
            worker = Worker({**spec, "threads": threads, "sets": str(args.work / "sets.json")},
                            spec.get("pythonpath"), args.work / f"{spec['variant'].replace(' ', '-')}-{threads}.log")
            workers.append((worker, worker.ask()))
            print(f"threads {threads}: {spec['variant']} ready ({workers[-1][1]['load_s']} s)", flush=True)
        long_threads = {int(t) for t in args.long_threads.split(",") if t.strip()}
        skip_long = {v.strip() for v in args.skip_long.split(",") if v.strip()}
        timed = {w.name: [s for s in sets if s != "bbc" or (threads in long_threads and w.name not in skip_long)]
                 for w, _ in workers}
        times: dict[str, dict[str, list[float]]] = {w.name: {s: [] for s in timed[w.name]} for w, _ in workers}
        for r in range(max(args.rounds, args.rounds_long)):
            for set_name in sets:
                if r >= (args.rounds_long if set_name == "bbc" else args.rounds):
                    continue
                # odd rounds run the variants in reverse order, so a load that drifts during a pair of rounds
                # hits every variant alike on average; each pair starts one variant later
                shift = (r // 2) % len(workers)
                order = workers[shift:] + workers[:shift]
                for worker, _ in (order[::-1] if r % 2 else order):
                    if set_name not in timed[worker.name]:
                        continue
                    times[worker.name][set_name].append(worker.ask({"cmd": "time", "set": set_name})["seconds"])
                    print(f"threads {threads} round {r + 1} {set_name}: {worker.name} "
                          f"{len(sets[set_name]) / times[worker.name][set_name][-1]:.1f} sentences/s", flush=True)
        for worker, _ in workers:
            if worker.name not in scores:
                scores[worker.name] = round(evaluator(_Vectors(worker, args.work)).table()["stsb"]["test"], 2)
        rates = {name: {s: len(sets[s]) / statistics.median(v) for s, v in per.items()} for name, per in times.items()}
        for worker, ready in workers:
            rss = worker.stop()["peak_rss_mb"]
            name = worker.name
            record = {"benchmark": "encode_backends", "variant": name, "threads": threads, "model": args.model,
                      "sentences_per_s": {s: round(v, 1) for s, v in rates[name].items()},
                      "ratio_to_st_torch": {s: round(v / rates[BASELINE][s], 3) for s, v in rates[name].items()
                                            if s in rates[BASELINE]},
                      "seconds": {s: [round(t, 3) for t in v] for s, v in times[name].items()},
                      "peak_rss_mb": rss, "stsb_test": scores[name],
                      "stsb_test_of_fp32": round(100 * scores[name] / scores["cselab torch fp32"], 2)
                      if "cselab torch fp32" in scores else None,
                      "load_s": ready["load_s"],
                      "config": {"batch_size": BATCH_SIZE, "rounds": {"stsb": args.rounds, "bbc": args.rounds_long},
                                 "n": {s: len(v) for s, v in sets.items()},
                                 "max_seq_length": 256,
                                 "sets": {"stsb": "STS-B test then dev sentences, in file order",
                                          "bbc": "$CSELAB_HOME/zeroshot/bbc-news.jsonl, first articles"},
                                 "calibration_sentences": CALIBRATION_SAMPLES,
                                 "export": cselab_exports.get(name) or st_exports.get(
                                     "onnx" if "onnx" in name else "openvino" if "openvino" in name else "", {}),
                                 "file": next((s.get("file") for s in specs if s["variant"] == name), None)},
                      "cpu": cpu}
            print(f"threads {threads} {name:>22}: " + "  ".join(
                f"{s} {rates[name][s]:7.1f}/s ({record['ratio_to_st_torch'].get(s, float('nan')):.2f}x)"
                for s in rates[name])
                + f"  RSS {rss:.0f} MB  STS-B {scores[name]:.2f}")
            if not args.no_record:
                append_record(RESULTS, record, __file__, sys.argv[1:])
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
