"""A diagnostic, not a criterion: how like the teacher each model is on the labelled items a clustering domain
scores (its articles, at the study's 256 tokens), beside how well it clusters them.

The guard and the scores of ``lab.domain_study.neighbourhoods`` read the held-out part of the unlabelled text
(lines, and passages of random lines). On bbc-news a model came closer to the teacher there while it clustered the
articles worse. Read on the articles themselves, does it still come closer? If it does, no likeness to the teacher
would guard news, whatever text it was read on; if not, the held-out text is what hides the loss. This reads the
test items, so nothing here may select a model or a setting; it only says where the loss is.

    python -m lab.domain_study.article_likeness --domain bbc-news --model checkpoint=all-MiniLM-L6-v2 \
        --model s2=runs/domains-neighbourhoods/bbc-news/cselab-distill-sim-nb3-guarded-mixed-s2

One record per model in ``lab/results/article_likeness.jsonl``: ``neighbour_overlap`` and ``partition_agreement``
with the teacher's vectors of the items (at 4, 8, 16 clusters and at the number of labels, 3 k-means seeds), and
``v_measure`` against the labels (the number of labels, the same 3 seeds; mean x 100), the teacher's beside it.
``--table`` prints the records again, each score's change from the first model of its domain in brackets (the lab
book's table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from cselab.data.stores.jsonl import Schema, number, read_jsonl, text
from cselab.research.reporting.markdown import markdown_table
from lab.domain_study.clustering_seeds import add_model_arguments, item_vectors, kept_model_path
from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "article_likeness.jsonl"
TEACHER = "all-mpnet-base-v2"
SCORES = {"neighbour_overlap": ("neighbour overlap", 3), "partition_agreement": ("partition agreement (4, 8, 16)", 2),
          "partition_agreement_at_labels": ("partition agreement (the labels' number)", 2),
          "v_measure": ("V-measure", 2)}  # key: (column, decimals)
LIKENESS_RECORD = Schema("article likeness", {"domain": text(empty=False), "model": text(empty=False),
                                              **{key: number() for key in SCORES}},
                         required=("domain", "model", *SCORES))


def likeness_table(records: list[dict[str, Any]]) -> str:
    """The records as a table, a row per model; each score's change from the first record of the same domain (the
    reference, usually the checkpoint) in brackets."""
    first: dict[str, dict[str, Any]] = {}
    rows = []
    for record in records:
        reference = first.setdefault(record["domain"], record)
        cells = []
        for key, (_, decimals) in SCORES.items():
            value = record[key]
            change = "" if reference is record else f" ({value - reference[key]:+.{decimals}f})"
            cells.append(f"{value:.{decimals}f}{change}")
        rows.append([record["domain"], record["model"], *cells])
    return "\n".join(markdown_table(["domain", "model", *(label for label, _ in SCORES.values())], rows))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser, domain_required=False)
    parser.add_argument("--teacher", default=TEACHER)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true", help="print the records of --results and stop")
    args = parser.parse_args(argv)
    if args.table:
        from cselab.errors import CselabError

        try:
            records = read_jsonl(args.results, LIKENESS_RECORD)
        except CselabError as exc:
            parser.error(str(exc))
        if not records:
            parser.error(f"--table: no records in {args.results}")
        print(likeness_table(records))
        return
    if not args.domain or not args.model:
        parser.error("give --domain and --model NAME=PATH (one or more), or --table")
    import numpy as np
    import torch
    from sklearn.metrics import v_measure_score

    from cselab.evaluation.domain import load_inputs
    from lab.domain_study.neighbourhoods import (
        PARTITION_CLUSTERS,
        PARTITION_SEEDS,
        kmeans_partitions,
        neighbour_overlap,
        partition_agreement,
    )

    torch.set_num_threads(args.threads)
    items = load_inputs(domain=args.domain).labels
    if items is None:
        parser.error(f"--domain {args.domain}: it has no labelled items to cluster")
    k = len(set(items.labels))

    def vectors_of(path: str) -> np.ndarray:
        return item_vectors(kept_model_path(path), items.texts, args.eval_max_length, batch_size=32)

    teacher = vectors_of(args.teacher)
    teacher_parts = kmeans_partitions(teacher)
    teacher_at_labels = kmeans_partitions(teacher, clusters=(k,))
    teacher_v = 100 * statistics.fmean(v_measure_score(items.labels, p) for p in teacher_at_labels)
    for spec in args.model:
        name, _, path = spec.partition("=")
        vectors = vectors_of(path)
        at_labels = kmeans_partitions(vectors, clusters=(k,))
        record = {
            "domain": args.domain, "model": name, "path": path, "teacher": args.teacher, "items": len(items.texts),
            "neighbour_overlap": round(neighbour_overlap(vectors, teacher), 4),
            "partition_agreement": round(partition_agreement(kmeans_partitions(vectors), teacher_parts), 2),
            "partition_agreement_at_labels": round(partition_agreement(at_labels, teacher_at_labels), 2),
            "v_measure": round(100 * statistics.fmean(v_measure_score(items.labels, p) for p in at_labels), 2),
            "teacher_v_measure": round(teacher_v, 2), "clusters": [*PARTITION_CLUSTERS, k],
            "kmeans_seeds": list(PARTITION_SEEDS)}
        append_record(args.results, record, __file__, argv)
        print(f"{name}: neighbour overlap {record['neighbour_overlap']:.3f}, partition agreement "
              f"{record['partition_agreement']:.2f} (at {k} clusters {record['partition_agreement_at_labels']:.2f}), "
              f"V-measure {record['v_measure']:.2f} (the teacher's {record['teacher_v_measure']:.2f})", flush=True)


if __name__ == "__main__":
    main()
