"""The adaptation protocol's tables (lab/books/adapt_protocol.md), rendered from its records.

:func:`adapt_table`: per training text, one row per record (the untouched checkpoint first, as every row's
reference). :func:`adapt_seeds_table`: per training text, every configuration with several seeds, its mean ±
sample std over seeds and paired tests against the baseline configuration (tuned SimCSE) and the checkpoint.

Decisions
---------
* A column whose test sentences occur in the training text (``training_text.not_held_out``) is marked ``†`` and
  left out of the average, which spans the held-out columns only: no average mixes held-out and seen test sets.
  A record that does not say what its text holds counts no column as held out.
* The checkpoint is one deterministic model (no seed), so "paired against the checkpoint" is the one-sample
  t-test of the per-seed differences ``a_s - c`` (what ``scipy.stats.ttest_rel`` computes against a constant);
  the table says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cselab.data.stores.jsonl import read_jsonl
from cselab.errors import CselabError
from cselab.research.reporting.markdown import fmt, markdown_table, mean_std, short_commit
from cselab.research.reporting.tables import TASK_COLUMNS, record_label, records_by_seed
from cselab.training.records import RESULTS

ADAPT = RESULTS.with_required("adapt")  # the protocol's records: results records of adaptation runs


def read_adapt_records(path: str | Path, *, allow_empty: bool = True) -> list[dict[str, Any]]:
    """The protocol's records in ``path``, each checked against :data:`ADAPT` (a bad line names the file, the line
    and the field); with ``allow_empty`` false a file without records is refused too."""
    records = read_jsonl(path, ADAPT)
    if not records and not allow_empty:
        raise CselabError(f"{path} holds no records; give a file that the adaptation protocol recorded to")
    return records


NOT_HELD_OUT_MARK = "†"
CHECKPOINT_METHOD = "checkpoint"
"""The ``method`` of the untouched checkpoint's record (``lab/adapt_protocol/adapt_checkpoint.py``): no training
text."""

_TASKS = [key for key, _ in TASK_COLUMNS if key != "avg-available"]
_NAMES = dict(TASK_COLUMNS)
_ORDER = ["stsb", *[t for t in _TASKS if t != "stsb"]]


def _effective(record: dict[str, Any], section: str, key: str) -> Any:
    """A key of the record's effective configuration (None where the record does not say; a null section or
    object counts as absent: read_records checked that each present one is an object)."""
    effective = (record.get("config") or {}).get("effective") or {}
    return (effective.get(section) or {}).get(key)


def training_text_of(record: dict[str, Any]) -> tuple[str, list[str] | None]:
    """(training text name, tasks it holds sentences of); ``None`` when the record does not say (unknown)."""
    text = record.get("training_text") or {}
    corpus = str(text.get("corpus") or _effective(record, "data", "corpus") or "?")
    not_held_out = text.get("not_held_out")
    return corpus, (list(not_held_out) if isinstance(not_held_out, list) else None)


def _number(value: Any) -> str:
    """A hyper-parameter as written (``1e-05``, ``0.2``), ``-`` when missing."""
    return f"{value:g}" if isinstance(value, (int, float)) else "-"


def held_out_average(record: dict[str, Any], held_out: Sequence[str]) -> float | None:
    """The mean of ``record``'s held-out test columns (each rounded to 2 decimals as shown), ``None`` if any
    is missing."""
    values = [record.get("scores", {}).get(t) for t in held_out]
    if not values or not all(isinstance(v, (int, float)) for v in values):
        return None
    return round(sum(round(float(v), 2) for v in values) / len(values), 2)


def _variant(record: dict[str, Any]) -> str:
    """The variant, with an ensemble's chosen weight (kept out of the variant so seeds group together)."""
    variant = str(record.get("variant") or "")
    weight = (record.get("ensemble") or {}).get("weight")
    return f"{variant} [w {weight:g}]" if isinstance(weight, (int, float)) else variant


def _record_rows(rows: Sequence[dict[str, Any]], held_out: Sequence[str]) -> list[list[str]]:
    body = []
    for r in rows:
        scores = r.get("scores", {})
        seed = r.get("seed")
        body.append([r.get("method", "?"), _variant(r), "-" if seed is None else str(seed), str(r.get("steps", "")),
                     str(r.get("precision") or "-"), _number(_effective(r, "train", "lr")),
                     _number(_effective(r, "method_options", "temperature")),
                     str(r.get("best_step", "-")), fmt(scores.get("stsb_dev_start")),
                     fmt(scores.get("stsb_dev_best")), *[fmt(scores.get(t)) for t in _ORDER],
                     fmt(held_out_average(r, held_out)), fmt(r.get("wall_s"), 0),
                     short_commit(str(r.get("git", "")))])
    return body


def checkpoint_for(record: dict[str, Any], checkpoints: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The untouched checkpoint ``record``'s model started from: the checkpoint row of its backbone; a backbone that
    is a directory (a trained run, e.g. a student starting from an adapted MiniLM) or none started from the
    protocol's checkpoint (the first recorded); a named backbone with no checkpoint row has none (never another
    model's)."""
    if not checkpoints:
        return None
    backbone = str(record.get("backbone") or "")
    for checkpoint in checkpoints:
        if backbone and backbone == str(checkpoint.get("backbone") or ""):
            return checkpoint
    return checkpoints[0] if not backbone or "/" in backbone else None


def _checkpoint_label(checkpoint: dict[str, Any], checkpoints: Sequence[dict[str, Any]]) -> str:
    name = "" if checkpoint is checkpoints[0] else f" {Path(str(checkpoint.get('backbone'))).name}"
    return f"{CHECKPOINT_METHOD}{name} (one model: one-sample t-test)"


def _seed_summary(rows: Sequence[dict[str, Any]], held_out: Sequence[str], avg_name: str,
                  checkpoints: Sequence[dict[str, Any]],
                  baseline: tuple[str, Sequence[dict[str, Any]]] | None) -> list[str]:
    """Mean ± std over seeds of every configuration with several seeds, and its paired tests."""
    from cselab.research.reporting.significance import paired_test

    labels = [label for label in dict.fromkeys(record_label(r) for r in rows)
              if len(records_by_seed(rows, label)) >= 2]
    if not labels:
        return []
    metrics = {"STS-B": lambda r: r.get("scores", {}).get("stsb"), avg_name: lambda r: held_out_average(r, held_out)}
    summary = []
    for label in labels:
        by_seed = records_by_seed(rows, label)
        cells = [mean_std([float(v) for v in (f(r) for r in by_seed.values()) if isinstance(v, (int, float))])
                 for f in [lambda r: r.get("scores", {}).get("stsb_dev_best"), *metrics.values()]]
        summary.append([label, ", ".join(map(str, by_seed)), *cells])
    lines = ["", "Over seeds (mean ± sample std):", "",
             *markdown_table(["configuration", "seeds", "dev best", *metrics], summary)]
    tests = []
    for label in labels:
        a_by_seed = records_by_seed(rows, label)
        against = []
        if baseline is not None and label != baseline[0]:
            base = records_by_seed(rows, baseline[0])  # the baseline on this text, else on the text it ran on
            b_label = baseline[0]
            if len(base) < 2:
                base = records_by_seed(baseline[1], baseline[0])
                b_label = f"{baseline[0]} (on `{training_text_of(next(iter(base.values())))[0]}`)" if base else ""
            if len(base) >= 2:
                against.append((b_label, base))
        checkpoint = checkpoint_for(next(iter(a_by_seed.values())), checkpoints)
        if checkpoint is not None:
            against.append((_checkpoint_label(checkpoint, checkpoints), None))
        for b_label, b_by_seed in against:
            for metric, value in metrics.items():
                a = {s: value(r) for s, r in a_by_seed.items()}
                b = ({s: value(r) for s, r in b_by_seed.items()} if b_by_seed is not None
                     else dict.fromkeys(a_by_seed, value(checkpoint)))
                seeds = sorted(s for s in set(a) & set(b)
                               if isinstance(a[s], (int, float)) and isinstance(b[s], (int, float)))
                if len(seeds) < 2:
                    continue
                with warnings.catch_warnings():  # scipy warns when the differences nearly agree; the p-value stands
                    warnings.simplefilter("ignore", RuntimeWarning)
                    t = paired_test({s: float(a[s]) for s in seeds}, {s: float(b[s]) for s in seeds})
                tests.append([label, b_label, metric, ", ".join(map(str, seeds)), f"{t.mean_a:.2f}", f"{t.mean_b:.2f}",
                              f"{t.mean_diff:+.2f}", f"{t.std_diff:.2f}", f"{t.t_statistic:.2f}", str(t.df),
                              f"{t.t_pvalue:.4f}"])
    if tests:
        lines += ["", "Paired t-tests over matched seeds (two-sided):", "",
                  *markdown_table(["A", "B", "score", "seeds", "mean A", "mean B", "A − B", "std (A − B)", "t", "df",
                                   "p"], tests)]
    return lines


def _groups(
        records: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[tuple[str, list[dict[str, Any]], list[str], set[str], str]]]:
    """The checkpoints' records (the last of each backbone, in the order first recorded), and per training text:
    (name, records, held-out columns, seen columns, heading)."""
    latest: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("method") == CHECKPOINT_METHOD:
            latest[str(r.get("backbone") or "")] = r
    checkpoints = list(latest.values())
    by_text: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("method") != CHECKPOINT_METHOD:
            by_text.setdefault(training_text_of(r)[0], []).append(r)
    groups = []
    for corpus, rows in by_text.items():
        known = [training_text_of(r)[1] for r in rows]
        unknown = any(k is None for k in known)
        seen = set(_TASKS) if unknown else {t for k in known for t in (k or [])}
        held_out = [t for t in _ORDER if t not in seen]
        sizes = sorted({(r.get("training_text") or {}).get("sentences") for r in rows} - {None})
        size = f"{', '.join(f'{n:,}' for n in sizes)} sentences; " if sizes else ""
        if unknown:
            note = "which test sets it holds is not recorded: no column counts as held out"
        elif seen:
            note = (f"{NOT_HELD_OUT_MARK} = not held out (its test sentences are in the text): "
                    + ", ".join(_NAMES[t] for t in _ORDER if t in seen))
        else:
            note = "every column held out"
        groups.append((corpus, rows, held_out, seen, f"**Training text `{corpus}`** ({size}{note})"))
    return checkpoints, groups


def adapt_table(records: Sequence[dict[str, Any]]) -> str:
    """The adaptation protocol's results: one table per training text, one row per record, STS-B test first,
    the untouched checkpoints' records (if any) as the first rows of each."""
    checkpoints, groups = _groups(records)
    parts = []
    for _, rows, held_out, seen, heading in groups:
        header = ["method", "variant", "seed", "steps", "prec.", "lr", "τ", "best step", "dev start", "dev best",
                  *[_NAMES[t] + (f" {NOT_HELD_OUT_MARK}" if t in seen else "") for t in _ORDER],
                  f"avg held-out ({len(held_out)})", "wall s", "commit"]
        shown = [*checkpoints, *rows]
        parts.append("\n".join([heading, "", *markdown_table(header, _record_rows(shown, held_out))]))
    return "\n\n".join(parts)


def adapt_seeds_table(records: Sequence[dict[str, Any]], *, baseline: str | None = None) -> str:
    """Per training text, every configuration with several seeds: mean ± sample std over seeds, and paired tests
    against ``baseline`` (a configuration label, :func:`~cselab.research.reporting.tables.record_label`) and against the
    untouched checkpoint it started from (:func:`checkpoint_for`). The baseline is taken from the same training
    text where it ran there, else from the text where it has the most seeds (named in the B column): a method that
    cannot use a text (IFCL needs translations) is still paired with it, each on its own text, over the same
    seeds."""
    checkpoints, groups = _groups(records)
    # the baseline's records: on its own training text first (a method with its own text, IFCL, is paired with it)
    base = None
    if baseline is not None:
        base_rows = max((rows for _, rows, *_ in groups), key=lambda rows: len(records_by_seed(rows, baseline)))
        base = (baseline, base_rows)
    parts = []
    for _, rows, held_out, _, heading in groups:
        lines = _seed_summary(rows, held_out, f"avg held-out ({len(held_out)})", checkpoints, base)
        if lines:
            parts.append("\n".join([heading, *lines]))
    return "\n\n".join(parts) or "No configuration of the adaptation protocol has several seeds yet."
