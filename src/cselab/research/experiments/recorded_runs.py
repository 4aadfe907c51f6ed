"""A training run recorded in a results file under (method, variant, seed), the unit of `cselab seeds` and
`cselab ablate`.

Decisions
---------
* A run is skipped when the results file already has a record of the same method, variant and seed; if that
  record's effective configuration differs (ignoring output dir, device, threads and logging), the runner
  stops with an error instead of mixing two configurations under one name. A run whose output directory
  holds a saved state but no record (it was interrupted) is resumed.
* Seed ``S`` of a configuration uses ``train.seed=S`` and ``train.output_dir=<output_dir>-seed<S>`` (and a twin
  pipeline's shared ``stage1_dir`` becomes ``<stage1_dir>-seed<S>``: stage 1 depends on the seed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cselab.config.run_config import RUNTIME_KEYS, flatten_config
from cselab.errors import CselabError
from cselab.reporter import report
from cselab.runtime.precision import precision_agrees
from cselab.training.run_directory import LAST_DIR, RUN_MARKER

# Keys besides the runtime ones (config.run_config.RUNTIME_KEYS) that matching a record leaves out: the seed (a
# record's own field), how often it saves, a pipeline's stage-1 directory (it holds the seed), and the precision,
# compared by what ran (precision_agrees: `auto` by what it resolves to here)
_NOT_COMPARED = RUNTIME_KEYS | {"train.seed", "train.save_every", "method_options.pipeline.stage1_dir",
                                "train.precision"}
# a twin pipeline's stage-2 encoders are derived from its stage1_dir (left out above), not chosen
_DERIVED_PIPELINE_KEYS = {"method_options.encoder_1", "method_options.encoder_2"}


def _config_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Keys (dotted) whose values differ between two effective configs. Run-location keys are ignored, and so
    are typed keys only one side has (a newer cselab may add keys with defaults); ``method_options`` is
    free-form (no defaults filled in), so every key counts, present on one side or both (run locations aside)."""
    a = flatten_config({k: v for k, v in recorded.items() if k != "method_options"})
    b = flatten_config({k: v for k, v in current.items() if k != "method_options"})
    out = [k for k in sorted(set(a) & set(b)) if k not in _NOT_COMPARED and a[k] != b[k]]
    missing = object()
    ma = flatten_config({"method_options": recorded.get("method_options", {})})
    mb = flatten_config({"method_options": current.get("method_options", {})})
    pipeline = any(k.startswith("method_options.pipeline.") for k in ma | mb)
    derived = _DERIVED_PIPELINE_KEYS if pipeline else set()
    if any(ma.get(k, missing) != mb.get(k, missing) for k in set(ma) | set(mb)
           if k not in _NOT_COMPARED and k not in derived):
        out.append("method_options")
    return out


def shared_stage1_dir(config: Any) -> str | None:
    """The shared stage-1 directory a twin pipeline names (``None``: not a pipeline, or stage 1 under its own run)."""
    pipeline = config.method_options.get("pipeline")
    return (str(pipeline["stage1_dir"]).rstrip("/") if isinstance(pipeline, Mapping) and pipeline.get("stage1_dir")
            else None)


def seed_overrides(config: Any, seed: int, *, output_dir: str | None = None,
                   stage1_dir: str | None = None) -> list[str]:
    """The overrides that make ``config`` the run of ``seed``: the seed, ``<output_dir>-seed<S>`` and, for a twin
    pipeline whose stage 1 lives in a shared ``stage1_dir``, ``<stage1_dir>-seed<S>`` (stage 1 depends on the
    seed too; TNCSE and JTCSE presets naming the same stage1_dir still share it per seed). ``output_dir`` and
    ``stage1_dir`` default to the config's."""
    output_dir = (output_dir or config.train.output_dir).rstrip("/")
    stage1_dir = stage1_dir or shared_stage1_dir(config)
    out = [f"train.seed={seed}", f"train.output_dir={output_dir}-seed{seed}"]
    if stage1_dir:
        out.append(f"method_options.pipeline.stage1_dir={stage1_dir}-seed{seed}")
    return out


def _read_records(results_file: Path, kind: str) -> list[dict[str, Any]]:
    from cselab.training.records import read_records

    return read_records(results_file, kind) if results_file.is_file() else []


def run_unless_recorded(config_path: str | Path | None, overrides: list[str], *, method: str | None, variant: str,
                        results_file: Path, kind: str = "results") -> tuple[dict[str, Any] | None, bool]:
    """Train and record one (variant, seed) unless the results file (records of ``kind``,
    :mod:`cselab.training.records`) has it; the run's summary (or that it was skipped) is said through the
    reporter in effect. Returns (record, ran)."""
    from cselab.config.run_config import load_config
    from cselab.training.runs import train_and_record

    config = load_config(config_path, overrides, method=method)
    seed = config.train.seed
    effective = config.model_dump(mode="json")
    recorded = [r for r in _read_records(results_file, kind)
                if r.get("method") == config.method and (r.get("variant") or "") == variant and r.get("seed") == seed]
    if recorded:
        previous = recorded[-1]
        recorded_effective = (previous.get("config") or {}).get("effective") or {}
        differences = _config_differences(recorded_effective, effective)
        if not precision_agrees((recorded_effective.get("train") or {}).get("precision"), previous.get("precision"),
                                config):
            differences.append("train.precision")
        if differences:
            raise CselabError(
                f"{results_file} already records {config.method} variant {variant!r} seed {seed} with a different "
                f"configuration ({', '.join(differences[:3])}); choose another variant name or results file")
        report().say(f"{config.method}{f' {variant}' if variant else ''} seed {seed}: already recorded, skipped")
        return previous, False
    output_dir = Path(config.train.output_dir)
    # a directory a kill left (its marker: from the run's first file on) resumes, whatever it holds by then: a
    # saved state is continued; one killed before its first save (even after step 0's evaluation wrote best/)
    # starts again from step 0, which computes the same steps
    resume = (output_dir / RUN_MARKER).exists() or (output_dir / LAST_DIR).exists()
    summary = train_and_record(config, resume=resume, results_file=results_file, variant=variant,
                               config_source=str(config_path) if config_path else None, overrides=overrides)
    if not summary:  # a non-main data-parallel rank: the main rank records
        return None, True
    report().say(summary)
    return json.loads((output_dir / "results.json").read_text()), True
