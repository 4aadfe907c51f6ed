"""Markdown tables rendered from results records, never typed by hand: the protocol table (methods x tasks), the
seeds table with its paired tests and the loss-term ablation tables (what ``cselab report`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cselab.data.evalsets.sts import DEFAULT_TASKS, DISPLAY_NAMES
from cselab.errors import CselabError, UsageError
from cselab.research.reporting.markdown import fmt, markdown_table, mean_std, short_commit

TASK_COLUMNS = (
    *((task, DISPLAY_NAMES[task]) for task in DEFAULT_TASKS),
    ("avg-available", "avg"),
)


def protocol_table(records: Sequence[dict[str, Any]]) -> str:
    """Methods x tasks (test scores of the dev-selected checkpoint), plus dev, cost and provenance."""
    header = ["method", "variant", "seed", "steps", "prec.", "dev start", "dev best",
              *[name for _, name in TASK_COLUMNS], "wall s", "sent/s", "peak MB", "commit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        scores = r.get("scores", {})
        row = [r.get("method", "?"), r.get("variant") or "", _cell(r.get("seed")), _cell(r.get("steps")),
               r.get("precision") or "", fmt(scores.get("stsb_dev_start")), fmt(scores.get("stsb_dev_best")),
               *[fmt(scores.get(key)) for key, _ in TASK_COLUMNS],
               fmt(r.get("wall_s"), 0), fmt(r.get("train_sentences_per_s"), 0), fmt(r.get("peak_mem_mb"), 0),
               short_commit(str(r.get("git", "")))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


# -- seeds and ablations ---------------------------------------------------------------------------------
def record_label(record: dict[str, Any]) -> str:
    """The configuration a record belongs to: ``method/variant``, or ``method`` when the variant is empty."""
    method, variant = str(record.get("method", "?")), str(record.get("variant") or "")
    return f"{method}/{variant}" if variant else method


def resolve_configuration(records: Sequence[dict[str, Any]], key: str) -> str:
    """The label (:func:`record_label`) named by ``key``: a full label, or a bare variant that only one
    method uses. Raises :class:`CselabError` naming the available labels otherwise."""
    labels = list(dict.fromkeys(record_label(r) for r in records))
    if key in labels:
        return key
    matches = list(dict.fromkeys(record_label(r) for r in records if (r.get("variant") or "") == key and key))
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise CselabError(f"variant {key!r} is used by several methods; name one of: {', '.join(matches)}")
    raise CselabError(f"no records for configuration {key!r}; recorded: {', '.join(labels) or 'none'}")


def check_two_configurations(a_label: str, b_label: str) -> None:
    """A paired test needs two configurations: one compared with itself (t is nan) is refused."""
    if a_label == b_label:
        raise UsageError(f"--compare names {a_label} twice: a configuration compared with itself; "
                         "name two configurations")


def records_by_seed(records: Sequence[dict[str, Any]], label: str) -> dict[int, dict[str, Any]]:
    """``seed -> record`` of one configuration (seeds sorted; a later record of a seed supersedes an earlier one).
    A record without a seed (an untouched checkpoint, scored once) belongs to no seed and is left out."""
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        if record_label(r) == label and r.get("seed") is not None:
            out[int(r["seed"])] = r
    return dict(sorted(out.items()))


def _score(record: dict[str, Any], metric: str) -> float | None:
    value = record.get("scores", {}).get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _configuration_rows(records: Sequence[dict[str, Any]], labels: Sequence[str]) -> list[list[str]]:
    rows = []
    for label in labels:
        by_seed = records_by_seed(records, label)
        cells = [mean_std([v for v in (_score(r, key) for r in by_seed.values()) if v is not None])
                 for key, _ in TASK_COLUMNS]
        rows.append([label, ", ".join(str(s) for s in by_seed), str(len(by_seed)), *cells])
    return rows


def seeds_table(records: Sequence[dict[str, Any]], a_variant: str | None = None, b_variant: str | None = None,
                *, comparisons: Sequence[tuple[str, str]] = (), metric: str = "avg-available",
                alternative: str = "two-sided") -> str:
    """Mean ± sample std (ddof = 1) over seeds of every configuration x task (JTCSE Fig. 6), and, for
    ``a_variant``/``b_variant`` and every pair of ``comparisons`` (configurations, see
    :func:`resolve_configuration`), a paired test of ``metric`` over the seeds both have
    (:func:`cselab.research.reporting.significance.paired_test`), one row per pair."""
    from cselab.research.reporting.significance import paired_test

    labels = list(dict.fromkeys(record_label(r) for r in records if r.get("seed") is not None))
    header = ["configuration", "seeds", "n", *[name for _, name in TASK_COLUMNS]]
    lines = markdown_table(header, _configuration_rows(records, labels))
    if (a_variant is None) != (b_variant is None):
        raise CselabError("a paired test needs two configurations (A and B)")
    pairs = [*([(a_variant, b_variant)] if a_variant is not None and b_variant is not None else []), *comparisons]
    if not pairs:
        return "\n".join(lines)
    rows = []
    for a_name, b_name in pairs:
        a_label, b_label = resolve_configuration(records, a_name), resolve_configuration(records, b_name)
        check_two_configurations(a_label, b_label)
        a = {s: _score(r, metric) for s, r in records_by_seed(records, a_label).items()}
        b = {s: _score(r, metric) for s, r in records_by_seed(records, b_label).items()}
        seeds = sorted(s for s in set(a) & set(b) if a[s] is not None and b[s] is not None)
        if len(seeds) < 2:
            raise CselabError(f"{a_label} and {b_label} share {len(seeds)} seed(s) with a {metric!r} score; "
                              "a paired test needs at least 2")
        test = paired_test({s: a[s] for s in seeds}, {s: b[s] for s in seeds}, alternative=alternative)
        wilcoxon = "-" if test.wilcoxon_pvalue is None else f"{test.wilcoxon_pvalue:.4f}"
        rows.append([a_label, b_label, ", ".join(map(str, seeds)), f"{test.mean_a:.2f}", f"{test.mean_b:.2f}",
                     f"{test.mean_diff:.2f}", f"{test.std_diff:.2f}", f"{test.t_statistic:.3f}", str(test.df),
                     f"{test.t_pvalue:.4f}", wilcoxon])
    lines += ["", f"Paired test on `{metric}` over matched seeds ({alternative}; Wilcoxon only from 6 seeds):", ""]
    lines += markdown_table(
        ["A", "B", "seeds", "mean A", "mean B", "mean A−B", "std A−B", "t", "df", "p (t-test)", "p (Wilcoxon)"], rows)
    return "\n".join(lines)


def ablation_table(records: Sequence[dict[str, Any]], terms: Sequence[str] | None = None, *,
                   method: str | None = None, metric: str = "avg-available") -> str:
    """One row per loss-term subset of a method (variants named ``term+term``), mean ± std over seeds per task.

    With ``terms`` (the method's ``Method.terms``) only variants that are subsets of them are shown, larger
    subsets first, and a column gives the change of ``metric`` against the variant with every term.
    ``method`` defaults to the only method in ``records``.
    """
    methods = list(dict.fromkeys(str(r.get("method")) for r in records))
    if method is None:
        if len(methods) != 1:
            raise CselabError(f"records hold several methods ({', '.join(methods)}); name one")
        method = methods[0]
    mine = [r for r in records if r.get("method") == method]
    variants = list(dict.fromkeys(str(r.get("variant") or "") for r in mine))
    if terms is not None:
        order = {t: i for i, t in enumerate(terms)}
        variants = [v for v in variants if v and all(t in order for t in v.split("+"))]
        variants.sort(key=lambda v: (-len(v.split("+")), [order[t] for t in v.split("+")]))
    if not variants:
        raise CselabError(f"no ablation records for method {method!r}")
    labels = [record_label({"method": method, "variant": v}) for v in variants]
    rows = _configuration_rows(mine, labels)
    header = ["variant", "seeds", "n", "best step", *[name for _, name in TASK_COLUMNS]]
    for row, v, label in zip(rows, variants, labels, strict=True):
        row[0] = v or "(none)"
        # the selected checkpoint's step per seed: 0 means no step beat the starting model on dev (for a twin
        # stage 2, the variant's loss terms never improved on the stage-1 pair)
        row.insert(3, "/".join(str(r.get("best_step", "?")) for r in records_by_seed(mine, label).values()))
    if terms is not None:
        full = "+".join(terms)

        def mean_of(variant: str) -> float | None:
            by_seed = records_by_seed(mine, record_label({"method": method, "variant": variant}))
            vals = [v for v in (_score(r, metric) for r in by_seed.values()) if v is not None]
            return sum(vals) / len(vals) if vals else None

        base = mean_of(full)
        header.append(f"Δ {metric} vs {full}")
        for row, v in zip(rows, variants, strict=True):
            m = mean_of(v)
            row.append("-" if base is None or m is None else f"{m - base:+.2f}")
    return "\n".join([f"Loss-term ablation of `{method}`:", "", *markdown_table(header, rows)])


def ablation_tables(records: Sequence[dict[str, Any]]) -> str:
    """:func:`ablation_table` of every method in ``records`` (terms from the method registry), one after another."""
    from cselab.methods import METHODS

    methods = list(dict.fromkeys(str(r.get("method")) for r in records))
    parts = [f"**{m}**\n\n" + ablation_table(records, tuple(METHODS.get(m).terms), method=m) for m in methods]
    return "\n\n".join(parts)
