"""``cselab reproduce``: a paper's row in one command (:mod:`cselab.research.experiments.reproduce`)."""

from __future__ import annotations

from pathlib import Path

import click

from cselab.cli.options import POSITIVE, output_opt, preset_opt
from cselab.errors import UsageError


def _seeds(_ctx: object, _param: object, value: str) -> list[int]:
    """``--seeds 1,2,3``: every item a whole number (an empty item is refused, not skipped), checked by the rules
    the Python API applies (:func:`cselab.research.experiments.reproduce.check_seeds`)."""
    from cselab.research.experiments.reproduce import check_seeds

    seeds = []
    for text in value.split(","):
        text = text.strip()
        if not text:
            raise UsageError(f"--seeds {value!r}: an empty item; give whole numbers separated by commas, e.g. 1,2,3")
        try:
            seeds.append(int(text))
        except ValueError:
            raise UsageError(f"--seeds: {text!r} is not a whole number (e.g. --seeds 1,2,3)") from None
    return check_seeds(seeds)


def _rtt_models(text: str | None) -> dict[str, str]:
    """``--rtt-models en-fr=DIR,fr-en=NAME``: no empty item, no direction twice, each SRC-TGT=MODEL."""
    from cselab.research.experiments.reproduce import check_rtt_models

    if text is None:
        return {}
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise UsageError(f"--rtt-models {text!r}: an empty item; give SRC-TGT=MODEL pairs separated by commas")
    directions = [item.partition("=")[0].strip() for item in items]
    twice = sorted({d for d in directions if directions.count(d) > 1})
    if twice:
        raise UsageError(f"--rtt-models: {twice[0]} is given twice; give each direction once")
    models = {}
    for item in items:
        direction, sep, model = item.partition("=")
        if not sep:
            raise UsageError(f"--rtt-models {item!r}: give SRC-TGT=MODEL pairs, e.g. en-fr=Helsinki-NLP/opus-mt-en-fr,"
                             "fr-en=/models/opus-mt-fr-en")
        models[direction.strip()] = model.strip()
    return check_rtt_models(models)


@click.command("reproduce", context_settings={"ignore_unknown_options": True})
@click.argument("method")
@click.option("--backbone", default="bert-base-uncased", show_default=True,
              help="bert-base-uncased or roberta-base (the papers' presets); any other model trains on the method's "
                   "cpu-minilm preset with this backbone")
@click.option("--seeds", "seed_list", default="1", show_default=True, callback=_seeds, help="e.g. 1,2,3")
@preset_opt
@output_opt("--output-dir", dest="output_dir", required=False,
            help="runs, records and the summary (default runs/reproduce/METHOD-BACKBONE)")
@click.option("--senteval-dir", type=click.Path(path_type=Path),
              help="SentEval's data directory (default: `cselab data fetch senteval`)")
@click.option("--sts", type=click.Choice(["auto", "senteval", "partial"]), default="auto", show_default=True,
              help="auto: SentEval's seven tasks when they can be had, else the partial sets; senteval: fail "
                   "without them; partial: do not try")
@click.option("--from", "from_dir", type=click.Path(path_type=Path),
              help="the papers' files downloaded by hand (wiki1m_for_simcse.txt, senteval.tar)")
@click.option("--rtt-models", help="translation models by direction for the round trips (TNCSE, JTCSE) and IFCL's "
                                   "German side, e.g. en-fr=DIR,fr-en=DIR (default Helsinki-NLP/opus-mt-SRC-TGT)")
@click.option("--no-fetch", is_flag=True, help="fetch and translate nothing: fail naming what is missing")
@click.option("--prepare-only", is_flag=True, help="fetch, translate and write the configuration, then stop "
                                                   "(before a torchrun launch)")
@click.option("--batch-size", default=128, show_default=True, type=POSITIVE, help="batch size of the STS scoring")
@click.argument("overrides", nargs=-1)
def reproduce_command(method: str, backbone: str, seed_list: list[int], preset: str | None, output_dir: Path | None,
                      senteval_dir: Path | None, sts: str, from_dir: Path | None, rtt_models: str | None,
                      no_fetch: bool, prepare_only: bool, batch_size: int, overrides: tuple[str, ...]) -> None:
    """Train METHOD as its paper did, score the seven STS tasks and print our figures beside the paper's.
    OVERRIDES are KEY=VALUE pairs applied to the preset (e.g. train.max_steps=300)."""
    from cselab.research.experiments.reproduce import duration, reproduce
    from cselab.research.reporting.paper_table import paper_comparison_table

    if sts == "partial" and senteval_dir is not None:
        raise UsageError("--sts partial and --senteval-dir contradict each other; drop one")
    result = reproduce(method, backbone, seeds=seed_list, preset=preset, overrides=list(overrides),
                       out_dir=output_dir, senteval_dir=senteval_dir, sts=sts, from_dir=from_dir,
                       rtt_models=_rtt_models(rtt_models), fetch=not no_fetch, prepare_only=prepare_only,
                       batch_size=batch_size)
    if result is None:  # --prepare-only, or another rank of a torchrun launch
        return
    plan, estimate = result.plan, result.estimate_s
    paper = plan.paper
    label = f"paper ({paper.backbone})" if paper is not None else "paper"
    sets = "SentEval's data" if plan.senteval_dir is not None else "the partial sets cselab builds from STS-B"
    click.echo(f"\n{plan.method} on {plan.backbone}, {sets}; paper: {paper.citation() if paper else 'none'}")
    click.echo(paper_comparison_table(result.rows, paper_label=label, seeds=plan.seeds))
    for note in plan.notes:
        click.echo(f"note: {note}")
    took = f"took {duration(result.wall_s)}"
    click.echo(f"{took} (estimate {duration(estimate)})" if estimate is not None else took)
    click.echo(f"summary: {plan.out_dir / 'reproduce.json'}")

