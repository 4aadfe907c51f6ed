"""How large a change a retrieval domain's queries can tell apart: each query's nDCG@10 for the untouched model and
for domain-study runs mixed with it at a weight (as ``interpolate`` scores them), and a paired bootstrap over the
queries of each run's change against the untouched model.

    python -m lab.domain_study.query_bootstrap --weight 0.75 \\
        --runs linux-man-overviews/cselab-distill-pcahead-cos-general-s1,...

nDCG@10 is computed here (cosine similarity of mean-pooled vectors, relevance from qrels, the ideal DCG over the
query's relevant documents), not by mteb, so its mean is printed beside the run's recorded score as a check of both.
Every run of one command must be of the same domain; one record per run goes to ``lab/results/query_bootstrap.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "query_bootstrap.jsonl"
RESAMPLES = 10_000
CUTOFF = 10


def ndcg_at_k(similarity: np.ndarray, doc_ids: Sequence[str], relevant: Sequence[dict[str, int]],
              k: int = CUTOFF) -> np.ndarray:
    """Each query's nDCG@k: ``similarity`` is ``[queries, documents]``, ``relevant[i]`` query i's graded relevance by
    document id. Documents are ranked by similarity (ties by their order in ``doc_ids``)."""
    ranked = np.argsort(-similarity, axis=1, kind="stable")[:, :k]  # stable: ties keep the documents' order
    scores = np.zeros(len(relevant))
    for i, (rel, order) in enumerate(zip(relevant, ranked, strict=True)):
        dcg = sum(rel.get(doc_ids[j], 0) / np.log2(rank + 2) for rank, j in enumerate(order))
        ideal = sum(g / np.log2(rank + 2) for rank, g in enumerate(sorted(rel.values(), reverse=True)[:k]))
        scores[i] = dcg / ideal if ideal > 0 else 0.0
    return scores


def paired_bootstrap(change: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, float]:
    """The mean of ``change`` (one value per query) and its 95% percentile interval over ``resamples`` resamples of
    the queries, with the share of resamples whose mean is below zero."""
    rng = np.random.default_rng(seed)
    means = change[rng.integers(0, len(change), size=(resamples, len(change)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": float(change.mean()), "low": float(low), "high": float(high),
            "below_zero": float((means < 0).mean())}


def unit_rows(vectors: Any) -> np.ndarray:
    """``vectors`` (a tensor or an array) as float64 rows of length one."""
    array = np.asarray(vectors.float().cpu() if hasattr(vectors, "float") else vectors, dtype=np.float64)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="comma-separated DOMAIN/CONFIGURATION-sSEED of one domain")
    parser.add_argument("--weight", type=float, default=0.75, help="the run's share of the mixed weights")
    parser.add_argument("--eval-max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    import torch

    from cselab.data.evalsets.domains import domain_files, get_domain
    from cselab.evaluation.domain_files import read_retrieval
    from cselab.models.sentence_model import load_model
    from lab.domain_study.interpolate import load_mix, untouched_start
    from lab.domain_study.score_suite import DOMAIN_RUNS, domain_run_model

    torch.set_num_threads(args.threads)
    found = [domain_run_model(spec, DOMAIN_RUNS) for spec in args.runs.split(",")]
    domains = {origin["domain"] for _, _, origin in found}
    if len(domains) != 1 or get_domain(next(iter(domains))).main_task != "retrieval":
        raise SystemExit(f"--runs: runs of one retrieval domain, got {', '.join(sorted(domains))}")
    domain = domains.pop()
    task = read_retrieval(domain_files(domain)["retrieval"])
    query_ids = [q for q in task.queries if task.qrels.get(q)]
    doc_ids = list(task.corpus)
    relevant = [task.qrels[q] for q in query_ids]

    def per_query(model: Any) -> np.ndarray:
        model.eval()
        with torch.inference_mode():
            queries = unit_rows(model.encode([task.queries[q] for q in query_ids]))
            docs = unit_rows(model.encode([task.corpus[d] for d in doc_ids]))
        return ndcg_at_k(queries @ docs.T, doc_ids, relevant)

    model, untouched_state, _ = untouched_start(found[0][1], args.eval_max_length)
    untouched = per_query(model)
    print(f"{domain}: {len(query_ids)} queries; the untouched model {100 * untouched.mean():.2f}")
    for spec, path, origin in found:
        adapted = load_model(str(path), max_length=args.eval_max_length).state_dict()
        scores = per_query(load_mix(model, untouched_state, adapted, args.weight))
        change = paired_bootstrap(100 * (scores - untouched))
        record = {"domain": domain, "run": spec, "seed": origin["seed"], "weight": args.weight,
                  "queries": len(query_ids), "untouched": round(100 * float(untouched.mean()), 4),
                  "mixed": round(100 * float(scores.mean()), 4), "change": change, "resamples": RESAMPLES,
                  "eval_max_length": args.eval_max_length}
        append_record(args.results, record, __file__, argv)
        print(f"{spec} at {args.weight:g}: {record['mixed']:.2f}, change {change['mean']:+.2f} "
              f"(95% over the queries: {change['low']:+.2f} to {change['high']:+.2f}; below zero in "
              f"{100 * change['below_zero']:.1f}% of resamples)", flush=True)


if __name__ == "__main__":
    main()
