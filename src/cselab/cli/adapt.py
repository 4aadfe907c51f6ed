"""``cselab adapt``: a better encoder for the user's own text in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cselab.cli.options import POSITIVE
from cselab.cli.options import set_device as _set_device
from cselab.cli.options import writable_dir as _writable_dir
from cselab.errors import CselabError
from cselab.vocabulary import ADAPT_RECIPES, ADAPT_SELECTIONS, ADAPT_TASKS, ADAPT_UNITS, PASSAGE_GROUPINGS


@click.command("adapt", context_settings={"ignore_unknown_options": True})
@click.argument("text", type=click.Path(path_type=Path))
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True, help="the encoder to adapt")
@click.option("--teacher", help="the larger encoder whose embedding is distilled into MODEL (default: "
              "all-mpnet-base-v2 when fetched, `cselab data fetch models-mpnet`)")
@click.option("--select", metavar="|".join(ADAPT_SELECTIONS),
              help="the model kept: the last step (fixed-budget), or with a teacher the step with the least held-out "
              "distillation loss (distillation-loss), the best agreement with the teacher on held-out pairs "
              "(teacher-agreement), or the least held-out distillation loss among the steps no worse than the "
              "untouched model on the held-out lines and on passages of them (guarded-distillation-loss); the "
              "untouched model is then a candidate [default: the recipe's]")
@click.option("--no-teacher", is_flag=True, help="no teacher: SimCSE on your text, on a fixed budget")
@click.option("--adapt-teacher", is_flag=True,
              help="first adapt the teacher itself to your text with SimCSE (100 steps, kept in "
              "OUTPUT/teacher-adapted), then distil the adapted teacher: gained most on search and similarity, less on "
              "short texts, and takes longer (docs/adapt.md)")
@click.option("--task", type=click.Choice(ADAPT_TASKS),
              help="what the model is for: with a teacher, similarity and search adapt the teacher first "
              "(--adapt-teacher), which gained most there; clustering and classification keep the default; options "
              "you give are kept (docs/adapt.md)")
@click.option("--recipe", type=click.Choice(ADAPT_RECIPES),
              help="how to train: simcse (the default without a teacher), vectors-and-head (the default with one: "
              "the teacher's whole vector of passages of your lines and of as many general sentences, through its "
              "PCA rotated into the student and a linear head, three quarters of the adapted weights handed back), "
              "vectors-general (the same without the head, a quarter handed back: the default before), distill "
              "(the teacher's cosines), vectors (the teacher's whole vector of each line: for classifying short "
              "texts) or vectors-passages (of each passage: for clustering long documents); docs/adapt.md says what "
              "each gained and what it costs")
@click.option("--output", "output_dir", required=True, type=click.Path(path_type=Path),
              callback=_writable_dir("--output"), help="the run directory; the adapted model is OUTPUT/best, or "
              "OUTPUT/weight-mix when its weights are mixed (--mix)")
@click.option("--steps", type=POSITIVE,
              help="training steps [default: the recipe's: 200 for vectors-and-head and vectors-general; one pass "
              "over the text for the other teacher recipes, three for SimCSE; 100 to 450]")
@click.option("--batch-size", type=click.IntRange(min=2),
              help="training examples per step [default: the recipe's: 64; 16 for distill]")
@click.option("--max-length", type=click.IntRange(min=8),
              help="tokens of a training example [default: the recipe's: 256 for passages, 64 for lines]")
@click.option("--units", type=click.Choice(ADAPT_UNITS),
              help="a training example: a line of TEXT, a passage of lines (shuffled, up to --max-length tokens), "
              "or mixed (every line once as itself and once in a passage) [default: the recipe's: passages for "
              "the vectors-* recipes but vectors, mixed for distill, lines otherwise]")
@click.option("--passages", type=click.Choice(PASSAGE_GROUPINGS),
              help="which lines a passage groups: lines drawn at random (shuffled) or a line and the lines most like "
              "it in words (similar) [default: the recipe's: shuffled]")
@click.option("--general", type=click.Path(path_type=Path),
              help="a file of general sentences (one per line): as many as your text gives training examples are "
              "trained on beside it, to keep general similarity [default: the recipe's: for vectors-and-head and "
              "vectors-general, the corpus of `cselab data fetch corpus`; none otherwise]")
@click.option("--mix", type=click.FloatRange(min=0.0, max=1.0, min_open=True), metavar="W",
              help="hand back the adapted model's weights mixed with the untouched model's, W of them the adapted "
              "model's (OUTPUT/weight-mix): keeps more of what the model did before, at one model's cost; 1 hands "
              "back the adapted model itself (OUTPUT/best) [default: the recipe's: 0.75 for vectors-and-head, 0.25 for "
              "vectors-general, 1 otherwise]")
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
def adapt_command(text: Path, model: str, teacher: str | None, select: str | None, no_teacher: bool,
                  adapt_teacher: bool, task: str | None, recipe: str | None, output_dir: Path,
                  steps: int | None, batch_size: int | None, max_length: int | None, units: str | None,
                  passages: str | None, general: Path | None, mix: float | None, seed: int,
                  max_sentences: int | None,
                  labels: Path | None, pairs: Path | None, retrieval: Path | None, domain: str | None, resume: bool,
                  device: str, overrides: tuple[str, ...]) -> None:
    """A better encoder for TEXT (your unlabelled sentences, one per line) in one command.

    With a teacher (all-mpnet-base-v2 once fetched, or --teacher) it distils the teacher's embedding of your text and
    of general sentences (`cselab data fetch corpus`) into MODEL and hands back three quarters of the change (with
    --adapt-teacher it adapts the teacher to your text first); with
    --no-teacher (or no teacher at hand) it trains MODEL with SimCSE. A part of your text is held out
    and never trained on. No labels needed. With --labels/--pairs/--retrieval/--domain it scores MODEL before and
    after on your labelled data, and the teacher before training (it warns at once where the teacher does not
    lead). Everything is checked before anything is written."""
    from cselab.adaptation import plan_adapt
    from cselab.adaptation.plan import plan_facts, read_text
    from cselab.adaptation.run import check_output

    overrides = (*overrides, f"train.device={device}")
    plan = plan_adapt(text, output_dir, model=model, teacher=teacher, no_teacher=no_teacher, steps=steps,
                      batch_size=batch_size, max_length=max_length, seed=seed, max_sentences=max_sentences,
                      select=select, units=units, passages=passages, recipe=recipe, general=general, mix=mix,
                      adapt_teacher=adapt_teacher, task=task, overrides=overrides)
    # the output is checked before any model loads: a user's directory, another run, another text are refused here
    check_output(plan, plan_facts(plan, read_text(plan.text, plan.max_sentences)), resume=resume)
    evaluate = None
    if labels or pairs or retrieval or domain:
        import importlib.util

        from cselab.evaluation.domain import load_inputs, score_inputs

        if importlib.util.find_spec("mteb") is None:  # scoring runs mteb: refused now, not after training
            raise CselabError("scoring before/after runs mteb, which is not installed: pip install 'cselab[mteb]'")
        inputs = load_inputs(labels, pairs, retrieval, domain=domain)  # every file checked before training

        def evaluate(encoder: Any) -> dict[str, float]:
            return score_inputs(encoder, inputs)
    from cselab.adaptation import estimate_seconds, run_adapt, summary_of
    from cselab.adaptation.estimate import check_budget

    click.echo(plan.describe())
    estimate = estimate_seconds(plan)
    check_budget(plan, estimate)
    click.echo(f"adapt: estimated {estimate / 60:.0f} min on this machine (training, its evaluations, the teacher "
               "pass; not loading models)")
    click.echo(summary_of(run_adapt(plan, resume=resume, evaluate=evaluate, estimate_s=estimate)))
