"""How much a domain's clustering score moves with k-means' own seed, model by model.

The study scores clustering with one k-means seed (the task's 42, :data:`cselab.evaluation.domain_tasks.KMEANS_INITS`
initialisations, the best kept). Here each model embeds the domain's labelled items once (fp32, 256 tokens, as the
study scores) and scikit-learn's ``KMeans`` clusters them with each of ``--kmeans-seeds``; the V-measure (x 100) of
each against the labels is recorded, so a difference between two models can be set beside the spread that k-means
alone gives each. Seed 42 must give the study's own score (a check, not a result). Why not the study's scoring
(``cselab.evaluation.domain.score_inputs(..., seed=S)``) per seed: it embeds the items again for every seed, eleven
times the cost of the one embedding here. One record per model in ``lab/results/clustering_seeds.jsonl``.

    python -m lab.domain_study.clustering_seeds --domain bbc-news --model checkpoint=all-MiniLM-L6-v2 \
        --model s1=runs/domains/bbc-news/cselab-distill-sim-nb3-guarded-mixed-s1

``--mean-of s1,s2,s3`` embeds nothing: it prints the mean of the recorded means of those models (a recipe's
training seeds, each over every k-means seed), the figure that sets a recipe beside the untouched model. With
``--lead-of UNTOUCHED,REFERENCE`` (two models recorded for the domain, e.g. ``checkpoint,mpnet``) it also prints
their recorded means and the share of REFERENCE's lead over UNTOUCHED that the mean recovers,
``(mean - untouched) / (reference - untouched)`` as a percentage.

    python -m lab.domain_study.clustering_seeds --domain bbc-news --mean-of s1,s2,s3 --lead-of checkpoint,mpnet
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "clustering_seeds.jsonl"
STUDY_SEED = 42


def add_model_arguments(parser: argparse.ArgumentParser, *, domain_required: bool = True) -> None:
    """The arguments of a script that embeds a domain's labelled items with chosen models (``domain_required``
    False: the script checks ``--domain`` itself, e.g. when it can also only print its records)."""
    parser.add_argument("--domain", required=domain_required)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                        help="a model directory, a name in $CSELAB_HOME/models, or a domain-study run directory")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-max-length", type=int, default=256)


def kept_model_path(path: str) -> Path:
    """``path``, or the model a domain-study run directory kept."""
    from cselab.training.run_directory import selected_model_dir

    model_path = Path(path)
    return selected_model_dir(model_path) if (model_path / "adapt.json").is_file() else model_path


def item_vectors(model: Path, texts: list[str], max_length: int, batch_size: int = 64) -> Any:
    """The vectors of ``texts`` by ``model`` (a model directory, as :func:`kept_model_path` returns it, or a name
    cselab resolves), at ``max_length`` tokens, fp32, as the study scores."""
    import numpy as np
    import torch

    from cselab.models.sentence_model import load_model

    encoder = load_model(str(model), max_length=max_length)
    encoder.eval()
    with torch.no_grad():
        return np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32)


def mean_of_means(records: list[dict], domain: str, names: list[str]) -> float:
    """The mean over ``names`` of each model's recorded mean V-measure on ``domain`` (its latest record);
    :class:`KeyError` naming a model with no record."""
    latest = {r["model"]: r["mean"] for r in records if r["domain"] == domain}
    missing = [name for name in names if name not in latest]
    if missing:
        raise KeyError(f"no {domain} record of {', '.join(missing)}")
    return statistics.fmean(latest[name] for name in names)


def lead_share(mean: float, untouched: float, reference: float) -> float:
    """The share (a percentage) of ``reference``'s lead over ``untouched`` that ``mean`` recovers:
    ``100 * (mean - untouched) / (reference - untouched)``; :class:`ValueError` when there is no lead (the two
    equal)."""
    if reference == untouched:
        raise ValueError(f"the reference's mean equals the untouched model's ({reference:.2f}): there is no lead")
    return 100 * (mean - untouched) / (reference - untouched)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--kmeans-seeds", default="42,0,1,2,3,4,5,6,7,8,9")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--mean-of", metavar="NAME,NAME", help="print the mean of these models' recorded means")
    parser.add_argument("--lead-of", metavar="UNTOUCHED,REFERENCE",
                        help="with --mean-of: also print the share of REFERENCE's lead over UNTOUCHED (their recorded "
                        "means) that the mean recovers")
    args = parser.parse_args(argv)
    if args.lead_of and not args.mean_of:
        parser.error("--lead-of goes with --mean-of NAME,NAME")
    lead_pair = args.lead_of.split(",") if args.lead_of else []
    if args.lead_of and (len(lead_pair) != 2 or not all(lead_pair)):
        parser.error(f"--lead-of {args.lead_of!r}: expected UNTOUCHED,REFERENCE (two model names)")
    if args.mean_of:
        from cselab.data.stores.jsonl import Schema, number, read_jsonl, text
        from cselab.errors import CselabError

        names = args.mean_of.split(",")
        schema = Schema("clustering seeds", {"domain": text(), "model": text(), "mean": number()},
                        required=("domain", "model", "mean"))
        try:
            records = read_jsonl(args.results, schema)
            mean = mean_of_means(records, args.domain, names)
        except KeyError as exc:
            parser.error(f"--mean-of: {exc.args[0]}")
        except CselabError as exc:
            parser.error(str(exc))
        if lead_pair:
            untouched_name, reference_name = lead_pair
            try:
                untouched = mean_of_means(records, args.domain, [untouched_name])
                reference = mean_of_means(records, args.domain, [reference_name])
                share = lead_share(mean, untouched, reference)
            except KeyError as exc:
                parser.error(f"--lead-of: {exc.args[0]}")
            except ValueError as exc:
                parser.error(f"--lead-of {args.lead_of}: {exc}")
        print(f"{args.domain}: mean of the k-means means of {', '.join(names)}: {mean:.2f}")
        if lead_pair:
            print(f"{args.domain}: k-means means of {untouched_name} {untouched:.2f} and {reference_name} "
                  f"{reference:.2f}; the mean recovers {share:.1f}% of {reference_name}'s lead over {untouched_name}")
        return
    if not args.model:
        parser.error("give --model NAME=PATH (one or more) or --mean-of NAME,NAME")
    import torch
    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    from cselab.evaluation.domain import load_inputs
    from cselab.evaluation.domain_tasks import KMEANS_INITS

    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.kmeans_seeds.split(",")]
    items = load_inputs(domain=args.domain).labels
    if items is None:
        parser.error(f"--domain {args.domain}: it has no labelled items to cluster")
    k = len(set(items.labels))
    for spec in args.model:
        name, _, path = spec.partition("=")
        model_path = kept_model_path(path)
        vectors = item_vectors(model_path, items.texts, args.eval_max_length)
        scores = {seed: round(100 * float(v_measure_score(
            items.labels, KMeans(n_clusters=k, n_init=KMEANS_INITS, random_state=seed).fit_predict(vectors))), 2)
            for seed in seeds}
        record = {"domain": args.domain, "model": name, "path": str(model_path), "v_measure": scores,
                  "mean": round(statistics.fmean(scores.values()), 2), "min": min(scores.values()),
                  "max": max(scores.values())}
        append_record(args.results, record, __file__, argv)
        print(f"{name}: V-measure mean {record['mean']:.2f} over {len(seeds)} k-means seeds "
              f"({record['min']:.2f} to {record['max']:.2f}); seed {STUDY_SEED}: {scores.get(STUDY_SEED)}", flush=True)


if __name__ == "__main__":
    main()
