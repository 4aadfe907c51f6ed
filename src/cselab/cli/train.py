"""``cselab train`` and ``cselab distill`` (a run into an output directory), and what a run is configured with:
``cselab presets``, ``cselab config show``."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from cselab.cli.options import config_path, output_opt, preset_opt
from cselab.errors import CselabError, UsageError
from cselab.training.run_directory import RunDirectory


@click.command("presets")
def presets_command() -> None:
    """List the presets shipped with cselab (use one with --preset NAME)."""
    from cselab.config.presets import list_presets
    from cselab.config.run_config import load_config

    presets = list_presets()
    width = max(len(p.name) for p in presets)
    for p in presets:
        c = load_config(p.path)
        steps = f"{c.train.max_steps} steps" if c.train.max_steps else f"{c.train.epochs} epoch(s)"
        click.echo(f"{p.name.ljust(width)}  {c.method:<9} {c.model.backbone}, {steps}, batch {c.train.batch_size}")


@click.group("config")
def config_group() -> None:
    """Run configurations: what every key means."""


@config_group.command("show")
@click.argument("method")
def config_show(method: str) -> None:
    """Every key of a METHOD run config with its default and description (KEY=DEFAULT, as an override)."""
    from cselab.config.reference import render_config_reference
    from cselab.methods import METHODS

    click.echo(render_config_reference(method, METHODS.get(method)))


def _run_dir_options(command: Any) -> Any:
    """--overwrite and --allow-change, shared by the commands that train into an output directory."""
    command = click.option("--allow-change", multiple=True, metavar="KEY",
                           help="with --resume: let this key differ from the run's recorded configuration "
                                "(train.max_steps, train.epochs, train.eval_every, train.save_every)")(command)
    return click.option("--overwrite", is_flag=True,
                        help="start an unfinished run in the output directory again from step 0")(command)


@click.command("train", context_settings={"ignore_unknown_options": True})
@click.option("--method", help="training method (simcse, ...); overrides the config's")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML config file")
@preset_opt
@output_opt(dest="output_dir", required=False, help="the run directory (train.output_dir)")
@click.option("--resume", is_flag=True, help="continue the run in the run directory exactly where it stopped")
@click.option("--results", type=click.Path(path_type=Path), help="append a results record (test scores) to this JSONL")
@click.option("--variant", default="", help="label of this run in the results record (e.g. '+DCL only')")
@click.option("--row", default="", help="identifier of the results row (e.g. a protocol row's name)")
@_run_dir_options
@click.argument("overrides", nargs=-1)
def train_command(method: str | None, config_file: Path | None, preset: str | None, output_dir: Path | None,
                  resume: bool, results: Path | None, variant: str, row: str, overwrite: bool,
                  allow_change: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Train a model. OVERRIDES are KEY=VALUE pairs, e.g. train.lr=1e-5 model.pooler=cls."""
    from cselab.config.run_config import load_config

    config_file = config_path(config_file, preset)
    if output_dir is not None:
        if any(o.startswith("train.output_dir=") for o in overrides):
            raise UsageError("give --output DIR or train.output_dir=DIR, not both")
        overrides = (*overrides, f"train.output_dir={output_dir}")
    config = load_config(config_file, list(overrides), method=method)
    source = f"preset {preset}" if preset else str(config_file) if config_file else None
    directory = Path(config.train.output_dir)
    existed = directory.exists()
    try:
        # the options are checked and a second run into the directory is refused before torch loads
        with RunDirectory.open(config, resume=resume, overwrite=overwrite, allow_change=allow_change) as run:
            from cselab.methods import METHODS
            from cselab.training.runs import train_and_record

            # the method's options and batch size (a batch of one where it needs in-batch negatives), before the
            # run writes anything
            METHODS.get(config.method).check_config(config)
            summary = train_and_record(config, opened=run, results_file=results, variant=variant, row=row,
                                       config_source=source, overrides=list(overrides))
    except CselabError:
        if not existed:  # the lock made it: a refused run leaves no empty directory behind
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    click.echo(summary)


@click.command("distill", context_settings={"ignore_unknown_options": True})
@click.argument("teacher")
@click.option("--student", required=True, help="backbone of the single-encoder student")
@click.option("--corpus", help="training sentences (name or file); default: the preset's or config's data.corpus")
@output_opt("--output-dir", dest="output_dir", help="the run directory")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML with training settings")
@preset_opt
@click.option("--resume", is_flag=True)
@click.option("--results", type=click.Path(path_type=Path), help="append a results record to this JSONL")
@_run_dir_options
@click.option("--device", help="training and scoring device (sets train.device): cpu, cuda, cuda:N, auto")
@click.argument("overrides", nargs=-1)
def distill_command(teacher: str, student: str, corpus: str | None, output_dir: Path, config_file: Path | None,
                    preset: str | None, resume: bool, results: Path | None, overwrite: bool,
                    allow_change: tuple[str, ...], device: str | None, overrides: tuple[str, ...]) -> None:
    """Distil TEACHER (e.g. a twin model) into one encoder: MSE of the student's vector to the teacher's (-D).

    With method_options.target=similarities (or pairs, with method_options.neighbours=K): MSE of the in-batch cosine
    similarities (or of chosen pairs' cosines), for a teacher of any size."""
    from cselab.training.pipeline import distill_config
    from cselab.training.runs import train_and_record

    config_file = config_path(config_file, preset)
    if device:
        overrides = (*overrides, f"train.device={device}")
    config = distill_config(teacher, student, corpus, output_dir=output_dir, config_file=config_file,
                            overrides=list(overrides))
    with RunDirectory.open(config, resume=resume, overwrite=overwrite, allow_change=allow_change) as run:
        summary = train_and_record(config, opened=run, results_file=results, variant="-D",
                                   config_source=str(config_file) if config_file else None, overrides=list(overrides))
    click.echo(summary)
