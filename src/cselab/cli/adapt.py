"""``cselab adapt``: a better encoder for the user's own text in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cselab.cli.options import POSITIVE
from cselab.cli.options import set_device as _set_device
from cselab.cli.options import writable_dir as _writable_dir


@click.command("adapt", context_settings={"ignore_unknown_options": True})
@click.argument("text", type=click.Path(path_type=Path))
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True, help="the encoder to adapt")
@click.option("--teacher", help="distil this larger encoder's cosines instead of SimCSE (e.g. all-mpnet-base-v2, "
              "after `cselab data fetch models-mpnet`)")
@click.option("--select", default="fixed-budget", show_default=True, metavar="fixed-budget|teacher-agreement",
              help="the model kept: the last step, or (with --teacher) the step that agrees best with the teacher "
              "on held-out pairs of your text (the untouched model is a candidate)")
@click.option("--no-teacher", is_flag=True, help="SimCSE on a fixed budget: the default, kept for scripts that name it")
@click.option("--output", "output_dir", required=True, type=click.Path(path_type=Path), callback=_writable_dir("--output"),
              help="the run directory; the adapted model is OUTPUT/best")
@click.option("--steps", type=POSITIVE, help="training steps (default: three passes over the text, 100 to 450)")
@click.option("--batch-size", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--max-length", type=click.IntRange(min=8), default=64, show_default=True, help="tokens per sentence")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("--max-sentences", type=click.IntRange(min=1), help="use only the first N distinct sentences of TEXT")
@click.option("--labels", type=click.Path(path_type=Path), help="score before/after: text<TAB>label lines")
@click.option("--pairs", type=click.Path(path_type=Path), help="score before/after: s1<TAB>s2<TAB>score lines")
@click.option("--retrieval", type=click.Path(path_type=Path), help="score before/after: queries, corpus, qrels")
@click.option("--domain", help="score before/after on a suite domain (`cselab data fetch domains`)")
@click.option("--resume", is_flag=True, help="continue an interrupted adaptation")
@click.option("--device", default="auto", show_default=True, callback=_set_device,
              help="where models compute (training too): cpu, cuda, cuda:N; auto = CUDA when present")
@click.argument("overrides", nargs=-1)
def adapt_command(text: Path, model: str, teacher: str | None, select: str, no_teacher: bool, output_dir: Path,
                  steps: int | None, batch_size: int, max_length: int, seed: int, max_sentences: int | None,
                  labels: Path | None, pairs: Path | None, retrieval: Path | None, domain: str | None, resume: bool,
                  device: str, overrides: tuple[str, ...]) -> None:
    """A better encoder for TEXT (your unlabelled sentences, one per line) in one command.

    Trains MODEL with SimCSE (its own mean pooling, temperature 0.2) on a budget set from the text's size; with
    --teacher it distils the teacher's cosines of neighbour pairs of your sentences instead. It keeps the last step
    (--select teacher-agreement: the step that agrees best with the teacher on a held-out part of your text). No
    labels needed. With --labels/--pairs/--retrieval/--domain it scores MODEL before and after on your labelled
    data."""
    from cselab.adapt import plan_adapt

    overrides = (*overrides, f"train.device={device}")
    plan = plan_adapt(text, output_dir, model=model, teacher=teacher, no_teacher=no_teacher, steps=steps,
                      batch_size=batch_size, max_length=max_length, seed=seed, max_sentences=max_sentences,
                      select=select, overrides=overrides)
    evaluate = None
    if labels or pairs or retrieval or domain:
        from cselab.evaluation.domain import load_inputs, score_inputs

        inputs = load_inputs(labels, pairs, retrieval, domain=domain)  # every file checked before training

        def evaluate(encoder: Any) -> dict[str, float]:
            return score_inputs(encoder, inputs)
    from cselab.adapt import estimate_seconds, run_adapt, summary_of
    from cselab.training.run_directory import RunDirectory

    if output_dir.is_dir():
        RunDirectory(output_dir).claim()  # a directory holding the user's files is refused before models load
    click.echo(plan.describe())

    estimate = estimate_seconds(plan)
    click.echo(f"adapt: estimated {estimate / 60:.0f} min on this machine (training, its evaluations, the teacher pass; not loading models)")
    click.echo(summary_of(run_adapt(plan, resume=resume, evaluate=evaluate, echo=click.echo, estimate_s=estimate)))
