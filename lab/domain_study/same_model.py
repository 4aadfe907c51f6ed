"""Whether two `cselab adapt` runs handed back the same model, bit for bit: the sha256 of every file of the weights
of each run's `model`, with what each run's `adapt.json` says of its seed, recipe, teacher pass and time, recorded in
``lab/results/adapt_same_model.jsonl``.

    python -m lab.domain_study.same_model RUN_A RUN_B --note "B with two busy processes on the cores"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "adapt_same_model.jsonl"
WEIGHTS = ("model.safetensors",)


def weights_digest(model_dir: Path) -> dict[str, str]:
    return {name: hashlib.sha256((model_dir / name).read_bytes()).hexdigest() for name in WEIGHTS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs=2, type=Path, help="two cselab adapt run directories")
    parser.add_argument("--note", default="", help="how the runs differed (load, order)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runs = []
    for run in args.runs:
        summary = json.loads((run / "adapt.json").read_text(encoding="utf-8"))
        runs.append({"run": str(run), "weights": weights_digest(Path(summary["model_dir"])),
                     **{k: summary.get(k) for k in ("text", "sentences", "steps", "recipe", "teacher_pass",
                                                   "wall_s", "after")}})
    same = runs[0]["weights"] == runs[1]["weights"]
    print(f"{'the same model, bit for bit' if same else 'DIFFERENT models'}: {runs[0]['weights']} "
          f"{runs[1]['weights']}")
    append_record(args.results, {"same_weights": same, "note": args.note, "runs": runs}, __file__,
                  sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
