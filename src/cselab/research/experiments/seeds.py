"""One configuration trained once per seed, each run test-scored and recorded (JTCSE Fig. 6 uses seeds 1..5).
Seeds already recorded are skipped, so a rerun resumes (:mod:`cselab.research.experiments.recorded_runs`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cselab.errors import CselabError
from cselab.research.experiments.recorded_runs import run_unless_recorded, seed_overrides

DEFAULT_SEEDS: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass
class SeedsRun:
    """Records of one configuration over seeds (seed order; earlier records included) and what was done now."""

    label: str
    records: list[dict[str, Any]]
    ran: list[int]
    skipped: list[int]


def seeds_run(config_path: str | Path | None, overrides: Sequence[str] = (), seeds: Iterable[int] = DEFAULT_SEEDS, *,
              results_file: str | Path, variant: str = "", method: str | None = None) -> SeedsRun:
    """Train the same configuration once per seed (``train.seed=S``, ``train.output_dir=<dir>-seed<S>``),
    each run evaluated on test and appended to ``results_file`` under ``variant``.

    Seeds already recorded there for this method/variant are skipped, so a rerun resumes (see the module
    docstring). Returns the configuration's records in seed order. JTCSE Fig. 6 uses seeds 1..5.
    """
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise CselabError(f"seeds must be distinct and at least one, got {seeds}")
    from cselab.config.run_config import load_config

    results_file = Path(results_file)
    base_config = load_config(config_path, list(overrides), method=method)
    label = f"{base_config.method}/{variant}" if variant else base_config.method
    records, ran, skipped = [], [], []
    for seed in seeds:
        run_overrides = [*overrides, *seed_overrides(base_config, seed)]
        record, did_run = run_unless_recorded(config_path, run_overrides, method=method, variant=variant,
                                               results_file=results_file, kind="seeds")
        (ran if did_run else skipped).append(seed)
        if record is not None:
            records.append(record)
    return SeedsRun(label=label, records=records, ran=ran, skipped=skipped)

