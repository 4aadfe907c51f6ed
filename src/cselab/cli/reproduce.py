"""``cselab reproduce``: a paper's row in one command (:mod:`cselab.research.experiments.reproduce`)."""

from __future__ import annotations

from pathlib import Path

import click

from cselab.cli.options import POSITIVE, output_opt, preset_opt
from cselab.reporter import report


def _seeds(_ctx: object, _param: object, value: str) -> list[int]:
    from cselab.cli.experiments import _seed_list

    return _seed_list(_ctx, _param, value)


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
    from cselab.data.text.rtt import parse_models
    from cselab.errors import UsageError
    from cselab.research.experiments.reproduce import (
        describe,
        estimate_seconds,
        plan_reproduction,
        prepare,
        run_reproduction,
    )
    from cselab.research.reporting.paper_table import paper_comparison_table

    if sts == "partial" and senteval_dir is not None:
        raise UsageError("--sts partial and --senteval-dir contradict each other; drop one")
    plan = plan_reproduction(method, backbone, seeds=seed_list, preset=preset, overrides=list(overrides),
                             out_dir=output_dir, senteval_dir=senteval_dir, sts=sts,
                             rtt_models=parse_models(rtt_models))
    for line in describe(plan):
        report().say(line)
    prepare(plan, from_dir=from_dir, fetch=not no_fetch)
    estimate = estimate_seconds(plan)
    report().say("estimate: " + (f"about {_duration(estimate)} for {len(plan.seeds)} seed(s) on this machine "
                                 "(rough, x2 either way)" if estimate is not None else
                                 "none (the backbone's size or the corpus is unknown)"))
    if prepare_only:
        report().say(f"prepared: {plan.config_file}; run the same command without --prepare-only to train")
        return
    result = run_reproduction(plan, batch_size=batch_size)
    if result is None:  # another rank of a torchrun launch
        return
    paper = plan.paper
    label = f"paper ({paper.backbone})" if paper is not None else "paper"
    sets = "SentEval's data" if plan.senteval_dir is not None else "the partial sets cselab builds from STS-B"
    click.echo(f"\n{plan.method} on {plan.backbone}, {sets}; paper: {paper.citation() if paper else 'none'}")
    click.echo(paper_comparison_table(result.rows, paper_label=label, seeds=plan.seeds))
    for note in plan.notes:
        click.echo(f"note: {note}")
    took = f"took {_duration(result.wall_s)}"
    click.echo(f"{took} (estimate {_duration(estimate)})" if estimate is not None else took)
    click.echo(f"summary: {plan.out_dir / 'reproduce.json'}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
