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


@data.command("download")
@click.argument("target")
@click.option("--to", "dest", required=True, type=click.Path(path_type=Path), help="directory to put the archives in")
def data_download(target: str, dest: Path) -> None:
    """Download TARGET's verified archives only (on a machine with registry access), for a later
    `cselab data fetch TARGET --from DIR` on a machine without."""
    from .data.fetch import download

    paths = download(target, dest, progress=click.echo)
    click.echo(f"{len(paths)} archive(s) in {dest}; on the offline machine: cselab data fetch {target} --from {dest}")


# -- evaluation ------------------------------------------------------------------------------------------
def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _set_device(_ctx: Any, _param: Any, value: str) -> str:
    from .devices import set_inference_device

    set_inference_device(value)
    return value


_device_opt = click.option("--device", default="auto", show_default=True, expose_value=False, callback=_set_device,
                           help="where models compute: cpu, cuda, cuda:N; auto = CUDA when present")


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
@_device_opt
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
@_device_opt
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


@cli.command("distill", context_settings={"ignore_unknown_options": True})
@click.argument("teacher")
@click.option("--student", required=True, help="backbone of the single-encoder student")
@click.option("--corpus", default="default", show_default=True, help="training sentences (name or file)")
@click.option("--output-dir", required=True, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML with training settings")
@click.option("--resume", is_flag=True)
@click.option("--results", type=click.Path(path_type=Path), help="append a results record to this JSONL")
@click.option("--device", help="training and scoring device (sets train.device): cpu, cuda, cuda:N, auto")
@click.argument("overrides", nargs=-1)
def distill_command(teacher: str, student: str, corpus: str, output_dir: Path, config_file: Path | None,
                    resume: bool, results: Path | None, device: str | None, overrides: tuple[str, ...]) -> None:
    """Distil TEACHER (e.g. a twin model) into one encoder: MSE of the student's vector to the teacher's (-D)."""
    from .training.pipeline import distill_config
    from .training.runs import train_and_record

    if device:
        overrides = (*overrides, f"train.device={device}")
    config = distill_config(teacher, student, corpus, output_dir=output_dir, config_file=config_file,
                            overrides=list(overrides))
    click.echo(train_and_record(config, resume=resume, results_file=results, variant="-D",
                                config_source=str(config_file) if config_file else None, overrides=list(overrides)))


@cli.command("ensemble")
@click.argument("model_a")
@click.argument("model_b")
@click.option("--output", required=True, type=click.Path(path_type=Path))
@click.option("--weight", default=0.7, show_default=True, type=float, help="w in (1 - w) * A + w * B")
@_device_opt
def ensemble_command(model_a: str, model_b: str, output: Path, weight: float) -> None:
    """Save the +UC ensemble (1 - w) * MODEL_A + w * MODEL_B as a model directory."""
    from .training.pipeline import ensemble

    click.echo(f"saved {ensemble(model_a, model_b, output, weight=weight)}")


# -- analysis --------------------------------------------------------------------------------------------
@cli.group()
def analyze() -> None:
    """The papers' analyses of trained models, as JSON and PNG plots."""


_models_arg = click.argument("models", nargs=-1, required=True)
_out_opt = click.option("--out", "out_dir", default="analysis", show_default=True, type=click.Path(path_type=Path))
_pooler_opt = click.option("--pooler", help="override the pooler of single-encoder models")
_labels_opt = click.option("--labels", callback=lambda _ctx, _param, value: _split_list(value) if value else None,
                           help="comma-separated plot labels, one per model (default: from the paths)")


@analyze.command("align-uniform")
@_models_arg
@_out_opt
@_pooler_opt
@_labels_opt
@_device_opt
def analyze_align_uniform(models: tuple[str, ...], out_dir: Path, pooler: str | None, labels: list[str] | None) -> None:
    """Alignment (STS-B test pairs with gold > 4) and uniformity of MODELS, with the scatter plot."""
    from .analysis.runners import align_uniform

    for r in align_uniform(list(models), out_dir, pooler=pooler, labels=labels):
        click.echo(f"{r.label}: alignment {r.alignment:.4f}  uniformity {r.uniformity:.4f}  STS-B test {r.stsb_test:.2f}")
    click.echo(f"wrote {out_dir}/align_uniform.png and .json")


@analyze.command("attention")
@click.argument("model")
@_out_opt
@_pooler_opt
@click.option("--sentence", default="A man is playing the guitar.", show_default=True, help="sentence of the heat-map")
@click.option("--label", help="the model's name in the plots (default: from the path)")
@_device_opt
def analyze_attention(model: str, out_dir: Path, pooler: str | None, sentence: str, label: str | None) -> None:
    """CLS energy weight and attention sink per layer, a heat-map, norm statistics."""
    from .analysis.runners import attention_report

    report = attention_report(model, out_dir, pooler=pooler, sentence_for_heatmap=sentence, label=label)
    for enc in report.members:
        click.echo(f"{enc.member}: E_CLS per layer {' '.join(f'{v:.3f}' for v in enc.cls_energy)} "
                   f"(mean {enc.cls_energy_mean:.3f}); attention to [CLS] {' '.join(f'{v:.3f}' for v in enc.attention_cls)}")
    click.echo(f"wrote {out_dir}/attention.json and plots")


@analyze.command("cost")
@click.argument("model")
@click.option("--seq-len", default=64, show_default=True, type=int)
@click.option("--score", type=float, help="score for the efficiency eta = score / GMAC")
@click.option("--score-task", type=click.Choice(["stsb", "avg-available"]), help="compute the score on this test set")
@_pooler_opt
@_device_opt
def analyze_cost(model: str, seq_len: int, score: float | None, score_task: str | None, pooler: str | None) -> None:
    """Inference cost in GMACs of one sentence of --seq-len tokens (counted from the model), and efficiency."""
    from .analysis.runners import cost_report

    r = cost_report(model, seq_len=seq_len, score=score, score_task=score_task, pooler=pooler)
    eta = f"  score {r.score:.2f}  eta {r.efficiency:.2f}" if r.efficiency is not None else ""
    click.echo(f"{model}: {r.gmacs:.3f} GMAC at {seq_len} tokens ({r.kind}, {len(r.members)} encoder(s)){eta}")


@analyze.command("density")
@_models_arg
@_out_opt
@_pooler_opt
@_labels_opt
@_device_opt
def analyze_density(models: tuple[str, ...], out_dir: Path, pooler: str | None, labels: list[str] | None) -> None:
    """Cosine-similarity density by gold-score group on STS-B test."""
    from .analysis.runners import density_report

    density_report(list(models), out_dir, pooler=pooler, labels=labels)
    click.echo(f"wrote {out_dir}/similarity_density.png and .json")


@cli.command("seeds", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", required=True, type=click.Path(path_type=Path))
@click.option("--seeds", default="1,2,3,4,5", show_default=True)
@click.option("--variant", default="")
@click.option("--results", default="benchmarks/results/seeds.jsonl", show_default=True, type=click.Path(path_type=Path))
@click.option("--compare", nargs=2, help="two configuration labels (method/variant) for the paired test")
@_out_opt
@click.argument("overrides", nargs=-1)
def seeds_command(config_file: Path, seeds: str, variant: str, results: Path, compare: tuple[str, str] | None,
                  out_dir: Path, overrides: tuple[str, ...]) -> None:
    """Run one configuration over several seeds (recorded seeds are skipped); mean, std, paired test."""
    from .analysis.runners import seeds_report, seeds_run
    from .reporting.tables import read_records

    seed_list = [int(s) for s in _split_list(seeds)]
    seeds_run(config_file, list(overrides), seed_list, results_file=results, variant=variant, echo=click.echo)
    a, b = compare if compare else (None, None)
    report = seeds_report(read_records(results), out_dir, a_variant=a, b_variant=b)
    click.echo(report.markdown)


@cli.command("ablate", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", required=True, type=click.Path(path_type=Path))
@click.option("--results", default="benchmarks/results/ablation.jsonl", show_default=True, type=click.Path(path_type=Path))
@click.option("--subset", "subsets", multiple=True, metavar="TERM+TERM",
              help="train only this subset of the loss terms (repeatable; default: every non-empty subset), "
                   "e.g. to share the subsets out between machines")
@_out_opt
@click.argument("overrides", nargs=-1)
def ablate_command(config_file: Path, results: Path, subsets: tuple[str, ...], out_dir: Path,
                   overrides: tuple[str, ...]) -> None:
    """Train a method with every non-empty subset of its loss terms."""
    from .analysis.runners import ablation_report, ablation_run
    from .reporting.tables import read_records

    chosen = [tuple(t.strip() for t in s.split("+")) for s in subsets] or None
    run = ablation_run(config_file, chosen, list(overrides), results_file=results, echo=click.echo)
    report = ablation_report(read_records(results), run.terms, out_dir, method=run.method)
    click.echo(report.markdown)


# -- reporting -------------------------------------------------------------------------------------------
@cli.command("report")
@click.option("--results", "results_file", default="benchmarks/results/protocol.jsonl", show_default=True,
              type=click.Path(path_type=Path), help="results records (JSONL)")
@click.option("--seeds", "seeds_file", default="benchmarks/results/seeds.jsonl", show_default=True,
              type=click.Path(path_type=Path), help="records of `cselab seeds` (table rendered when the file exists)")
@click.option("--ablation", "ablation_file", default="benchmarks/results/ablation.jsonl", show_default=True,
              type=click.Path(path_type=Path), help="records of `cselab ablate` (table rendered when the file exists)")
@click.option("--compare", nargs=2, help="two seeds configurations (method/variant) for the paired test")
@click.option("--update-readme", type=click.Path(path_type=Path),
              help="replace the <!-- cselab:protocol|seeds|ablation --> blocks of this README with the tables")
def report_command(results_file: Path, seeds_file: Path, ablation_file: Path, compare: tuple[str, str] | None,
                   update_readme: Path | None) -> None:
    """Render the results records as Markdown tables (methods x tasks, cost, provenance; seeds; ablations)."""
    from .reporting.tables import ablation_tables, protocol_table, read_records, replace_block, seeds_table

    tables = {"protocol": protocol_table(read_records(results_file))}
    if seeds_file.is_file():
        a, b = compare if compare else (None, None)
        tables["seeds"] = seeds_table(read_records(seeds_file), a, b)
    if ablation_file.is_file():
        tables["ablation"] = ablation_tables(read_records(ablation_file))
    if not update_readme:
        click.echo("\n\n".join(tables.values()))
        return
    text = update_readme.read_text(encoding="utf-8")
    for name, table in tables.items():
        if name == "protocol" or f"<!-- cselab:{name} -->" in text:
            text = replace_block(text, name, table)
    update_readme.write_text(text, encoding="utf-8")
    click.echo(f"updated {update_readme} ({', '.join(tables)})")


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
