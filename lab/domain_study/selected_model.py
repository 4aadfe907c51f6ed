"""Print where a finished run keeps its selected model (``best``, or ``stage2/best`` for a two-stage run), for the
study's shell scripts:  python -m lab.domain_study.selected_model runs/domains/DOMAIN/CONFIGURATION-sSEED"""

from __future__ import annotations

import sys

from cselab.training.run_directory import selected_model_dir


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m lab.domain_study.selected_model RUN_DIR")
    print(selected_model_dir(args[0]))


if __name__ == "__main__":
    main()
