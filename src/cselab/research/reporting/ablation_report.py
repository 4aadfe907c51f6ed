"""Summary of a loss-term ablation: per variant the mean and sample std over its seeds, as PNG, Markdown and
JSON. The runs themselves are :mod:`cselab.research.experiments.ablation`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cselab.errors import CselabError
from cselab.research.reporting.report_json import write_report_json
from cselab.research.reporting.significance import summarize_seeds


@dataclass
class AblationReport:
    """Per variant: ``metric`` mean and sample std over its seeds; the Markdown table and the files written."""

    method: str
    terms: tuple[str, ...]
    metric: str
    means: dict[str, float]
    stds: dict[str, float]
    seeds: dict[str, list[int]]
    markdown: str
    files: dict[str, str]


def ablation_report(records: Sequence[dict[str, Any]], terms: Sequence[str], out_dir: str | Path, *,
                    method: str | None = None, metric: str = "avg-available") -> AblationReport:
    """The loss-term ablation of a method: ``ablation.md`` (:func:`cselab.research.reporting.tables.ablation_table`),
    ``ablation.png`` (one bar per variant, mean ± sample std of ``metric``) and ``ablation.json``."""
    from cselab.research.reporting.plots import plot_ablation
    from cselab.research.reporting.tables import ablation_table, records_by_seed

    markdown = ablation_table(records, terms, method=method, metric=metric)
    method = method or str(records[0].get("method"))
    order = {t: i for i, t in enumerate(terms)}
    variants = [v for v in dict.fromkeys(str(r.get("variant") or "") for r in records if r.get("method") == method)
                if v and all(t in order for t in v.split("+"))]
    variants.sort(key=lambda v: (-len(v.split("+")), [order[t] for t in v.split("+")]))
    means, stds, seeds = {}, {}, {}
    for v in variants:
        by_seed = records_by_seed(records, f"{method}/{v}")
        values = {s: r.get("scores", {}).get(metric) for s, r in by_seed.items()}
        values = {s: float(x) for s, x in values.items() if isinstance(x, (int, float))}
        if values:
            summary = summarize_seeds(values)
            means[v], stds[v], seeds[v] = summary.mean, summary.std, sorted(values)
    if not means:
        raise CselabError(f"no ablation record of {method!r} has a {metric!r} score")
    out = Path(out_dir)
    plot_ablation(means, out / "ablation.png", stds=stds, ylabel=f"{metric} (Spearman x 100)",
                  title=f"Loss-term ablation of {method}")
    (out / "ablation.md").write_text(markdown + "\n", encoding="utf-8")
    files = {"plot": str(out / "ablation.png"), "markdown": str(out / "ablation.md"),
             "json": str(out / "ablation.json")}
    report = AblationReport(method=method, terms=tuple(terms), metric=metric, means=means, stds=stds, seeds=seeds,
                            markdown=markdown, files=files)
    write_report_json(out / "ablation.json", {"analysis": "ablation", **asdict(report)})
    return report
