"""What several commands share: click option types and callbacks that check a value before any work, the options
more than one command takes (``--precision``, ``--backend``, ``--device``, ``--preset``) and how ``--config`` /
``--preset`` name a file. Nothing here imports torch: the CLI starts without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cselab.errors import CselabError, UsageError, check_names, check_number
from cselab.fileio import check_writable_dir, check_writable_file
from cselab.vocabulary import BACKENDS

POSITIVE = click.IntRange(min=1)


def writable_file(what: str) -> Any:
    """A click callback: the option's path must be creatable as a file (checked before any work)."""
    return lambda _ctx, _param, value: check_writable_file(value, what) if value is not None else None


def writable_dir(what: str) -> Any:
    return lambda _ctx, _param, value: check_writable_dir(value, what) if value is not None else None


def names(option: str) -> Any:
    """A click callback: a comma-separated list of names that must not be empty (``--tasks ,`` is an error)."""
    return lambda _ctx, _param, value: check_names(value, option) if value is not None else None


def number(option: str, minimum: float, maximum: float) -> Any:
    """A click callback: a finite number in [minimum, maximum] (nan and inf are refused)."""
    return lambda _ctx, _param, value: check_number(value, option, minimum=minimum, maximum=maximum) \
        if value is not None else None


def not_empty(option: str) -> Any:
    """A click callback: text that, when given, is not empty (``--preset ""`` is not "no preset")."""
    def check(_ctx: Any, _param: Any, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty")
        return value
    return check


class _FirstNameOption(click.Option):
    """An option shown and named in errors by its first name only; its other names are still accepted (the name
    every command now uses for one concept, with the one an older release used kept working)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts

    def get_error_hint(self, ctx: click.Context) -> str:
        return f"'{self.opts[0]}'"


def output_opt(*aliases: str, help: str, dest: str = "output", required: bool = True, file: bool = False) -> Any:
    """``--output``, what every command writes its output to (a directory, or a file with ``file``), checked as
    writable before any work; ``aliases`` are the names an older release used, accepted and not shown."""
    check = writable_file("--output") if file else writable_dir("--output")
    return click.option("--output", *aliases, dest, cls=_FirstNameOption, required=required,
                        type=click.Path(path_type=Path), callback=check, help=help)


def split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


precision_opt = click.option(
    "--precision", type=click.Choice(["fp32", "bf16", "auto"]), default="fp32", show_default=True,
    help="bf16 autocast, or auto: bf16 where a matmul probe on this machine says it pays (cached per machine)")


def set_device(_ctx: Any, _param: Any, value: str) -> str:
    from cselab.runtime.devices import set_inference_device

    set_inference_device(value)
    return value


device_opt = click.option("--device", default="auto", show_default=True, expose_value=False, callback=set_device,
                          help="where models compute: cpu, cuda, cuda:N; auto = CUDA when present")
backend_opt = click.option(
    "--backend", type=click.Choice(BACKENDS), default="torch", show_default=True,
    help="onnx/openvino: run a directory `cselab export` wrote with ONNX Runtime / OpenVINO (CPU)")
preset_opt = click.option("--preset", callback=not_empty("--preset"),
                          help="a preset shipped with cselab instead of --config, e.g. simcse/cpu-minilm")


def config_path(config_file: Path | None, preset: str | None, *, required: bool = False) -> Path | None:
    """The YAML file that --config or --preset names."""
    if config_file is not None and preset is not None:
        raise UsageError("give --config FILE or --preset NAME, not both")
    if preset is not None:
        from cselab.config.presets import preset_path

        return preset_path(preset)
    if required and config_file is None:
        raise CselabError("give --config FILE or --preset NAME (`cselab presets` lists the presets)")
    return config_file
