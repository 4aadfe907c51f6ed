"""What ``cselab adapt`` leaves for the user: the before/after figures in the saved model's card, ``adapt-report.md``
with its picture, and the summary it prints."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.adaptation.plan import PLOT_FILE, REPORT_FILE, mixed_phrase
from cselab.data.stores.jsonl import read_log
from cselab.figures import new_figure, save_figure
from cselab.fileio import write_atomic, write_json_atomic
from cselab.models.model_card import adapted_teacher_phrase


def annotate_model(model_dir: Path, summary: dict[str, Any]) -> None:
    """Put the adaptation (before/after figures) into the saved model's description and card."""
    from cselab.models.model_card import CARD_FILE, model_card

    file = model_dir / "cselab.json"
    description = json.loads(file.read_text())
    description["adaptation"] = {k: summary[k] for k in ("text", "sentences", "teacher", "selection", "best_step",
                                                        "mix", "adapted_teacher", "before", "after") if k in summary}
    write_json_atomic(file, description)
    write_atomic(model_dir / CARD_FILE, model_card(description))


def scores_lost(before: Mapping[str, float], after: Mapping[str, float]) -> str | None:
    """A line saying which of the user's scores the model handed back lost against the untouched model (every score
    is higher-is-better), or None when none did. Label-free selection cannot foresee such a loss (the teacher may be
    the weaker model on the user's task), so the user's own labels are the one place to catch it."""
    lost = [f"{key} {old:.2f} -> {after[key]:.2f}" for key, old in before.items()
            if key in after and after[key] < old]
    if not lost:
        return None
    return (f"on your labelled data the model handed back scores below the untouched model ({'; '.join(lost)}): "
            "for this task keep the untouched model, or try another recipe (--task, --recipe)")


# what the warning of a teacher that does not lead advises (the domain study's check on linux-man-overviews)
TEACHER_BEHIND_ADVICE = "stop now (Ctrl-C) and try --no-teacher, or keep the untouched model"


def teacher_not_ahead(before: Mapping[str, float], teacher_scores: Mapping[str, float], teacher: str) -> str | None:
    """A line saying which of the user's scores the teacher does not lead the untouched model on (every score is
    higher-is-better; a tie is no lead), or None when it leads on all. Where the teacher was behind on the task, its
    distillation made the model worse, and no label-free signal foresaw it; the user's labels can, before training."""
    behind = [f"{key} {teacher_scores[key]:.2f} against {old:.2f}" for key, old in before.items()
              if key in teacher_scores and teacher_scores[key] <= old]
    if not behind:
        return None
    return (f"on your labelled data the teacher ({teacher}) does not score above the untouched model "
            f"({'; '.join(behind)}), so distilling it may make the model worse: {TEACHER_BEHIND_ADVICE}")


CRITERION_NAMES = {"held-out/-distillation-loss": "held-out distillation loss", "held-out/-infonce": "held-out InfoNCE",
                   "teacher-agreement/dev": "agreement with the teacher (Spearman x 100)",
                   "held-out/-guarded-distillation-loss": "held-out distillation loss / step 0's (lines, passages)"}


def selection_curve(output_dir: Path, criterion: str | None) -> list[tuple[int, float]]:
    """The selection criterion at each evaluated step, as ``metrics.jsonl`` logged it (``dev``), with a loss shown
    as the loss (the trainer logs a loss negated, so that higher is better)."""
    sign = -1.0 if criterion and "/-" in criterion else 1.0
    return [(int(r["step"]), sign * float(r["dev"])) for r in read_log(output_dir / "metrics.jsonl") if "dev" in r]


def write_report(output_dir: Path, summary: dict[str, Any]) -> Path:
    """``adapt-report.md`` and, where there is something to draw, ``adapt-report.png``: the scores before/after on
    the user's labelled data and the curve of the selection criterion (when more than one step was scored)."""
    criterion = summary.get("criterion")
    curve = selection_curve(output_dir, criterion)
    if len(curve) < 2:
        curve = []  # a fixed budget scores its last step only: nothing to draw
    name = CRITERION_NAMES.get(str(criterion), str(criterion or summary["selection"]))
    lower_is_better = bool(criterion and "/-" in criterion)
    drawn = plot_adaptation(summary.get("before", {}), summary.get("after", {}), curve, name, lower_is_better,
                            output_dir / PLOT_FILE, summary.get("teacher_scores") or {})
    lines = ["# cselab adapt", "", f"- text: `{summary['text']}` ({summary['sentences']} sentences, "
             f"{summary['held_out']} held out)", f"- model: {summary['model']}",
             f"- teacher: {summary['teacher'] or 'none'}" + (f" (recipe {summary['recipe']})" if summary.get("recipe")
                                                             else "") + _adapted_first(summary) + _pass_way(summary),
             f"- selection: {summary['selection']}, step {summary['best_step']} of {summary['steps']}"
             + mixed_phrase(float(summary.get("mix", 1.0))),
             f"- wall time: {summary['wall_s']:.0f} s" + _time_split(summary), ""]
    if summary.get("before"):
        lines += ["| score | before | after | change |", "|---|---|---|---|"]
        for key, old in summary["before"].items():
            new = summary["after"].get(key)
            change = f"{new - old:+.2f}" if new is not None else ""
            lines.append(f"| {key} | {old:.2f} | {new:.2f} | {change} |" if new is not None
                         else f"| {key} | {old:.2f} | | |")
        lines.append("")
        teacher_scores = summary.get("teacher_scores") or {}
        if teacher_scores:
            lines += ["The teacher on your labelled data, before training: "
                      + ", ".join(f"{key} {value:.2f}" for key, value in teacher_scores.items()) + ".", ""]
        lines += serving_table(summary)
        for warning in (teacher_not_ahead(summary["before"], teacher_scores, str(summary["teacher"])),
                        scores_lost(summary["before"], summary["after"])):
            if warning:
                lines += [f"**{warning[0].upper()}{warning[1:]}.**", ""]
    if curve:
        lines += [f"{name} by step: " + ", ".join(f"{step}: {value:.4g}" for step, value in curve), ""]
    if drawn is not None:
        caption = "; ".join(panel_titles(summary.get("before", {}), summary.get("after", {}), curve))
        lines += [f"![{caption}]({PLOT_FILE})", ""]
    write_atomic(output_dir / REPORT_FILE, "\n".join(lines))
    return output_dir / REPORT_FILE


def serving_table(summary: dict[str, Any]) -> list[str]:
    """The model handed back and the teacher side by side: their scores on the user's labelled data and what each
    costs to serve on this machine (``summary["serving"]``); no lines when either was not timed."""
    serving = summary.get("serving") or {}
    if not {"model", "teacher"} <= set(serving):
        return []
    keys = list(summary.get("after") or {})
    rows = [("your model (handed back)", summary.get("after") or {}, serving["model"]),
            (f"the teacher ({summary['teacher']})", summary.get("teacher_scores") or {}, serving["teacher"])]
    lines = ["What each costs to serve on this machine (the fastest way that agrees with torch fp32, timed on "
             "your held-out lines):", "", "| model | " + " | ".join(keys) + " | sentences/s | size on disk |",
             "|---|" + "---|" * len(keys) + "---|---|"]
    for name, scores, cost in rows:
        shown = " | ".join(f"{scores[k]:.2f}" if k in scores else "" for k in keys)
        lines.append(f"| {name} | {shown} | {cost['sentences_per_s']:,.0f} ({cost['backend']} {cost['precision']}) "
                     f"| {cost['size_mb']:,.0f} MB |")
    return [*lines, ""]


def _pass_way(summary: dict[str, Any]) -> str:
    way = summary.get("teacher_pass")
    return "" if not way else f"; its pass ran on {way['backend']} {way['precision']}"


def _adapted_first(summary: dict[str, Any]) -> str:
    first = summary.get("adapted_teacher")
    return "" if not first else f": {adapted_teacher_phrase(first)}"


def _time_split(summary: dict[str, Any]) -> str:
    if "train_s" not in summary:  # written before the split was recorded
        return ""
    first = summary.get("adapted_teacher")
    adapting = f"{first['wall_s']:.0f} s adapting the teacher, " if first else ""
    teacher = f"{summary['teacher_s']:.0f} s the teacher's pass, " if summary.get("teacher_s") else ""
    return (f" ({adapting}{teacher}{summary['train_s']:.0f} s training, {summary['evaluate_s']:.0f} s scoring "
            "on your labelled data)")


SCORES_PANEL, SELECTION_PANEL = "your task", "selection (no labels)"


def panel_titles(before: Mapping[str, float], after: Mapping[str, float], curve: Sequence[tuple[int, float]]
                 ) -> list[str]:
    """The titles of the picture's panels, in order: the user's scores where a key was scored before and after, the
    selection criterion where more than one step was scored. The one place that decides what is drawn (the report's
    alt text is these titles)."""
    return ([SCORES_PANEL] if any(k in after for k in before) else []) + ([SELECTION_PANEL] if len(curve) >= 2 else [])


def plot_adaptation(before: Mapping[str, float], after: Mapping[str, float], curve: Sequence[tuple[int, float]],
                    criterion: str, lower_is_better: bool, path: str | Path,
                    teacher_scores: Mapping[str, float] | None = None) -> Path | None:
    """``cselab adapt``'s picture (:func:`panel_titles`): the user's scores before and after, beside the teacher's
    where it was scored, and the selection criterion at every scored step. Nothing to draw: no file (``None``)."""
    keys = [k for k in before if k in after]
    teacher_scores = {k: teacher_scores[k] for k in keys if k in (teacher_scores or {})}
    titles = panel_titles(before, after, curve)
    panels = len(titles)
    if panels == 0:
        Path(path).unlink(missing_ok=True)
        return None
    fig = new_figure(5.2 * panels, 4.0)
    if SCORES_PANEL in titles:
        ax = fig.add_subplot(1, panels, titles.index(SCORES_PANEL) + 1)
        x = np.arange(len(keys))
        bars = [("before", before), ("after", after)] + ([("teacher", teacher_scores)] if teacher_scores else [])
        width = 0.8 / len(bars)
        for i, (label, scores) in enumerate(bars):
            at = [j for j, key in enumerate(keys) if key in scores]
            ax.bar(x[at] + (i - (len(bars) - 1) / 2) * width, [scores[keys[j]] for j in at], width, label=label,
                   hatch="//" if label == "teacher" else None)
        ax.set_xticks(x, keys, rotation=20, ha="right", fontsize=8)
        low = min(min(before[k], after[k], teacher_scores.get(k, before[k])) for k in keys)
        ax.set_ylim(max(0.0, low - 5.0), None)
        ax.set_ylabel("score")
        ax.legend(fontsize=8)
        ax.set_title(SCORES_PANEL)
    if SELECTION_PANEL in titles:
        ax = fig.add_subplot(1, panels, titles.index(SELECTION_PANEL) + 1)
        steps, scores = zip(*curve, strict=True)
        ax.plot(steps, scores, marker="o")
        best = int(np.argmin(scores) if lower_is_better else np.argmax(scores))
        ax.scatter([steps[best]], [scores[best]], color="red", zorder=3, label="selected")
        ax.legend(fontsize=8)
        ax.set_xlabel("step")
        ax.set_ylabel(criterion)
        ax.set_title(SELECTION_PANEL)
    return save_figure(fig, path)
