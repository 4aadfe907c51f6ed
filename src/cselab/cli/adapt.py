"""``cselab adapt``: a better encoder for the user's own text in one command."""

from __future__ import annotations

from pathlib import Path

import click

from cselab.cli.options import POSITIVE
from cselab.cli.options import set_device as _set_device
from cselab.errors import refuse_both
from cselab.vocabulary import ADAPT_TASKS


@click.command("adapt")
@click.argument("text", type=click.Path(path_type=Path))
@click.option("--output", "output_dir", required=True, type=click.Path(path_type=Path),
              help="the run directory; the adapted model is OUTPUT/model")
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True, help="the encoder to adapt")
@click.option("--teacher", help="the larger encoder distilled into MODEL [default: all-mpnet-base-v2 when fetched "
              "(`cselab data fetch models-mpnet`)]")
@click.option("--no-teacher", is_flag=True, help="no teacher: SimCSE on your text")
@click.option("--task", type=click.Choice(ADAPT_TASKS),
              help="what the model is for: with a teacher, similarity and search adapt the teacher to your text "
              "first (longer; gained most there), clustering and classification run the default")
@click.option("--recipe", metavar="FILE", help="train with another recipe: a YAML file (docs/adapt.md, \"Recipes\")")
@click.option("--steps", type=POSITIVE, help="training steps [default: the recipe's: 200 with a teacher; three passes "
              "over the text without one, 100 to 450]; the text used grows with the steps")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True,
              help="the training's seed: the same command and seed hand back the same model")
@click.option("--max-sentences", type=click.IntRange(min=1), help="use only the first N distinct sentences of TEXT")
@click.option("--labels", type=click.Path(path_type=Path), help="score before/after: text<TAB>label lines")
@click.option("--pairs", type=click.Path(path_type=Path), help="score before/after: s1<TAB>s2<TAB>score lines")
@click.option("--retrieval", type=click.Path(path_type=Path), help="score before/after: a directory of queries.tsv, "
              "corpus.tsv and qrels.tsv")
@click.option("--domain", help="score before/after on a suite domain (`cselab data fetch domains`)")
@click.option("--resume", is_flag=True, help="continue an interrupted adaptation")
@click.option("--device", default="auto", show_default=True, callback=_set_device,
              help="where models compute (training too): cpu, cuda, cuda:N; auto = CUDA when present")
def adapt_command(text: Path, output_dir: Path, model: str, teacher: str | None, no_teacher: bool, task: str | None,
                  recipe: str | None, steps: int | None, seed: int, max_sentences: int | None, labels: Path | None,
                  pairs: Path | None, retrieval: Path | None, domain: str | None, resume: bool, device: str) -> None:
    """A better encoder for TEXT (your unlabelled sentences, one per line) in one command.

    With a teacher (all-mpnet-base-v2 once fetched, or --teacher) it distils the teacher's embedding of your text and
    of general sentences into MODEL; with --no-teacher (or no teacher at hand) it trains MODEL with SimCSE. A part
    of your text is held out and never trained on. No labels needed. With --labels/--pairs/--retrieval/--domain it
    scores MODEL and the teacher before training (and warns at once where the teacher does not lead) and MODEL
    after. Everything is checked before anything is written; the model handed back is OUTPUT/model."""
    from cselab.adaptation import adapt, summary_of

    refuse_both(("--task", task), ("--recipe", recipe),
                "--task picks the recipe cselab measured best for that task, --recipe gives another")
    result = adapt(text, output_dir, recipe=recipe, model=model, teacher=teacher, no_teacher=no_teacher, task=task,
                   steps=steps, seed=seed, max_sentences=max_sentences, device=device, labels=labels, pairs=pairs,
                   retrieval=retrieval, domain=domain, resume=resume)
    click.echo(summary_of(result))
