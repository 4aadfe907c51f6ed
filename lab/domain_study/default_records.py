"""The domain table's records of ``cselab adapt``'s defaults, made from runs already kept.

Each default trains exactly as a configuration of the study does and hands back that run's weights mixed with the
untouched model's (:data:`DERIVED`: ``cselab-vectors-and-head-mix075``, the default, trains as
``cselab-distill-pcahead-cos-general`` and keeps three quarters; ``cselab-vectors-and-head``, the default before it,
the same runs at half; ``cselab-vectors-general``, the default before that, trains as
``cselab-distill-pca-cos-general`` and keeps a quarter; ``lab/tests/test_domain_study.py`` checks that the plans
agree), which is what ``lab.domain_study.interpolate --weights W`` scores (both call
:func:`cselab.models.weight_mix.mixed_weights`). So each interpolation record of such a run at its weight is a run
of the default: this joins it with the run's own record (its budget, wall time and provenance: the run's, since the
training is what they measure) into one record of the default, with where it came from (``derived_from``) and
``"default"``: whether its configuration is ``cselab adapt``'s default when the record is made (the records of the
default before, made while it was, say so), appended to ``lab/results/domains_default.jsonl`` unless that
(configuration, domain, seed) is there already. A run of the default made by ``run_domains`` itself is a record
like any other and needs none of this.

    python -m lab.domain_study.default_records
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.domain_study.study import DEFAULT_CONFIGURATION, read_domain_records
from lab.record import RESULTS_DIR


@dataclass(frozen=True)
class Derivation:
    """A recipe's records: the runs of ``source`` mixed at ``mix``, recorded as ``key``. Where ``source`` is taught
    by another configuration's run (its ``teacher_run``: the teacher it adapts first), that run is the recipe's too."""

    key: str
    source: str
    mix: float

    @property
    def first(self) -> str | None:
        """The configuration whose run of the same domain and seed the recipe runs before ``source``'s."""
        from lab.domain_study.study import CONFIGURATION

        return CONFIGURATION[self.source].teacher_run


# cselab adapt's defaults, oldest first
DEFAULTS = (Derivation("cselab-vectors-general", "cselab-distill-pca-cos-general", 0.25),
            Derivation("cselab-vectors-and-head", "cselab-distill-pcahead-cos-general", 0.5),
            Derivation("cselab-vectors-and-head-mix075", "cselab-distill-pcahead-cos-general", 0.75))
# and cselab adapt --adapt-teacher: the default's recipe taught by the teacher adapted first
DERIVED = (*DEFAULTS, Derivation("cselab-adapt-teacher", "cselab-distill-pcahead-cos-general-tsimcse", 0.75))
# where the unmixed runs' records are; a later file's record of a (configuration, domain, seed) wins
RUN_FILES = ("domains_screen.jsonl", "domains_rerun.jsonl", "domains.jsonl", "domains_check.jsonl")
OUTPUT = RESULTS_DIR / "domains_default.jsonl"
# what the run's record says of the run, carried over (scores and selection are the mixed model's, from the
# interpolation record)
RUN_FIELDS = ("main_task", "model", "eval_max_length", "threads", "general_text", "steps", "batch_size", "max_length",
              "teacher_s", "resumed", "training_text", "selection", "teacher", "recipe", "config", "trace",
              "wall_s", "provenance")


def derived_records(interpolations: list[dict[str, Any]], runs: list[dict[str, Any]],
                    derivation: Derivation) -> list[dict[str, Any]]:
    """One record of ``derivation.key`` per interpolation record at weight ``derivation.mix`` (no chosen weight) of
    a ``derivation.source`` run whose own record is in ``runs`` (the latest of each (domain, seed); the latest
    interpolation of each run). Runs without a record are left out, and so are those without a record of
    ``derivation.first``'s run where the source has one: its wall time is added to the run's, its steps kept as
    ``first_steps``."""
    source, mix_weight, first_key = derivation.source, derivation.mix, derivation.first
    run_of = {(r["domain"], int(r["seed"])): r for r in runs if r.get("configuration") == source}
    first_of = {(r["domain"], int(r["seed"])): r for r in runs if r.get("configuration") == first_key}
    mixed = {r["run"]: r for r in interpolations if r.get("weight") == mix_weight and "chosen_on" not in r
             and r["run"] == f"{r['domain']}/{source}-s{r['seed']}"}  # run_domains' run name
    out = []
    for name, mix in mixed.items():
        run = run_of.get((mix["domain"], int(mix["seed"])))
        first = first_of.get((mix["domain"], int(mix["seed"])))
        if run is None or (first_key is not None and first is None):
            continue
        derived_from = {"run": name, "run_commit": run.get("provenance", {}).get("git"),
                        "interpolation": mix.get("command"),
                        "interpolation_commit": mix.get("provenance", {}).get("git")}
        record = {"domain": mix["domain"], "configuration": derivation.key, "seed": int(mix["seed"]),
                  **{k: run[k] for k in RUN_FIELDS if k in run}, "mix": mix_weight, "scores": mix["scores"],
                  "main_score": mix["main_score"], "stsb_test": mix["stsb_test"],
                  "default": derivation.key == DEFAULT_CONFIGURATION, "derived_from": derived_from}
        if first is not None:
            record["wall_s"] = run["wall_s"] + first["wall_s"]
            record["first_steps"] = first["steps"]
            derived_from.update(first_run=f"{mix['domain']}/{first_key}-s{mix['seed']}",
                                first_run_commit=first.get("provenance", {}).get("git"))
        out.append(record)
    return sorted(out, key=lambda r: (r["domain"], r["seed"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="the directory of the records")
    args = parser.parse_args(argv)
    from cselab.data.stores.jsonl import append_jsonl, read_jsonl
    from lab.domain_study.interpolate import INTERPOLATION_RECORD

    interpolations = read_jsonl(args.results / "interpolation.jsonl", INTERPOLATION_RECORD)
    runs = [r for name in RUN_FILES if (args.results / name).exists()
            for r in read_domain_records(args.results / name)]
    output = args.results / OUTPUT.name
    have = {(r["configuration"], r["domain"], int(r["seed"])) for r in read_domain_records(output)} \
        if output.exists() else set()
    for record in (r for derivation in DERIVED for r in derived_records(interpolations, runs, derivation)):
        if (record["configuration"], record["domain"], record["seed"]) in have:
            continue
        append_jsonl(output, {**record, "command": "python -m lab.domain_study.default_records"})
        print(f"{record['configuration']}, {record['domain']} seed {record['seed']}: {record['main_score']:.2f}, "
              f"STS-B test {record['stsb_test']:.2f} (from {record['derived_from']['run']}) -> {output}")


if __name__ == "__main__":
    main()
