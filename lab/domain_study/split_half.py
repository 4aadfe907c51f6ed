"""Split-half retrieval on a domain's adaptation text: a label-free measure of how well a model encodes that text.

    python -m lab.domain_study.split_half --domains stsb,linux-man --models all-MiniLM-L6-v2,all-mpnet-base-v2

Each distinct line of ``train.txt`` with at least ``--min-words`` words (up to ``--lines`` of them, drawn with seed 0)
is cut at its middle word; the first half is a query, the second half a document, and each query ranks every second
half by cosine. A model's score is the mean reciprocal rank of each query's own second half (x100), with top-1
accuracy beside it. With two or more models, each model after the first gets a paired bootstrap of its lead over the
first, over the lines. One record per domain goes to ``lab/results/split_half.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from lab.domain_study.query_bootstrap import paired_bootstrap, unit_rows
from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "split_half.jsonl"
ALL_DOMAINS = "stsb,linux-man,bbc-news,tweets,brown-genres,linux-man-overviews"


def split_halves(lines: Sequence[str], min_words: int, limit: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """The first and second halves (cut at the middle word, the longer half second) of up to ``limit`` distinct
    lines of at least ``min_words`` words, drawn with ``seed`` in the lines' first-seen order."""
    kept = list(dict.fromkeys(line.strip() for line in lines if len(line.split()) >= min_words))
    if len(kept) > limit:
        picked = np.sort(np.random.default_rng(seed).choice(len(kept), size=limit, replace=False))
        kept = [kept[i] for i in picked]
    words = [line.split() for line in kept]
    return [" ".join(w[: len(w) // 2]) for w in words], [" ".join(w[len(w) // 2:]) for w in words]


def reciprocal_ranks(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """1 / the rank of document i among all documents for query i, by the rows' dot products (normalised rows:
    cosine). A tie with the right document counts against it."""
    similarity = queries @ documents.T
    own = np.diag(similarity)
    return 1.0 / (similarity >= own[:, None]).sum(axis=1)  # the right document itself is one of them


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default=ALL_DOMAINS)
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2",
                        help="comma-separated fetched names or model directories; leads are over the first")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--min-words", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", default=str(RESULTS))
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    import torch

    from cselab.data.evalsets.domains import train_text
    from cselab.models.sentence_model import load_model

    torch.set_num_threads(args.threads)
    names = args.models.split(",")
    halves = {}
    for domain in args.domains.split(","):
        lines = train_text(domain).read_text(encoding="utf-8").splitlines()
        halves[domain] = split_halves(lines, args.min_words, args.lines)
    per_line: dict[str, dict[str, np.ndarray]] = {domain: {} for domain in halves}
    for name in names:
        model = load_model(name, max_length=args.max_length)
        model.eval()
        with torch.inference_mode():
            for domain, (first, second) in halves.items():
                queries, documents = unit_rows(model.encode(first)), unit_rows(model.encode(second))
                per_line[domain][name] = reciprocal_ranks(queries, documents)
        del model
    for domain, ranks in per_line.items():
        scores = {name: {"mrr": round(100 * float(r.mean()), 4), "top1": round(100 * float((r == 1).mean()), 4)}
                  for name, r in ranks.items()}
        leads = {name: paired_bootstrap(100 * (ranks[name] - ranks[names[0]])) for name in names[1:]}
        record = {"domain": domain, "lines": len(halves[domain][0]), "min_words": args.min_words,
                  "max_length": args.max_length, "sample_seed": 0, "models": names, "scores": scores,
                  "leads_over_first": leads}
        append_record(args.results, record, __file__, argv)
        text = ", ".join(f"{name} {s['mrr']:.2f} (top-1 {s['top1']:.2f})" for name, s in scores.items())
        lead = "; ".join(f"{name} {c['mean']:+.2f} ({c['low']:+.2f} to {c['high']:+.2f})" for name, c in leads.items())
        print(f"{domain}, {record['lines']} lines: {text}; lead over {names[0]}: {lead}", flush=True)


if __name__ == "__main__":
    main()
