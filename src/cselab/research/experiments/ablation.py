"""A method trained once per subset of its loss terms, each run test-scored and recorded.

Decision: variant ``a+b`` sets ``method_options.loss_weights.<t>=0`` for every other term and writes to
``<output_dir>-<variant>`` (``-seed<S>`` appended when seeds are given); a twin pipeline's variants share one
stage 1 per seed (only stage 2's loss terms are ablated). Recorded (variant, seed) pairs are skipped
(:mod:`cselab.research.experiments.recorded_runs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from cselab.errors import CselabError
from cselab.research.experiments.recorded_runs import run_unless_recorded, seed_overrides, shared_stage1_dir


@dataclass
class AblationRun:
    """Records of every loss-term subset of a method (variant order, then seed) and what was done now.
    ``ran``/``skipped`` hold ``(variant, seed)`` pairs."""

    method: str
    terms: tuple[str, ...]
    variants: list[str]
    records: list[dict[str, Any]]
    ran: list[tuple[str, int]]
    skipped: list[tuple[str, int]]


def all_terms_subsets(terms: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of ``terms`` (kept in ``terms`` order), the full set first, then by size."""
    return [c for k in range(len(terms), 0, -1) for c in combinations(terms, k)]


def ablation_run(config_path: str | Path | None, terms_subsets: Sequence[Sequence[str]] | None = None,
                 overrides: Sequence[str] = (), *, results_file: str | Path, seeds: Iterable[int] | None = None,
                 method: str | None = None) -> AblationRun:
    """Train a method once per subset of its loss terms (``Method.terms`` of the registered method): variant
    ``a+b`` keeps the configured weights of ``a`` and ``b`` and sets every other term's
    ``method_options.loss_weights`` to 0 (not computed). ``terms_subsets`` defaults to every non-empty
    subset; ``seeds`` (default: the config's seed) repeats each variant per seed. Records are appended to
    ``results_file`` with the variant name; recorded (variant, seed) pairs are skipped.
    """
    from cselab.config.run_config import load_config
    from cselab.methods import METHODS

    base_config = load_config(config_path, list(overrides), method=method)
    method_cls = METHODS.get(base_config.method)
    terms = tuple(method_cls.terms_of(method_cls.parse_options(base_config.method_options)))
    subsets = [tuple(s) for s in terms_subsets] if terms_subsets is not None else all_terms_subsets(terms)
    for subset in subsets:
        unknown = [t for t in subset if t not in terms]
        if not subset or unknown or len(set(subset)) != len(subset):
            raise CselabError(f"invalid loss-term subset {list(subset)} for method {base_config.method!r}; "
                              f"terms: {', '.join(terms)}")
    subsets = list(dict.fromkeys(tuple(t for t in terms if t in s) for s in subsets))  # canonical term order
    seed_list = [int(s) for s in seeds] if seeds is not None else [None]
    results_file = Path(results_file)
    base = base_config.train.output_dir.rstrip("/")
    pipeline = base_config.method_options.get("pipeline")
    stage1_dir = None
    if isinstance(pipeline, dict):
        # twin pipelines: every variant shares one stage 1 per seed (only stage 2's loss terms are ablated)
        stage1_dir = shared_stage1_dir(base_config) or f"{base}-stage1"
        overrides = [*overrides, f"method_options.pipeline.stage1_dir={stage1_dir}"]
    records, ran, skipped, variants = [], [], [], []
    for subset in subsets:
        variant = "+".join(subset)
        variants.append(variant)
        for seed in seed_list:
            out = f"{base}-{variant}"
            placement = ([f"train.output_dir={out}"] if seed is None
                         else seed_overrides(base_config, seed, output_dir=out, stage1_dir=stage1_dir))
            run_overrides = [*overrides, *[f"method_options.loss_weights.{t}=0" for t in terms if t not in subset],
                             *placement]
            record, did_run = run_unless_recorded(config_path, run_overrides, method=method, variant=variant,
                                                   results_file=results_file, kind="ablation")
            key = (variant, seed if seed is not None else base_config.train.seed)
            (ran if did_run else skipped).append(key)
            if record is not None:
                records.append(record)
    return AblationRun(method=base_config.method, terms=terms, variants=variants, records=records, ran=ran,
                       skipped=skipped)
