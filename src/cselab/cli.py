"""Command line: thin wrappers that parse arguments, call the library and print.

Every user-input problem surfaces as ONE line ``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .errors import CselabError

EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cselab")
def cli() -> None:
    """cselab: unsupervised contrastive learning of sentence embeddings."""


# -- data ------------------------------------------------------------------------------------------------
@cli.group()
def data() -> None:
    """Obtain evaluation sets, training corpora and checkpoints."""


@data.command("fetch")
@click.argument("target")
@click.option("--from", "from_dir", type=click.Path(path_type=Path), help="directory holding already downloaded archives")
@click.option("--with-stsb-train", is_flag=True, help="corpus: also build default+stsb-train (unlabelled STS-B train)")
def data_fetch(target: str, from_dir: Path | None, with_stsb_train: bool) -> None:
    """Fetch TARGET: sts, corpus, parallel-de, models, models-mpnet or all."""
    from .data.fetch import fetch

    path = fetch(target, from_dir=from_dir, include_stsb_train=with_stsb_train, progress=click.echo)
    click.echo(f"ready: {path}")


# -- evaluation ------------------------------------------------------------------------------------------
def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@cli.command("eval")
@click.argument("model")
@click.option("--pooler", help="override the pooler (cls, cls_before_pooler, mean, first_last_avg, pooler, mask)")
@click.option("--tasks", default="all", show_default=True, help="comma-separated task names, or 'all'")
@click.option("--splits", default="dev,test", show_default=True, help="splits to score where a task has them")
@click.option("--senteval-dir", type=click.Path(path_type=Path), help="a SentEval data directory (full STS12-16, SICK-R)")
@click.option("--batch-size", default=128, show_default=True, type=int)
@click.option("--max-length", type=int, help="override the truncation length")
@click.option("--json", "as_json", is_flag=True, help="print the scores as one JSON object (task -> split -> score)")
@click.option("--output", type=click.Path(path_type=Path), help="write the detailed results JSON here")
def eval_command(model: str, pooler: str | None, tasks: str, splits: str, senteval_dir: Path | None,
                 batch_size: int, max_length: int | None, as_json: bool, output: Path | None) -> None:
    """Score MODEL (cselab, sentence-transformers or HF directory, or hub name) on STS tasks."""
    from .evaluation.api import evaluate_model, render_table

    report = evaluate_model(model, pooler=pooler, tasks=_split_list(tasks), splits=_split_list(splits),
                            senteval_dir=senteval_dir, batch_size=batch_size, max_length=max_length,
                            output=output, progress=not as_json)
    if as_json:
        click.echo(json.dumps(report["scores"]))
    else:
        click.echo(render_table(report))
        click.echo(f"results: {report['output']}")


# -- encoding --------------------------------------------------------------------------------------------
@cli.command("encode")
@click.argument("model")
@click.option("--input", "input_file", required=True, type=click.Path(path_type=Path), help="text file, one sentence per line")
@click.option("--output", "output_file", required=True, type=click.Path(path_type=Path), help="output .npy file")
@click.option("--pooler", help="override the pooler")
@click.option("--batch-size", default=64, show_default=True, type=int)
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings")
def encode_command(model: str, input_file: Path, output_file: Path, pooler: str | None, batch_size: int, normalize: bool) -> None:
    """Embed every line of --input with MODEL and save a float32 [N, d] array to --output."""
    from .evaluation.api import encode_file

    shape = encode_file(model, input_file, output_file, pooler=pooler, batch_size=batch_size, normalize=normalize)
    click.echo(f"wrote {output_file} {shape[0]}x{shape[1]}")


# -- training --------------------------------------------------------------------------------------------
@cli.command("train", context_settings={"ignore_unknown_options": True})
@click.option("--method", help="training method (simcse, ...); overrides the config's")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML preset")
@click.option("--resume", is_flag=True, help="continue the run in train.output_dir exactly where it stopped")
@click.option("--results", type=click.Path(path_type=Path), help="append a results record (test scores) to this JSONL")
@click.option("--variant", default="", help="label of this run in the results record (e.g. '+DCL only')")
@click.option("--row", default="", help="identifier of the results row (benchmarks/run_protocol.sh)")
@click.argument("overrides", nargs=-1)
def train_command(method: str | None, config_file: Path | None, resume: bool, results: Path | None,
                  variant: str, row: str, overrides: tuple[str, ...]) -> None:
    """Train a model. OVERRIDES are KEY=VALUE pairs, e.g. train.lr=1e-5 model.pooler=cls."""
    from .training.config import load_config
    from .training.runs import train_and_record

    config = load_config(config_file, list(overrides), method=method)
    summary = train_and_record(config, resume=resume, results_file=results, variant=variant, row=row,
                               config_source=str(config_file) if config_file else None, overrides=list(overrides))
    click.echo(summary)


# -- reporting -------------------------------------------------------------------------------------------
@cli.command("report")
@click.option("--results", "results_file", default="benchmarks/results/protocol.jsonl", show_default=True,
              type=click.Path(path_type=Path), help="results records (JSONL)")
@click.option("--update-readme", type=click.Path(path_type=Path),
              help="replace the <!-- cselab:protocol --> block of this README with the table")
def report_command(results_file: Path, update_readme: Path | None) -> None:
    """Render the results records as a Markdown table (methods x tasks, cost, provenance)."""
    from .reporting.tables import protocol_table, read_records, replace_block

    table = protocol_table(read_records(results_file))
    if update_readme:
        update_readme.write_text(replace_block(update_readme.read_text(encoding="utf-8"), "protocol", table))
        click.echo(f"updated {update_readme}")
    else:
        click.echo(table)


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    try:
        return cli.main(args=argv, prog_name="cselab", standalone_mode=False)
    except CselabError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted (a resumable state is kept at the last save point)", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
