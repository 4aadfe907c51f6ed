"""The adaptation protocol's reference row: the untouched checkpoint with its own pooling, scored once on STS-B
dev and every test set, appended to the results file as the row ``checkpoint`` (lab/books/adapt_protocol.md). The adapt
tables show it first under every training text and pair every multi-seed configuration against it.

    python -m lab.adapt_protocol.adapt_checkpoint                     # all-MiniLM-L6-v2
                                                                      # (needs `cselab data fetch models`)
    python -m lab.adapt_protocol.adapt_checkpoint --model all-mpnet-base-v2   # the row checkpoint-all-mpnet-base-v2

Each model has its own row; the report pairs a configuration with the checkpoint of its backbone. A model already
recorded is skipped (FORCE=1 scores it again and appends a new record).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lab.record import ADAPT_RESULTS

PROTOCOL_CHECKPOINT = "all-MiniLM-L6-v2"


def main(argv: list[str] | None = None) -> int:
    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.models.sentence_model import load_model
    from cselab.provenance import provenance
    from cselab.training.results import append_record, scores_on_test_sets
    from lab.adapt_protocol.tables import CHECKPOINT_METHOD, read_adapt_records

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=PROTOCOL_CHECKPOINT, help="the checkpoint (its own pooling)")
    parser.add_argument("--results", type=Path, default=ADAPT_RESULTS)
    args = parser.parse_args(argv)

    if (not os.environ.get("FORCE") and args.results.is_file()
            and any(r.get("method") == CHECKPOINT_METHOD and r.get("backbone") == args.model
                    for r in read_adapt_records(args.results))):
        print(f"== checkpoint {args.model}: already recorded")
        return 0
    row = "checkpoint" if args.model == PROTOCOL_CHECKPOINT else f"checkpoint-{Path(args.model).name}"
    model = load_model(args.model)
    dev_evaluator = StsEvaluator.from_names(["stsb"], ("dev",), primary="stsb/dev")
    dev = round(dev_evaluator.primary_score(dev_evaluator(model)), 2)
    scores = scores_on_test_sets(model)
    record = {
        "protocol": "adapt", "row": row, "method": CHECKPOINT_METHOD,
        "variant": f"{Path(args.model).name}, its own pooling, untouched", "backbone": args.model,
        "seed": None, "steps": 0, "best_step": 0,
        "scores": {**scores, "stsb_dev_start": dev, "stsb_dev_best": dev},
        **provenance(),
    }
    append_record(args.results, record)
    print(f"checkpoint {args.model}: STS-B dev {dev}, test {scores.get('stsb')}, average {scores.get('avg-available')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
