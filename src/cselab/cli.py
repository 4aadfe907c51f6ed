"""Command line: thin wrappers that parse arguments, call the library and print.

Every user-input problem surfaces as ONE line ``error: ...`` and exit status 2, never a traceback: option
types carry their ranges, outputs are checked writable before any work, and :func:`main` is the one error
boundary (see :func:`user_error_message` for what counts as the user's problem). ``cselab --debug ...``
(or ``CSELAB_DEBUG=1``) shows the traceback instead; a genuine bug always shows one.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from cselab.errors import CselabError, UsageError, check_names, check_number
from cselab.fileio import check_writable_dir, check_writable_file
from cselab.training.run_directory import RunDirectory, check_run_options

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
POSITIVE = click.IntRange(min=1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cselab")
@click.option("--debug", is_flag=True, help="show the full traceback of an error")
def cli(debug: bool) -> None:
    """cselab: unsupervised contrastive learning of sentence embeddings."""


def _writable_file(what: str) -> Any:
    """A click callback: the option's path must be creatable as a file (checked before any work)."""
    return lambda _ctx, _param, value: check_writable_file(value, what) if value is not None else None


def _writable_dir(what: str) -> Any:
    return lambda _ctx, _param, value: check_writable_dir(value, what) if value is not None else None


def _names(option: str) -> Any:
    """A click callback: a comma-separated list of names that must not be empty (``--tasks ,`` is an error)."""
    return lambda _ctx, _param, value: check_names(value, option) if value is not None else None


def _number(option: str, minimum: float, maximum: float) -> Any:
    """A click callback: a finite number in [minimum, maximum] (nan and inf are refused)."""
    return lambda _ctx, _param, value: check_number(value, option, minimum=minimum, maximum=maximum) \
        if value is not None else None


def _not_empty(option: str) -> Any:
    """A click callback: text that, when given, is not empty (``--preset ""`` is not "no preset")."""
    def check(_ctx: Any, _param: Any, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty")
        return value
    return check


def _check_comparisons(pairs: Any) -> None:
    """A paired test of a configuration with itself compares nothing (t is nan): refused before any work."""
    for a, b in pairs:
        if a == b:
            raise UsageError(f"--compare {a} {b}: a configuration compared with itself; name two configurations")


def _seed_list(_ctx: Any, _param: Any, value: str) -> list[int]:
    seeds = []
    for text in _split_list(value):
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


# -- data ------------------------------------------------------------------------------------------------
@cli.group()
def data() -> None:
    """Obtain evaluation sets, training corpora and checkpoints."""


@data.command("fetch")
@click.argument("target")
@click.option("--from", "from_dir", type=click.Path(path_type=Path), help="directory holding already downloaded archives")
@click.option("--with-stsb-train", is_flag=True, help="corpus: also build default+stsb-train (unlabelled STS-B train)")
def data_fetch(target: str, from_dir: Path | None, with_stsb_train: bool) -> None:
    """Fetch TARGET: sts, corpus, parallel-de, models, models-mpnet, models-e5, zeroshot, domains, domains-check or all."""
    from cselab.data.fetch import fetch

    path = fetch(target, from_dir=from_dir, include_stsb_train=with_stsb_train, progress=click.echo)
    click.echo(f"ready: {path}")


@data.command("download")
@click.argument("target")
@click.option("--to", "dest", required=True, type=click.Path(path_type=Path), callback=_writable_dir("--to"),
              help="directory to put the archives in")
def data_download(target: str, dest: Path) -> None:
    """Download TARGET's verified archives only (on a machine with registry access), for a later
    `cselab data fetch TARGET --from DIR` on a machine without."""
    from cselab.data.download import download

    paths = download(target, dest, progress=click.echo)
    click.echo(f"{len(paths)} archive(s) in {dest}; on the offline machine: cselab data fetch {target} --from {dest}")


@data.command("indomain")
def data_indomain() -> None:
    """Build the STS-B adaptation protocol's in-domain corpora: STS-B train sentences minus held-out ones."""
    from cselab.data.indomain import build_indomain_corpora

    for m in build_indomain_corpora():
        kept = f"{m['kept']} of {m['train_sentences']} STS-B train sentences kept"
        click.echo(f"{m['file']}: {kept}; not held out: {', '.join(m['not_held_out']) or 'none'}")


# -- evaluation ------------------------------------------------------------------------------------------
def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


_precision_opt = click.option(
    "--precision", type=click.Choice(["fp32", "bf16", "auto"]), default="fp32", show_default=True,
    help="bf16 autocast, or auto: bf16 where a matmul probe on this machine says it pays (cached per machine)")


def _set_device(_ctx: Any, _param: Any, value: str) -> str:
    from cselab.runtime.devices import set_inference_device

    set_inference_device(value)
    return value


_device_opt = click.option("--device", default="auto", show_default=True, expose_value=False, callback=_set_device,
                           help="where models compute: cpu, cuda, cuda:N; auto = CUDA when present")
# the choices are cselab.export.BACKENDS, not imported here: the CLI starts without torch
_backend_opt = click.option(
    "--backend", type=click.Choice(["torch", "onnx", "openvino"]), default="torch", show_default=True,
    help="onnx/openvino: run a directory `cselab export` wrote with ONNX Runtime / OpenVINO (CPU)")


@cli.command("eval")
@click.argument("model")
@click.option("--pooler", help="override the pooler (cls, cls_before_pooler, mean, first_last_avg, pooler, mask)")
@click.option("--tasks", default="all", show_default=True, callback=_names("--tasks"),
              help="comma-separated task names, or 'all'")
@click.option("--splits", default="dev,test", show_default=True, callback=_names("--splits"),
              help="splits to score where a task has them")
@click.option("--senteval-dir", type=click.Path(path_type=Path), help="a SentEval data directory (full STS12-16, SICK-R)")
@click.option("--batch-size", default=128, show_default=True, type=POSITIVE)
@click.option("--max-length", type=POSITIVE, help="override the truncation length (at most the model's positions)")
@click.option("--json", "as_json", is_flag=True, help="print the scores as one JSON object (task -> split -> score)")
@click.option("--output", type=click.Path(path_type=Path), callback=_writable_file("--output"),
              help="write the detailed results JSON here (default: $CSELAB_HOME/eval/, named after the model)")
@click.option("--labels", "labels_file", type=click.Path(path_type=Path),
              help="your text<TAB>label file: k-means V-measure and 5-fold logistic-regression accuracy (mteb)")
@click.option("--pairs", "pairs_file", type=click.Path(path_type=Path),
              help="your s1<TAB>s2<TAB>score file: Spearman of cosine similarity (mteb STS)")
@click.option("--retrieval", "retrieval_dir", type=click.Path(path_type=Path),
              help="your directory with queries.tsv, corpus.tsv, qrels.tsv: nDCG@10 (mteb retrieval)")
@click.option("--domain", help="a domain of the suite (`cselab data fetch domains`), e.g. bbc-news, or brown-genres (`domains-check`)")
@_precision_opt
@_backend_opt
@_device_opt
def eval_command(model: str, pooler: str | None, tasks: list[str], splits: list[str], senteval_dir: Path | None,
                 batch_size: int, max_length: int | None, as_json: bool, output: Path | None, precision: str,
                 labels_file: Path | None, pairs_file: Path | None, retrieval_dir: Path | None,
                 domain: str | None, backend: str) -> None:
    """Score MODEL (cselab, sentence-transformers or HF directory, or hub name) on STS tasks, or with --labels /
    --pairs / --retrieval / --domain on those files instead (docs: cselab.evaluation.domain)."""
    if labels_file or pairs_file or retrieval_dir or domain:
        from cselab.evaluation.domain_cli import eval_domain_command

        return eval_domain_command(model, labels_file, pairs_file, retrieval_dir, domain, pooler=pooler,
                                   batch_size=batch_size, max_length=max_length, as_json=as_json, output=output,
                                   precision=precision)
    from cselab.evaluation.model_eval import evaluate_model, render_table

    report = evaluate_model(model, pooler=pooler, tasks=tasks, splits=splits,
                            senteval_dir=senteval_dir, batch_size=batch_size, max_length=max_length,
                            output=output, progress=not as_json, precision=precision, backend=backend)
    if as_json:
        click.echo(json.dumps(report["scores"]))
    else:
        click.echo(render_table(report))
        click.echo(f"results: {report['output']}")


# -- encoding --------------------------------------------------------------------------------------------
@cli.command("encode")
@click.argument("model")
@click.option("--input", "input_file", required=True, type=click.Path(path_type=Path), help="text file, one sentence per line")
@click.option("--output", "output_file", required=True, type=click.Path(path_type=Path),
              callback=_writable_file("--output"), help="output .npy file")
@click.option("--pooler", help="override the pooler")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE)
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings")
@_precision_opt
@_backend_opt
@_device_opt
def encode_command(model: str, input_file: Path, output_file: Path, pooler: str | None, batch_size: int, normalize: bool,
                   precision: str, backend: str) -> None:
    """Embed every line of --input with MODEL and save a float32 [N, d] array to --output."""
    from cselab.evaluation.model_eval import encode_file

    shape = encode_file(model, input_file, output_file, pooler=pooler, batch_size=batch_size, normalize=normalize,
                        precision=precision, backend=backend)
    click.echo(f"wrote {output_file} {shape[0]}x{shape[1]}")


# -- export for serving ------------------------------------------------------------------------------------
@cli.command("export")
@click.argument("model")
@click.option("--format", "fmt", required=True, type=click.Choice(["onnx", "openvino"]),
              help="the files sentence-transformers' backend of that name loads")
@click.option("--quantize", type=click.Choice(["int8"]),
              help="int8: dynamic for onnx; static for openvino, calibrated on --calibration or the fetched corpus")
@click.option("--output", type=click.Path(path_type=Path),
              help="a new directory (default: MODEL-FORMAT[-int8] beside MODEL); only an earlier export is replaced")
@click.option("--calibration", type=click.Path(path_type=Path),
              help="openvino int8: your sentences, one a line (default: the corpus of `cselab data fetch corpus`)")
def export_command(model: str, fmt: str, quantize: str | None, output: Path | None, calibration: Path | None) -> None:
    """Export MODEL for CPU serving: SentenceTransformer(DIR, backend=FORMAT) or cselab's --backend FORMAT loads it."""
    from cselab.export import (
        export_model,  # optional extra: cselab[export] (onnx, onnxruntime, openvino, nncf)
    )

    path = export_model(model, fmt, quantize, output=output, calibration=calibration, echo=click.echo)
    manifest = json.loads((path / "cselab_export.json").read_text())
    check = manifest["check"]
    click.echo(f"wrote {path} ({fmt} {quantize or 'fp32'}); against torch on {check['sentences']} sentences: "
               f"max |diff| {check['max_abs_diff']:.2e}, min cosine {check['min_cosine']:.6f}")
    click.echo(f'load: SentenceTransformer("{path}", backend="{fmt}") or cselab encode {path} --backend {fmt} ...')


# -- MTEB ------------------------------------------------------------------------------------------------
@cli.command("mteb")
@click.argument("model")
@click.option("--tasks", default="STSBenchmark", show_default=True, callback=_names("--tasks"),
              help="comma-separated mteb task names; cselab's zero-shot tasks: BBCNewsClassification, "
                   "BBCNewsClustering, TweetSentimentClassification (`cselab data fetch zeroshot`)")
@click.option("--pooler", help="override the pooler of a single-encoder model")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE)
@click.option("--hub", is_flag=True, help="take every task's data from the hub, not from the local data home")
@click.option("--results", type=click.Path(path_type=Path), callback=_writable_file("--results"),
              help="append one record per task to this JSONL")
@click.option("--variant", default="", help="label of the model in the results records")
def mteb_command(model: str, tasks: list[str], pooler: str | None, batch_size: int, hub: bool, results: Path | None,
                 variant: str) -> None:
    """Run mteb's tasks on MODEL (STSBenchmark reads the fetched STS-B unless --hub)."""
    try:
        from cselab.evaluation.mteb_adapter import run_mteb, task_settings
    except ImportError as exc:
        raise CselabError(f"mteb is not installed ({exc}): pip install 'cselab[mteb]'") from exc
    from importlib.metadata import version

    from cselab.provenance import provenance

    scores = run_mteb(model, tasks, batch_size=batch_size, local=not hub, pooler=pooler)
    for task, splits in scores.items():
        click.echo(f"{task}: " + "  ".join(f"{split} {score:.2f}" for split, score in splits.items()))
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        with open(results, "a", encoding="utf-8") as f:
            for task, splits in scores.items():
                record = {"model": model, "variant": variant, "pooler": pooler, "task": task, "scores": splits,
                          "config": {"batch_size": batch_size, "data": "hub" if hub else "local",
                                     "task": task_settings(task), "mteb": version("mteb")},
                          "seed": task_settings(task).get("seed"), **provenance()}
                f.write(json.dumps(record) + "\n")
        click.echo(f"appended {len(scores)} record(s) to {results}")


# -- training --------------------------------------------------------------------------------------------
_preset_opt = click.option("--preset", callback=_not_empty("--preset"),
                           help="a preset shipped with cselab instead of --config, e.g. simcse/cpu-minilm")


def _config_file(config_file: Path | None, preset: str | None, *, required: bool = False) -> Path | None:
    """The YAML file that --config or --preset names."""
    if config_file is not None and preset is not None:
        raise UsageError("give --config FILE or --preset NAME, not both")
    if preset is not None:
        from cselab.config.presets import preset_path

        return preset_path(preset)
    if required and config_file is None:
        raise CselabError("give --config FILE or --preset NAME (`cselab presets` lists the presets)")
    return config_file


@cli.command("presets")
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


@cli.group("config")
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


@cli.command("train", context_settings={"ignore_unknown_options": True})
@click.option("--method", help="training method (simcse, ...); overrides the config's")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML config file")
@_preset_opt
@click.option("--resume", is_flag=True, help="continue the run in train.output_dir exactly where it stopped")
@click.option("--results", type=click.Path(path_type=Path), help="append a results record (test scores) to this JSONL")
@click.option("--variant", default="", help="label of this run in the results record (e.g. '+DCL only')")
@click.option("--row", default="", help="identifier of the results row (e.g. a protocol row's name)")
@_run_dir_options
@click.argument("overrides", nargs=-1)
def train_command(method: str | None, config_file: Path | None, preset: str | None, resume: bool,
                  results: Path | None, variant: str, row: str, overwrite: bool, allow_change: tuple[str, ...],
                  overrides: tuple[str, ...]) -> None:
    """Train a model. OVERRIDES are KEY=VALUE pairs, e.g. train.lr=1e-5 model.pooler=cls."""
    from cselab.config.run_config import load_config

    check_run_options(resume, overwrite, allow_change)
    config_file = _config_file(config_file, preset)
    config = load_config(config_file, list(overrides), method=method)
    source = f"preset {preset}" if preset else str(config_file) if config_file else None
    with RunDirectory(config.train.output_dir):  # a second run into it is refused before torch loads
        from cselab.experiments.runs import train_and_record

        summary = train_and_record(config, resume=resume, results_file=results, variant=variant, row=row,
                                   config_source=source, overrides=list(overrides),
                                   overwrite=overwrite, allow_change=allow_change)
    click.echo(summary)


@cli.command("distill", context_settings={"ignore_unknown_options": True})
@click.argument("teacher")
@click.option("--student", required=True, help="backbone of the single-encoder student")
@click.option("--corpus", help="training sentences (name or file); default: the preset's or config's data.corpus")
@click.option("--output-dir", required=True, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="YAML with training settings")
@_preset_opt
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
    from cselab.experiments.pipeline import distill_config
    from cselab.experiments.runs import train_and_record

    check_run_options(resume, overwrite, allow_change)
    config_file = _config_file(config_file, preset)
    if device:
        overrides = (*overrides, f"train.device={device}")
    config = distill_config(teacher, student, corpus, output_dir=output_dir, config_file=config_file,
                            overrides=list(overrides))
    click.echo(train_and_record(config, resume=resume, results_file=results, variant="-D",
                                config_source=str(config_file) if config_file else None, overrides=list(overrides),
                                overwrite=overwrite, allow_change=allow_change))


@cli.command("adapt", context_settings={"ignore_unknown_options": True})
@click.argument("text", type=click.Path(path_type=Path))
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True, help="the encoder to adapt")
@click.option("--teacher", help="distil this larger encoder's cosines instead of SimCSE (e.g. all-mpnet-base-v2, "
              "after `cselab data fetch models-mpnet`)")
@click.option("--select", default="fixed-budget", show_default=True, metavar="fixed-budget|teacher-agreement",
              help="the model kept: the last step, or (with --teacher) the step that agrees best with the teacher "
              "on held-out pairs of your text (the untouched model is a candidate)")
@click.option("--no-teacher", is_flag=True, help="SimCSE on a fixed budget: the default, kept for scripts that name it")
@click.option("--output", "output_dir", required=True, type=click.Path(path_type=Path), callback=_writable_dir("--output"),
              help="the run directory; the adapted model is OUTPUT/best")
@click.option("--steps", type=POSITIVE, help="training steps (default: three passes over the text, 100 to 450)")
@click.option("--batch-size", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--max-length", type=click.IntRange(min=8), default=64, show_default=True, help="tokens per sentence")
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
def adapt_command(text: Path, model: str, teacher: str | None, select: str, no_teacher: bool, output_dir: Path,
                  steps: int | None, batch_size: int, max_length: int, seed: int, max_sentences: int | None,
                  labels: Path | None, pairs: Path | None, retrieval: Path | None, domain: str | None, resume: bool,
                  device: str, overrides: tuple[str, ...]) -> None:
    """A better encoder for TEXT (your unlabelled sentences, one per line) in one command.

    Trains MODEL with SimCSE (its own mean pooling, temperature 0.2) on a budget set from the text's size; with
    --teacher it distils the teacher's cosines of neighbour pairs of your sentences instead. It keeps the last step
    (--select teacher-agreement: the step that agrees best with the teacher on a held-out part of your text). No
    labels needed. With --labels/--pairs/--retrieval/--domain it scores MODEL before and after on your labelled
    data."""
    from cselab.adapt import plan_adapt

    overrides = (*overrides, f"train.device={device}")
    plan = plan_adapt(text, output_dir, model=model, teacher=teacher, no_teacher=no_teacher, steps=steps,
                      batch_size=batch_size, max_length=max_length, seed=seed, max_sentences=max_sentences,
                      select=select, overrides=overrides)
    evaluate = None
    if labels or pairs or retrieval or domain:
        from cselab.evaluation.domain import load_inputs, score_inputs

        inputs = load_inputs(labels, pairs, retrieval, domain=domain)  # every file checked before training

        def evaluate(encoder: Any) -> dict[str, float]:
            return score_inputs(encoder, inputs)
    from cselab.adapt import estimate_seconds, run_adapt, summary_of
    from cselab.training.run_directory import RunDirectory

    if output_dir.is_dir():
        RunDirectory(output_dir).claim()  # a directory holding the user's files is refused before models load
    click.echo(plan.describe())

    estimate = estimate_seconds(plan)
    click.echo(f"adapt: estimated {estimate / 60:.0f} min on this machine (training, its evaluations, the teacher pass; not loading models)")
    click.echo(summary_of(run_adapt(plan, resume=resume, evaluate=evaluate, echo=click.echo, estimate_s=estimate)))


@cli.command("ensemble")
@click.argument("model_a")
@click.argument("model_b")
@click.option("--output", required=True, type=click.Path(path_type=Path), callback=_writable_dir("--output"),
              help="a new directory (an existing model is never replaced)")
@click.option("--weight", default="0.7", show_default=True,
              help="w in (1 - w) * A + w * B, or 'dev': the --grid value with the best STS-B dev score")
@click.option("--grid", help="comma-separated weights tried with --weight dev (default: 0, 0.1, ..., 1)")
# the choices are sentence_model.COMBINE_MODES, not imported here: the CLI starts without torch (a test pins them)
@click.option("--combine", type=click.Choice(["sum", "concat"]), default="sum", show_default=True,
              help="sum: the papers' weighted sum of the vectors (equal sizes); concat: weighted unit vectors "
                   "side by side, cosine = (1 - w) cos_A + w cos_B (any sizes)")
@_device_opt
def ensemble_command(model_a: str, model_b: str, output: Path, weight: str, grid: str | None, combine: str) -> None:
    """Save the +UC ensemble (1 - w) * MODEL_A + w * MODEL_B as a model directory."""
    from cselab.experiments.ensemble import DEFAULT_GRID, ensemble, ensemble_chosen_on_dev

    if grid is not None and weight != "dev":
        raise UsageError(f"--grid applies only with --weight dev (the weight is fixed at {weight}); drop one")
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


# -- analysis --------------------------------------------------------------------------------------------
@cli.group()
def analyze() -> None:
    """The papers' analyses of trained models, as JSON and PNG plots."""


_models_arg = click.argument("models", nargs=-1, required=True)
_out_opt = click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
                        callback=_writable_dir("--out"), help="directory for the JSON and PNG files")
# seeds/ablate: the summary goes under the run unless --out says otherwise
_summary_out_opt = click.option("--out", "out_dir", type=click.Path(path_type=Path), callback=_writable_dir("--out"),
                                help="directory for the summary (default: train.output_dir)")
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
    from cselab.analysis.align_uniform_report import align_uniform

    for r in align_uniform(list(models), out_dir, pooler=pooler, labels=labels):
        click.echo(f"{r.label}: alignment {r.alignment:.4f}  uniformity {r.uniformity:.4f}  STS-B test {r.stsb_test:.2f}")
    click.echo(f"wrote {out_dir}/align_uniform.png and .json")


@analyze.command("attention")
@click.argument("model")
@_out_opt
@_pooler_opt
@click.option("--sentence", default="A man is playing the guitar.", show_default=True, callback=_not_empty("--sentence"),
              help="sentence of the heat-map")
@click.option("--label", help="the model's name in the plots (default: from the path)")
@_device_opt
def analyze_attention(model: str, out_dir: Path, pooler: str | None, sentence: str, label: str | None) -> None:
    """CLS energy weight and attention sink per layer, a heat-map, norm statistics."""
    from cselab.analysis.attention_report import attention_report

    report = attention_report(model, out_dir, pooler=pooler, sentence_for_heatmap=sentence, label=label)
    for enc in report.members:
        click.echo(f"{enc.member}: E_CLS per layer {' '.join(f'{v:.3f}' for v in enc.cls_energy)} "
                   f"(mean {enc.cls_energy_mean:.3f}); attention to [CLS] {' '.join(f'{v:.3f}' for v in enc.attention_cls)}")
    click.echo(f"wrote {out_dir}/attention.json and plots")


@analyze.command("cost")
@click.argument("model")
@click.option("--seq-len", default=64, show_default=True, type=POSITIVE, help="at most the model's positions")
@click.option("--score", type=float, callback=_number("--score", -100.0, 100.0),
              help="score (Spearman x 100, in [-100, 100]) for the efficiency eta = score / GMAC")
@click.option("--score-task", type=click.Choice(["stsb", "avg-available"]), help="compute the score on this test set")
@_pooler_opt
@_device_opt
def analyze_cost(model: str, seq_len: int, score: float | None, score_task: str | None, pooler: str | None) -> None:
    """Inference cost in GMACs of one sentence of --seq-len tokens (counted from the model), and efficiency."""
    from cselab.analysis.cost_report import cost_report

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
    from cselab.analysis.density_report import density_report

    density_report(list(models), out_dir, pooler=pooler, labels=labels)
    click.echo(f"wrote {out_dir}/similarity_density.png and .json")


def _run_dir(config_file: Path | None, overrides: tuple[str, ...]) -> Path:
    """train.output_dir of the configuration: where seeds/ablate keep their records and summary by default."""
    from cselab.config.run_config import load_config

    return Path(load_config(config_file, list(overrides)).train.output_dir)


@cli.command("seeds", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@_preset_opt
@click.option("--seeds", "seed_list", default="1,2,3,4,5", show_default=True, callback=_seed_list)
@click.option("--variant", default="")
@click.option("--results", type=click.Path(path_type=Path), callback=_writable_file("--results"),
              help="records (JSONL; default: train.output_dir/seeds.jsonl)")
@click.option("--compare", nargs=2, help="two configuration labels (method/variant) for the paired test")
@_summary_out_opt
@click.argument("overrides", nargs=-1)
def seeds_command(config_file: Path | None, preset: str | None, seed_list: list[int], variant: str,
                  results: Path | None, compare: tuple[str, str] | None, out_dir: Path | None,
                  overrides: tuple[str, ...]) -> None:
    """Run one configuration over several seeds (recorded seeds are skipped); mean, std, paired test."""
    from cselab.experiments.results import read_records
    from cselab.experiments.seeds import seeds_run
    from cselab.reporting.seeds_report import seeds_report

    _check_comparisons([compare] if compare else [])
    config_file = _config_file(config_file, preset, required=True)
    run_dir = _run_dir(config_file, overrides)
    results, out_dir = results or run_dir / "seeds.jsonl", out_dir or run_dir
    seeds_run(config_file, list(overrides), seed_list, results_file=results, variant=variant, echo=click.echo)
    a, b = compare if compare else (None, None)
    report = seeds_report(read_records(results, "seeds"), out_dir, a_variant=a, b_variant=b)
    click.echo(report.markdown)


@cli.command("ablate", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@_preset_opt
@click.option("--results", type=click.Path(path_type=Path), callback=_writable_file("--results"),
              help="records (JSONL; default: train.output_dir/ablation.jsonl)")
@click.option("--subset", "subsets", multiple=True, metavar="TERM+TERM",
              help="train only this subset of the loss terms (repeatable; default: every non-empty subset), "
                   "e.g. to share the subsets out between machines")
@_summary_out_opt
@click.argument("overrides", nargs=-1)
def ablate_command(config_file: Path | None, preset: str | None, results: Path | None, subsets: tuple[str, ...],
                   out_dir: Path | None, overrides: tuple[str, ...]) -> None:
    """Train a method with every non-empty subset of its loss terms."""
    from cselab.experiments.ablation import ablation_run
    from cselab.experiments.results import read_records
    from cselab.reporting.ablation_report import ablation_report

    config_file = _config_file(config_file, preset, required=True)
    run_dir = _run_dir(config_file, overrides)
    results, out_dir = results or run_dir / "ablation.jsonl", out_dir or run_dir

    chosen = [tuple(t.strip() for t in s.split("+")) for s in subsets] or None
    run = ablation_run(config_file, chosen, list(overrides), results_file=results, echo=click.echo)
    report = ablation_report(read_records(results, "ablation"), run.terms, out_dir, method=run.method)
    click.echo(report.markdown)


# -- reporting -------------------------------------------------------------------------------------------
@cli.command("report")
@click.option("--results", "results_file", type=click.Path(path_type=Path), help="results records of `cselab train --results`")
@click.option("--seeds", "seeds_file", type=click.Path(path_type=Path), help="records of `cselab seeds`")
@click.option("--ablation", "ablation_file", type=click.Path(path_type=Path), help="records of `cselab ablate`")
@click.option("--compare", nargs=2, multiple=True,
              help="two seeds configurations (method/variant) for a paired test; repeat for more pairs")
def report_command(results_file: Path | None, seeds_file: Path | None, ablation_file: Path | None,
                   compare: tuple[tuple[str, str], ...]) -> None:
    """Print the records as Markdown tables (methods x tasks, cost, provenance; seeds; ablations)."""
    from cselab.experiments.results import read_records
    from cselab.reporting.tables import ablation_tables, protocol_table, seeds_table

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


# -- the error boundary ----------------------------------------------------------------------------------
_OS_HINTS = {
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "give a file, not a directory",
    errno.EACCES: "check the permissions",
    errno.EPERM: "check the permissions",
    errno.EROFS: "the file system is read-only; choose another place",
    errno.ENOSPC: "the disk is full; free some space",
    errno.EEXIST: "it is in the way; move it or choose another path",
    errno.ENOTEMPTY: "it is in the way; move it or choose another path",
}


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message of an EXPECTED failure (bad input, a file-system refusal, a damaged or wrongly
    encoded file), or None for anything else: that is a bug, and its traceback is shown."""
    from pydantic import ValidationError

    if isinstance(exc, CselabError):
        return str(exc)
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else ""
        where += f" -> {exc.filename2}" if exc.filename2 is not None else ""
        what = exc.strerror or type(exc).__name__
        hint = _OS_HINTS.get(exc.errno or -1, "check the path and try again")
        return f"{what}: {where}; {hint}" if where else f"{what}; {hint}"
    if isinstance(exc, UnicodeDecodeError):
        return (f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}, {exc.encoding}); "
                "convert it to UTF-8 (e.g. iconv -t UTF-8)")
    if isinstance(exc, json.JSONDecodeError):
        return f"a JSON file is damaged ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"invalid value for {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> Any:
    """Console entry point, the one error boundary: an expected failure becomes ``error: <message>`` on one line
    of stderr and exit status 2 (Ctrl-C: what was kept, status 130); with ``--debug`` the traceback is shown."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args[: args.index("--")] if "--" in args else "--debug" in args
    debug = debug or os.environ.get("CSELAB_DEBUG", "") not in ("", "0")
    try:
        return cli.main(args=args, prog_name="cselab", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        # click turns Ctrl-C into Abort; the trainer's RunInterrupted (its cause) says what was kept
        cause = exc.__cause__ if isinstance(exc, click.exceptions.Abort) else exc
        message = str(cause) if isinstance(cause, KeyboardInterrupt) and str(cause) else "interrupted"
        click.echo(f"interrupted: {message}" if not message.startswith("interrupted") else message, err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        message = user_error_message(exc)
        if message is None or debug:
            raise
        click.echo(f"error: {_one_line(message)}", err=True)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":  # pragma: no cover
    main()
