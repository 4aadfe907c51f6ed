"""Commands over several runs or their records: ``cselab seeds`` and ``cselab ablate`` (train and summarise),
``cselab ensemble`` (two models as one) and ``cselab report`` (records as tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cselab.cli.options import config_path, device_opt, output_opt, preset_opt, split_list, writable_dir, writable_file
from cselab.errors import UsageError
from cselab.vocabulary import ENSEMBLE_COMBINES

# seeds/ablate: the summary goes under the run unless --out says otherwise
_summary_out_opt = output_opt("--out", dest="out_dir", required=False,
                              help="directory for the summary (default: train.output_dir)")


def _check_comparisons(pairs: Any) -> None:
    """A paired test of a configuration with itself compares nothing (t is nan): refused before any work."""
    for a, b in pairs:
        if a == b:
            raise UsageError(f"--compare {a} {b}: a configuration compared with itself; name two configurations")


def _seed_list(_ctx: Any, _param: Any, value: str) -> list[int]:
    seeds = []
    for text in split_list(value):
        try:
            seed = int(text)
        except ValueError:
            raise click.BadParameter(f"{text!r} is not a whole number (e.g. --seeds 1,2,3)") from None
        if seed < 0:
            raise click.BadParameter(f"seed {seed} is negative")
        seeds.append(seed)
    if not seeds:
        raise click.BadParameter("give at least one seed (e.g. --seeds 1,2,3)")
    return seeds


def _run_dir(config_file: Path | None, overrides: tuple[str, ...]) -> Path:
    """train.output_dir of the configuration: where seeds/ablate keep their records and summary by default."""
    from cselab.config.run_config import load_config

    return Path(load_config(config_file, list(overrides)).train.output_dir)


@click.command("seeds", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@preset_opt
@click.option("--seeds", "seed_list", default="1,2,3,4,5", show_default=True, callback=_seed_list)
@click.option("--variant", default="")
@click.option("--results", type=click.Path(path_type=Path), callback=writable_file("--results"),
              help="records (JSONL; default: train.output_dir/seeds.jsonl)")
@click.option("--compare", nargs=2, help="two configuration labels (method/variant) for the paired test")
@_summary_out_opt
@click.argument("overrides", nargs=-1)
def seeds_command(config_file: Path | None, preset: str | None, seed_list: list[int], variant: str,
                  results: Path | None, compare: tuple[str, str] | None, out_dir: Path | None,
                  overrides: tuple[str, ...]) -> None:
    """Run one configuration over several seeds (recorded seeds are skipped); mean, std, paired test."""
    from cselab.research.experiments.seeds import seeds_run
    from cselab.research.reporting.seeds_report import seeds_report
    from cselab.training.results import read_records

    _check_comparisons([compare] if compare else [])
    config_file = config_path(config_file, preset, required=True)
    run_dir = _run_dir(config_file, overrides)
    results, out_dir = results or run_dir / "seeds.jsonl", out_dir or run_dir
    seeds_run(config_file, list(overrides), seed_list, results_file=results, variant=variant)
    a, b = compare if compare else (None, None)
    report = seeds_report(read_records(results, "seeds"), out_dir, a_variant=a, b_variant=b)
    click.echo(report.markdown)


@click.command("ablate", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@preset_opt
@click.option("--results", type=click.Path(path_type=Path), callback=writable_file("--results"),
              help="records (JSONL; default: train.output_dir/ablation.jsonl)")
@click.option("--subset", "subsets", multiple=True, metavar="TERM+TERM",
              help="train only this subset of the loss terms (repeatable; default: every non-empty subset), "
                   "e.g. to share the subsets out between machines")
@_summary_out_opt
@click.argument("overrides", nargs=-1)
def ablate_command(config_file: Path | None, preset: str | None, results: Path | None, subsets: tuple[str, ...],
                   out_dir: Path | None, overrides: tuple[str, ...]) -> None:
    """Train a method with every non-empty subset of its loss terms."""
    from cselab.research.experiments.ablation import ablation_run
    from cselab.research.reporting.ablation_report import ablation_report
    from cselab.training.results import read_records

    config_file = config_path(config_file, preset, required=True)
    run_dir = _run_dir(config_file, overrides)
    results, out_dir = results or run_dir / "ablation.jsonl", out_dir or run_dir

    chosen = [tuple(t.strip() for t in s.split("+")) for s in subsets] or None
    run = ablation_run(config_file, chosen, list(overrides), results_file=results)
    report = ablation_report(read_records(results, "ablation"), run.terms, out_dir, method=run.method)
    click.echo(report.markdown)


@click.command("ensemble")
@click.argument("model_a")
@click.argument("model_b")
@click.option("--output", required=True, type=click.Path(path_type=Path), callback=writable_dir("--output"),
              help="a new directory (an existing model is never replaced)")
@click.option("--weight", default="0.7", show_default=True,
              help="w in (1 - w) * A + w * B, or 'dev': the --grid value with the best STS-B dev score")
@click.option("--grid", help="comma-separated weights tried with --weight dev (default: 0, 0.1, ..., 1)")
@click.option("--combine", type=click.Choice(ENSEMBLE_COMBINES), default="sum", show_default=True,
              help="sum: the papers' weighted sum of the vectors (equal sizes); concat: weighted unit vectors "
                   "side by side, cosine = (1 - w) cos_A + w cos_B (any sizes); weights: one model whose weights "
                   "are (1 - w) A + w B (one architecture, e.g. an adapted model and the one it started from)")
@device_opt
def ensemble_command(model_a: str, model_b: str, output: Path, weight: str, grid: str | None, combine: str) -> None:
    """Save the +UC ensemble (1 - w) * MODEL_A + w * MODEL_B as a model directory."""
    from cselab.research.experiments.ensemble import DEFAULT_GRID, ensemble, ensemble_chosen_on_dev

    if grid is not None and weight != "dev":
        raise UsageError(f"--grid applies only with --weight dev (the weight is fixed at {weight}); drop one")
    if combine == "weights" and weight == "dev":
        raise UsageError("--weight dev chooses among ensembles (--combine sum or concat); with --combine weights "
                         "give the weight, e.g. --weight 0.5")
    if weight == "dev":
        weights = DEFAULT_GRID if grid is None else _weight_grid(grid)
        saved, choice = ensemble_chosen_on_dev(model_a, model_b, output, weights, combine=combine)
        sweep = ", ".join(f"{w:g}: {s:.2f}" for w, s in choice.dev_by_weight.items())
        click.echo(f"STS-B dev by w: {sweep}\nchosen w = {choice.weight:g} (dev {choice.dev:.2f})")
        click.echo(f"saved {saved}")
        return
    click.echo(f"saved {ensemble(model_a, model_b, output, weight=_weight_value(weight, '--weight'), combine=combine)}")


def _weight_value(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: give a number in [0, 1] (or 'dev' for --weight)") from None
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"{option} {text!r}: the weight must be in [0, 1]")
    return value


def _weight_grid(text: str) -> list[float]:
    values = [_weight_value(part.strip(), "--grid") for part in text.split(",") if part.strip()]
    if not values:
        raise UsageError("--grid is empty: give comma-separated weights in [0, 1]")
    return values


@click.command("report")
@click.option("--results", "results_file", type=click.Path(path_type=Path),
              help="results records of `cselab train --results`")
@click.option("--seeds", "seeds_file", type=click.Path(path_type=Path), help="records of `cselab seeds`")
@click.option("--ablation", "ablation_file", type=click.Path(path_type=Path), help="records of `cselab ablate`")
@click.option("--compare", nargs=2, multiple=True,
              help="two seeds configurations (method/variant) for a paired test; repeat for more pairs")
def report_command(results_file: Path | None, seeds_file: Path | None, ablation_file: Path | None,
                   compare: tuple[tuple[str, str], ...]) -> None:
    """Print the records as Markdown tables (methods x tasks, cost, provenance; seeds; ablations)."""
    from cselab.research.reporting.tables import ablation_tables, protocol_table, seeds_table
    from cselab.training.results import read_records

    if not (results_file or seeds_file or ablation_file):
        raise UsageError("give at least one records file: --results, --seeds or --ablation")
    if compare and not seeds_file:
        raise UsageError("--compare pairs configurations of --seeds records: give --seeds FILE")
    _check_comparisons(compare)
    tables = []
    if results_file:
        tables.append(protocol_table(read_records(results_file, "results", allow_empty=False)))
    if seeds_file:
        tables.append(seeds_table(read_records(seeds_file, "seeds", allow_empty=False), comparisons=compare))
    if ablation_file:
        tables.append(ablation_tables(read_records(ablation_file, "ablation", allow_empty=False)))
    click.echo("\n\n".join(tables))
