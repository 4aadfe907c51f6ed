"""The adapted student's weights interpolated with the untouched checkpoint's, scored on the domain it was adapted on.

``theta(a) = (1 - a) * theta_untouched + a * theta_adapted`` for every floating-point weight (cselab's
:func:`~cselab.models.weight_mix.mixed_weights`, what ``cselab ensemble --combine weights`` saves). ``a = 0`` is
the checkpoint, ``a = 1`` the adapted model. Each run of the domain study (``runs/domains/DOMAIN/CONFIGURATION-
sSEED``, its kept model) is interpolated at each ``--weights`` value and scored as the study scores models (mteb
through cselab's domain evaluation, fp32, 256 tokens) on its domain's tasks and on STS-B test. One record per (run,
weight) in ``lab/results/interpolation.jsonl``; resumable (a pair already recorded is skipped).

With ``--choose-on-stsb-dev TOLERANCE`` the ``--weights`` are candidates: each run keeps the largest whose STS-B dev
Spearman (x100) is within TOLERANCE of the untouched model's (none: the untouched model, weight 0), tried from the
largest down, and only that weight is scored on the domain and STS-B test; the record keeps the dev scores it read.
The test split is never read to choose.

At the end it prints, for each weight, the mean over ``--runs`` of the main score and of STS-B test, read from the
records file (so a run a resumed command skipped counts with its recorded scores); with ``--choose-on-stsb-dev``, one
mean over the runs, each at its own chosen weight.

    python -m lab.domain_study.interpolate --runs bbc-news/cselab-distill-sim-nb3-guarded-mixed-s1 --weights 0.5
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
from pathlib import Path
from typing import Any, NamedTuple

from cselab.data.stores.jsonl import Schema, number, read_jsonl, text
from cselab.models.weight_mix import mixed_weights
from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "interpolation.jsonl"
INTERPOLATION_RECORD = Schema("interpolation", {"run": text(empty=False), "weight": number(0.0, 1.0)},
                              required=("run", "weight"))


def largest_weight_within(dev_of: Any, weights: list[float], untouched_dev: float, tolerance: float
                          ) -> tuple[float, dict[float, float]]:
    """The largest of ``weights`` whose ``dev_of(weight)`` is at least ``untouched_dev - tolerance`` (0.0 when none
    is), asking ``dev_of`` from the largest weight down and stopping at the first that passes; with the dev score of
    each weight asked."""
    asked: dict[float, float] = {}
    for weight in sorted(weights, reverse=True):
        asked[weight] = dev_of(weight)
        if asked[weight] >= untouched_dev - tolerance:
            return weight, asked
    return 0.0, asked


class RunMeans(NamedTuple):
    """The mean main score and STS-B test over the records of ``runs`` runs."""

    main_score: float
    stsb_test: float
    runs: int


def mean_over_runs(records: list[dict[str, Any]], runs: list[str], weight: float | None) -> RunMeans | None:
    """The mean over ``runs`` of the main score and STS-B test of each run's latest fixed-weight record at ``weight``
    (one without ``chosen_on``), or, when ``weight`` is None, of each run's latest record of a chosen weight (one with
    ``chosen_on``); the two kinds never mix, also where one file holds both. A run with no such record is left out
    (``runs`` of the result counts those in); None when none has one."""
    latest = {r["run"]: r for r in records if r["run"] in runs
              and (("chosen_on" in r) if weight is None else ("chosen_on" not in r and r["weight"] == weight))}
    if not latest:
        return None
    return RunMeans(statistics.fmean(float(r["main_score"]) for r in latest.values()),
                    statistics.fmean(float(r["stsb_test"]) for r in latest.values()), len(latest))


def untouched_start(adapted_dir: Path, max_length: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The untouched model a domain-study run started from, loaded at ``max_length``, with a copy of its weights to
    mix from and the run's summary. The start is the ``model`` of the ``adapt.json`` beside the run's kept model
    (``OUTPUT/best`` and ``OUTPUT/adapt.json``: the student's start also where the teacher was adapted first)."""
    from cselab.models.sentence_model import load_model

    summary = json.loads((adapted_dir.parent / "adapt.json").read_text())
    model = load_model(summary["model"], max_length=max_length)
    return model, {k: v.clone() for k, v in model.state_dict().items()}, summary


def load_mix(model: Any, untouched: dict[str, Any], adapted: dict[str, Any], weight: float) -> Any:
    """``model`` holding ``(1 - weight) untouched + weight adapted`` of every weight, in eval mode."""
    model.load_state_dict(mixed_weights(untouched, adapted, weight), strict=True)
    return model.eval()


def _stsb_dev_at(model: Any, untouched: dict[str, Any], adapted: dict[str, Any], weight: float) -> float:
    from lab.domain_study.scoring import stsb_dev

    return round(stsb_dev(load_mix(model, untouched, adapted, weight)), 2)


def main(argv: list[str] | None = None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="comma-separated DOMAIN/CONFIGURATION-sSEED")
    parser.add_argument("--weights", required=True, help="comma-separated weights of the adapted model, in [0, 1]")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-max-length", type=int, default=256)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--choose-on-stsb-dev", type=float, metavar="TOLERANCE",
                        help="keep the largest of --weights whose STS-B dev is within TOLERANCE of the untouched "
                        "model's")
    args = parser.parse_args(argv)
    weights = [float(w) for w in args.weights.split(",")]
    if any(not 0.0 <= w <= 1.0 for w in weights):
        parser.error("--weights: each weight must lie in [0, 1]")
    import torch

    from cselab.data.evalsets.domains import get_domain
    from cselab.evaluation.domain import load_inputs
    from cselab.models.sentence_model import load_model
    from lab.domain_study.score_suite import DOMAIN_RUNS, domain_run_model
    from lab.domain_study.scoring import study_scores

    torch.set_num_threads(args.threads)
    records = read_jsonl(args.results, INTERPOLATION_RECORD) if args.results.exists() else []
    done = {(r["run"], r["weight"]) for r in records}
    chosen_runs = {r["run"] for r in records if "chosen_on" in r}
    choosing = args.choose_on_stsb_dev is not None
    specs = args.runs.split(",")
    for spec in specs:
        todo = [w for w in weights if (spec, w) not in done]
        if (spec in chosen_runs) if choosing else not todo:  # recorded already: a resumed command skips it
            continue
        _, adapted_dir, origin = domain_run_model(spec, DOMAIN_RUNS)
        domain = origin["domain"]
        adapted = load_model(str(adapted_dir), max_length=args.eval_max_length).state_dict()
        model, untouched, summary = untouched_start(adapted_dir, args.eval_max_length)
        inputs = load_inputs(domain=domain)
        task = get_domain(domain).main_task
        chosen_on: dict[str, Any] | None = None
        if choosing:
            dev_at = functools.partial(_stsb_dev_at, model, untouched, adapted)
            untouched_dev = dev_at(0.0)
            weight, asked = largest_weight_within(dev_at, weights, untouched_dev, args.choose_on_stsb_dev)
            chosen_on = {"stsb_dev_tolerance": args.choose_on_stsb_dev, "untouched_stsb_dev": untouched_dev,
                         "stsb_dev": {str(w): d for w, d in asked.items()}}
            print(f"{spec}: STS-B dev {asked} against the untouched {untouched_dev:.2f}: weight {weight}", flush=True)
            todo = [weight]
        for weight in todo:
            load_mix(model, untouched, adapted, weight)
            record = {"domain": domain, "run": spec, "seed": origin["seed"], "weight": weight,
                      "selected_step": summary.get("best_step"), "main_task": task,
                      **({"chosen_on": chosen_on} if chosen_on else {}), **study_scores(model, inputs, task)}
            append_record(args.results, record, __file__, argv)
            print(f"{spec} at weight {weight}: {task} {record['main_score']:.2f}, STS-B test "
                  f"{record['stsb_test']:.2f}", flush=True)
    print_means(read_jsonl(args.results, INTERPOLATION_RECORD) if args.results.exists() else [], specs,
                None if choosing else weights)


def print_means(records: list[dict[str, Any]], runs: list[str], weights: list[float] | None) -> None:
    """Print :func:`mean_over_runs` of ``runs`` at each of ``weights``, or (None) at each run's chosen weight."""
    runs = list(dict.fromkeys(runs))
    for weight in [None] if weights is None else dict.fromkeys(weights):
        means = mean_over_runs(records, runs, weight)
        if means is None:
            continue
        over = f"{means.runs} runs" if means.runs == len(runs) else f"{means.runs} of the {len(runs)} runs"
        where = "each at its own chosen weight" if weight is None else f"at weight {weight}"
        print(f"mean over {over}, {where}: main score {means.main_score:.2f}, STS-B test {means.stsb_test:.2f}",
              flush=True)


if __name__ == "__main__":
    main()
