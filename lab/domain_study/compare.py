"""The recipe table for chosen configurations at chosen training seeds, printed, not rendered into a document.

The rendered ``domain-recipes`` table takes every recorded seed. A decision taken before every seed had run (the
groups of 8 against the default at seeds 1-2, say) is reproduced here from the same records:

    python -m lab.domain_study.compare --seeds 1,2 \
        --configurations cselab-distill-sim-nb3-guarded-mixed,cselab-distill-sim-nb7-guarded-mixed

The untouched checkpoint's rows are always kept (they are the reference of every change). ``--per-seed`` prints
each seed's record instead of the means (the STS-B test figures a goal holds to its lowest seed, for instance).
``--also FILE`` reads a screen's records beside the suite's:

    python -m lab.domain_study.compare --also lab/results/domains_screen.jsonl \
        --configurations cselab-distill-pca-cos-lines,cselab-distill-sim-nb3-guarded-mixed
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR


def chosen_records(records: Sequence[dict[str, Any]], configurations: Sequence[str] | None,
                   seeds: Sequence[int] | None) -> list[dict[str, Any]]:
    """The records of ``configurations`` (all when ``None``) at the training ``seeds`` (all when ``None``), with
    every record of the untouched checkpoint."""
    from lab.domain_study.study import REFERENCE

    return [r for r in records if r["configuration"] == REFERENCE or (
        (configurations is None or r["configuration"] in configurations)
        and (seeds is None or int(r["seed"]) in seeds))]


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configurations", help="comma-separated configuration names (default: all)")
    parser.add_argument("--seeds", help="comma-separated training seeds (default: all)")
    parser.add_argument("--per-seed", action="store_true", help="a row per seed instead of the seed means")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="the directory of the record files")
    parser.add_argument("--also", type=Path, action="append", default=[], metavar="FILE",
                        help="a record file read beside the suite's (a screen's, e.g. domains_screen.jsonl)")
    args = parser.parse_args(argv)
    from cselab.errors import CselabError
    from lab.domain_study.study import (
        default_configuration,
        read_domain_records,
        read_suite_and_check_records,
        recipes_table,
        seeds_table,
    )

    try:
        seeds = None if args.seeds is None else [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds {args.seeds}: expected whole numbers separated by commas")
    configurations = None if args.configurations is None else args.configurations.split(",")
    try:
        records = read_suite_and_check_records(args.results) + [r for f in args.also for r in read_domain_records(f)]
    except CselabError as exc:
        parser.error(str(exc))
    known = {r["configuration"] for r in records}
    unknown = sorted(set(configurations or ()) - known)
    if unknown:
        parser.error(f"--configurations: no record of {', '.join(unknown)}")
    chosen = chosen_records(records, configurations, seeds)
    # the default is the one of all the records: among some configurations the former default would stand in for it
    print(seeds_table(chosen) if args.per_seed else recipes_table(chosen, default=default_configuration(records)))


if __name__ == "__main__":
    main()
