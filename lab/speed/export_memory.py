"""What exporting a model to ONNX holds in memory: the peak resident memory of `cselab.export.onnx.export_onnx`
(the graph exported alone, the weights written tensor by tensor beside it) against the same export with the weights
inside the graph (``torch.onnx.export(export_params=True, do_constant_folding=True)``, what cselab did before), each
arm in a fresh process, one after the other.

    python -m lab.speed.export_memory --model all-mpnet-base-v2

Appends one record (with the CPU, the code version and the date) to lab/results/export_memory.jsonl.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "export_memory.jsonl"
ARMS = ("weights-in-graph", "weights-beside")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one_arm(model_name: str, arm: str) -> dict[str, float]:
    """Run in the child: load the model, export it the way ``arm`` says, and say the peaks and the output's size."""
    import torch

    import cselab.export.onnx as onnx_export
    from cselab.models.sentence_model import load_sentence_model
    from cselab.paths import resolve_model_path

    torch.set_num_threads(1)
    model = load_sentence_model(resolve_model_path(model_name)).to("cpu").eval()
    loaded = _peak_mb()
    if arm == "weights-in-graph":
        export = torch.onnx.export

        def with_weights(*args, **kwargs):  # the exporter's own defaults for the weights, as before
            kwargs.update(export_params=True, keep_initializers_as_inputs=False, do_constant_folding=True)
            return export(*args, **kwargs)

        torch.onnx.export = with_weights
        onnx_export._write_weights = lambda *args, **kwargs: None
    with tempfile.TemporaryDirectory(prefix="cselab-export-memory-") as scratch, torch.no_grad():
        path = Path(scratch) / "model.onnx"
        onnx_export.export_onnx(model, path)
        size = sum(f.stat().st_size for f in Path(scratch).iterdir()) / 1e6
    return {"loaded_peak_mb": round(loaded), "export_peak_mb": round(_peak_mb()), "files_mb": round(size)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-mpnet-base-v2")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # the child's one arm
    args = parser.parse_args(argv)
    if args.arm:
        print(json.dumps(_one_arm(args.model, args.arm)))
        return
    arms = {}
    for arm in ARMS:
        done = subprocess.run([sys.executable, "-m", "lab.speed.export_memory", "--model", args.model, "--arm", arm],
                              capture_output=True, text=True, check=True)
        arms[arm] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{arm}: peak {arms[arm]['export_peak_mb']:,} MB (the model loaded: {arms[arm]['loaded_peak_mb']:,} MB)")
    append_record(args.results, {"benchmark": "export_memory", "model": args.model, "threads": 1, "arms": arms},
                  __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
