"""Summary of one configuration over seeds: mean and sample std per configuration (JTCSE Fig. 6) and the
paired test between two configurations over their matched seeds (JTCSE Fig. 8), as PNG, Markdown and JSON.
The runs themselves are :mod:`cselab.research.experiments.seeds`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cselab.errors import CselabError
from cselab.research.reporting.plots import plot_seed_summary
from cselab.research.reporting.report_json import write_report_json
from cselab.research.reporting.significance import paired_test, summarize_seeds


@dataclass
class SeedsReport:
    """Per configuration: ``metric`` per seed, its mean and sample std; the paired test of A vs B when
    asked (``None`` otherwise); the Markdown table and the files written."""

    metric: str
    scores: dict[str, dict[int, float]]
    summaries: dict[str, dict[str, float]]
    paired: dict[str, Any] | None
    markdown: str
    files: dict[str, str]


def seeds_report(records: Sequence[dict[str, Any]], out_dir: str | Path, *, a_variant: str | None = None,
                 b_variant: str | None = None, metric: str = "avg-available",
                 alternative: str = "two-sided") -> SeedsReport:
    """Mean and sample std over seeds per configuration (JTCSE Fig. 6) and a paired test of ``metric``
    between configurations A and B over their matched seeds (JTCSE Fig. 8).

    Writes ``seeds.png`` (mean ± std with every seed), ``seeds.md`` (the table of
    :func:`cselab.research.reporting.tables.seeds_table`) and ``seeds.json`` into ``out_dir``.
    """
    from cselab.research.reporting.tables import (
        check_two_configurations,
        record_label,
        records_by_seed,
        resolve_configuration,
        seeds_table,
    )

    if not records:
        raise CselabError("no records to summarise")
    out = Path(out_dir)
    markdown = seeds_table(records, a_variant, b_variant, metric=metric, alternative=alternative)
    scores: dict[str, dict[int, float]] = {}
    for label in dict.fromkeys(record_label(r) for r in records):
        values = {s: r.get("scores", {}).get(metric) for s, r in records_by_seed(records, label).items()}
        values = {s: float(v) for s, v in values.items() if isinstance(v, (int, float))}
        if values:
            scores[label] = values
    if not scores:
        raise CselabError(f"no record has a {metric!r} score")
    summaries = {}
    for label, values in scores.items():
        s = summarize_seeds(values)
        summaries[label] = {"mean": s.mean, "std": s.std, "n": s.n}
    paired = None
    if a_variant is not None and b_variant is not None:
        a_label, b_label = resolve_configuration(records, a_variant), resolve_configuration(records, b_variant)
        check_two_configurations(a_label, b_label)
        common = sorted(set(scores.get(a_label, {})) & set(scores.get(b_label, {})))
        test = paired_test({s: scores[a_label][s] for s in common}, {s: scores[b_label][s] for s in common},
                           alternative=alternative)
        paired = {"a": a_label, "b": b_label, "seeds": common, **asdict(test),
                  "significant_at_0.05": test.significant(0.05)}
    plot_seed_summary({k: [v[s] for s in sorted(v)] for k, v in scores.items()}, out / "seeds.png",
                      ylabel=f"{metric} (Spearman x 100)")
    (out / "seeds.md").write_text(markdown + "\n", encoding="utf-8")
    files = {"plot": str(out / "seeds.png"), "markdown": str(out / "seeds.md"), "json": str(out / "seeds.json")}
    report = SeedsReport(metric=metric, scores=scores, summaries=summaries, paired=paired, markdown=markdown,
                         files=files)
    write_report_json(out / "seeds.json", {"analysis": "seeds", **asdict(report)})
    return report
