"""``cselab eval MODEL --labels FILE --pairs FILE --retrieval DIR --domain NAME``: the command's domain branch."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cselab.errors import CselabError
from cselab.evaluation.domain import Timer, domain_report, load_inputs, render_scores, score_inputs
from cselab.fileio import write_atomic


def eval_domain_command(model: str, labels: Path | None, pairs: Path | None, retrieval: Path | None,
                        domain: str | None, *, pooler: str | None, batch_size: int, max_length: int | None,
                        as_json: bool, output: Path | None, precision: str) -> None:
    """Check the files, load the model, score, print (a table, or one JSON object task -> score with --json) and
    write the report to ``output`` when given; on any error nothing is written."""
    inputs = load_inputs(labels, pairs, retrieval, domain=domain)  # every file checked before the model loads
    try:
        import mteb  # noqa: F401
    except ImportError as exc:
        raise CselabError(f"domain evaluation runs mteb, which is not installed ({exc}): pip install 'cselab[mteb]'") from exc
    from cselab.evaluation.mteb_adapter import MtebEncoder
    from cselab.models.encoder import check_length
    from cselab.models.sentence_model import load_model

    loaded = load_model(model, pooler=pooler, max_length=max_length)
    if max_length is not None:
        check_length(loaded, max_length, "--max-length")
    encoder = MtebEncoder(loaded, name=Path(model).name or model)
    with Timer() as timer:
        scores = score_inputs(encoder, inputs, batch_size=batch_size, precision=precision, progress=not as_json)
    if output is not None:
        report = domain_report(model, inputs, scores, timer.s, pooler=pooler or getattr(loaded, "pooler", None),
                               batch_size=batch_size, max_length=max_length, precision=precision)
        write_atomic(output, json.dumps(report, indent=2) + "\n")
    if as_json:
        click.echo(json.dumps(scores))
        return
    click.echo(render_scores(model, inputs, scores))
    click.echo(f"wall time {timer.s:.1f} s" + (f"; results: {output}" if output is not None else ""))
