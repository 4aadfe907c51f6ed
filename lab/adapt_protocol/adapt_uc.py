"""+UC rows of the adaptation protocol (lab/books/adapt_protocol.md): a recorded row's model combined with an outside
checkpoint as the papers do, ``(1 - w) * model + w * e_UC``, with ``w`` chosen on STS-B dev, test-scored once and
appended to the results file as its own row (``<row>+uc-<outside>``).

    python -m lab.adapt_protocol.adapt_uc tncse-indomain                      # e_UC = all-MiniLM-L6-v2 (mean pooling)
    python -m lab.adapt_protocol.adapt_uc tncse-indomain --outside all-mpnet-base-v2
                                                                   # needs `cselab data fetch models-mpnet`
    python -m lab.adapt_protocol.adapt_uc tncse-indomain --outside all-mpnet-base-v2 --combine concat  # 384-d + 768-d
    python -m lab.adapt_protocol.adapt_uc simcse-indomain-b1 --seed 2 --outside runs/adapt/ROW/best --combine concat
                                                                   # a trained run as e_UC, named ROW

``--combine sum`` (default) is the papers' weighted sum of the vectors (equal sizes); ``--combine concat`` averages
the two models' cosines with weights ``1 - w`` and ``w`` (members of any size).

The row's model is ``<train.output_dir>/stage2/best`` for a twin, else ``<train.output_dir>/best``; the ensemble
is saved beside it as ``<train.output_dir>-uc-<outside>``. A row already recorded is skipped (FORCE=1 redoes it).
``--seed S`` combines seed S's run of the row's configuration instead (recorded by ``cselab seeds``), so +UC rows
come in seeds too; the chosen ``w`` is kept in the record's ``ensemble``, not in its variant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lab.record import ADAPT_RESULTS


def ensemble_dir(output_dir: str | Path, suffix: str) -> Path:
    """Where the +UC ensemble of the run whose ``train.output_dir`` is ``output_dir`` is saved: beside it, as
    ``<output_dir>-uc-<suffix>`` (the suite's ``--protocol-row ROW+uc-OUTSIDE`` looks for it there)."""
    output_dir = Path(output_dir)
    return output_dir.with_name(f"{output_dir.name}-uc-{suffix}")


def _model_name(model: str) -> str:
    """A short name for the outside model: its directory, or for a run's ``.../NAME/best`` (``stage2/best``) NAME."""
    from cselab.training.run_directory import BEST_DIR, STAGE2_DIR

    path = Path(model)
    while path.name in (BEST_DIR, STAGE2_DIR) and path.parent != path:
        path = path.parent
    return path.name


def main(argv: list[str] | None = None) -> int:
    from cselab.errors import CselabError
    from cselab.provenance import provenance
    from cselab.research.experiments.ensemble import DEFAULT_GRID, ensemble_chosen_on_dev
    from cselab.training.results import append_record, score_test_sets
    from cselab.training.run_directory import selected_model_dir
    from cselab.vocabulary import COMBINE_MODES
    from lab.adapt_protocol.tables import read_adapt_records, training_text_of

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", help="a row of the results file (its model is combined)")
    parser.add_argument("--outside", default="all-MiniLM-L6-v2", help="the outside checkpoint e_UC (its own pooling)")
    parser.add_argument("--grid", default=",".join(f"{w:g}" for w in DEFAULT_GRID), help="weights tried on dev")
    parser.add_argument("--combine", choices=COMBINE_MODES, default="sum",
                        help="sum: weighted sum of the vectors (equal sizes); "
                        "concat: weighted mean of cosines (any sizes)")
    parser.add_argument("--seed", type=int, help="combine that seed's run of the row's configuration (`cselab seeds`)")
    parser.add_argument("--results", type=Path, default=ADAPT_RESULTS)
    args = parser.parse_args(argv)

    recorded = read_adapt_records(args.results)
    records = [r for r in recorded if r.get("row") == args.row]
    if not records:
        raise CselabError(f"{args.results} has no row {args.row!r}")
    source = records[-1]
    if args.seed is not None and args.seed != source.get("seed"):  # the same configuration's run of another seed
        same = [r for r in recorded if r.get("method") == source["method"] and r.get("variant") == source.get("variant")
                and r.get("seed") == args.seed and training_text_of(r)[0] == training_text_of(source)[0]]
        if not same:
            raise CselabError(f"{args.results} has no seed {args.seed} of the row {args.row!r}'s configuration "
                              f"({source['method']}/{source.get('variant')}): run it with `cselab seeds` first")
        source = same[-1]
    outside_name = _model_name(args.outside)
    suffix = f"{outside_name}-concat" if args.combine == "concat" else outside_name  # a sum and a concat never collide
    name = f"{args.row}+uc-{suffix}"
    if not os.environ.get("FORCE") and any(r.get("row") == name and r.get("seed") == source.get("seed")
                                           for r in recorded):
        print(f"== {name} seed {source.get('seed')}: already recorded")
        return 0
    out = Path(source["config"]["effective"]["train"]["output_dir"])
    model = selected_model_dir(out)
    if not model.is_dir():
        raise CselabError(f"{model} is missing: train the row {args.row!r} first (lab/adapt_protocol/run_adapt.sh)")
    target = ensemble_dir(out, suffix)
    if target.exists() and os.environ.get("FORCE"):
        import shutil

        shutil.rmtree(target)
    grid = [float(w) for w in args.grid.split(",") if w.strip()]
    saved, choice = ensemble_chosen_on_dev(model, args.outside, target, grid, combine=args.combine)
    scores = score_test_sets(saved)
    how = " (concat)" if args.combine == "concat" else ""  # w is in record["ensemble"]: seeds share one variant
    record = {
        "protocol": source.get("protocol"), "training_text": source.get("training_text"),
        "row": name, "method": f"{source['method']}+UC",
        "variant": f"{source.get('variant') or ''}; + {outside_name}{how}, w chosen on dev".lstrip("; "),
        "backbone": source.get("backbone"), "config": source["config"], "seed": source.get("seed"),
        "steps": source.get("steps"), "precision": source.get("precision"),
        "scores": {**scores, "stsb_dev_start": source["scores"].get("stsb_dev_best"),
                   "stsb_dev_best": round(choice.dev, 2)},
        "best_step": source.get("best_step"),
        "ensemble": {"of": args.row, "model": str(model), "outside": args.outside, "saved": str(saved),
                     "combine": args.combine, **choice.to_dict()},
        "wall_s": source.get("wall_s"),
        **provenance(),
    }
    append_record(args.results, record)
    sweep = ", ".join(f"{w:g}: {s:.2f}" for w, s in choice.dev_by_weight.items())
    print(f"{name}: STS-B dev by w {sweep}; chosen w {choice.weight:g}; STS-B test {scores.get('stsb')}")
    print(json.dumps(record["scores"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
