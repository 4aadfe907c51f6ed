"""What ``cselab adapt`` leaves for the user: the before/after figures in the saved model's card, ``adapt-report.md``
with its picture, and the summary it prints."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cselab.adapt.plan import PLOT_FILE, REPORT_FILE
from cselab.fileio import write_atomic, write_json_atomic
from cselab.reporting.plots import new_figure, save_figure


def annotate_model(model_dir: Path, summary: dict[str, Any]) -> None:
    """Put the adaptation (before/after figures) into the saved model's description and card."""
    from cselab.models.model_card import CARD_FILE, model_card

    file = model_dir / "cselab.json"
    description = json.loads(file.read_text())
    description["adaptation"] = {k: summary[k] for k in ("text", "sentences", "teacher", "selection", "best_step",
                                                        "before", "after")}
    write_json_atomic(file, description)
    write_atomic(model_dir / CARD_FILE, model_card(description))


def write_report(output_dir: Path, summary: dict[str, Any]) -> Path:
    """``adapt-report.md`` and ``adapt-report.png``: the scores before/after and the selection curve."""
    curve = []
    metrics = output_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            record = json.loads(line)
            if "dev" in record:
                curve.append((int(record["step"]), float(record["dev"])))
    plot_adaptation(summary.get("before", {}), summary.get("after", {}), curve, summary["selection"],
                    output_dir / PLOT_FILE)
    lines = ["# cselab adapt", "", f"- text: `{summary['text']}` ({summary['sentences']} sentences, "
             f"{summary['held_out']} held out for selection)", f"- model: {summary['model']}",
             f"- teacher: {summary['teacher'] or 'none'}", f"- selection: {summary['selection']}, "
             f"best step {summary['best_step']} of {summary['steps']}",
             f"- wall time: {summary['wall_s']:.0f} s" + _time_split(summary), ""]
    if summary.get("before"):
        lines += ["| score | before | after | change |", "|---|---|---|---|"]
        for key, old in summary["before"].items():
            new = summary["after"].get(key)
            change = f"{new - old:+.2f}" if new is not None else ""
            lines.append(f"| {key} | {old:.2f} | {new:.2f} | {change} |" if new is not None else f"| {key} | {old:.2f} | | |")
        lines.append("")
    lines += [f"![before/after and selection]({PLOT_FILE})", ""]
    write_atomic(output_dir / REPORT_FILE, "\n".join(lines))
    return output_dir / REPORT_FILE


def _time_split(summary: dict[str, Any]) -> str:
    if "train_s" not in summary:  # written before the split was recorded
        return ""
    return f" ({summary['train_s']:.0f} s training, {summary['evaluate_s']:.0f} s scoring before/after)"


def plot_adaptation(before: Mapping[str, float], after: Mapping[str, float], curve: Sequence[tuple[int, float]],
                    selection: str, path: str | Path) -> Path:
    """``cselab adapt``'s picture: the user's scores before and after (left; absent when no labelled file was
    given) and the selection score at every evaluated step (right)."""
    keys = [k for k in before if k in after]
    panels = 2 if keys else 1
    fig = new_figure(5.2 * panels, 4.0)
    if keys:
        ax = fig.add_subplot(1, panels, 1)
        x = np.arange(len(keys))
        ax.bar(x - 0.2, [before[k] for k in keys], 0.4, label="before")
        ax.bar(x + 0.2, [after[k] for k in keys], 0.4, label="after")
        ax.set_xticks(x, keys, rotation=20, ha="right", fontsize=8)
        low = min(min(before[k], after[k]) for k in keys)
        ax.set_ylim(max(0.0, low - 5.0), None)
        ax.set_ylabel("score")
        ax.legend(fontsize=8)
        ax.set_title("your task")
    ax = fig.add_subplot(1, panels, panels)
    if curve:
        steps, scores = zip(*curve, strict=True)
        ax.plot(steps, scores, marker="o")
        best = int(np.argmax(scores))
        ax.scatter([steps[best]], [scores[best]], color="red", zorder=3, label="selected")
        ax.legend(fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(selection)
    ax.set_title("selection (no labels)")
    return save_figure(fig, path)
