"""``cselab eval``, ``cselab encode`` and ``cselab mteb``: score a model, embed text, run mteb's tasks."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cselab.cli.options import POSITIVE, backend_opt, device_opt, names, precision_opt, writable_file
from cselab.errors import CselabError, UsageError
from cselab.reporter import report, reporting
from cselab.vocabulary import POOLERS


@click.command("eval")
@click.argument("model")
@click.option("--pooler", help=f"override the pooler ({', '.join(POOLERS)})")
@click.option("--tasks", default="all", show_default=True, callback=names("--tasks"),
              help="comma-separated task names, or 'all'")
@click.option("--splits", default="dev,test", show_default=True, callback=names("--splits"),
              help="splits to score where a task has them")
@click.option("--senteval-dir", type=click.Path(path_type=Path),
              help="a SentEval data directory (full STS12-16, SICK-R)")
@click.option("--batch-size", default=128, show_default=True, type=POSITIVE)
@click.option("--max-length", type=POSITIVE, help="override the truncation length (at most the model's positions)")
@click.option("--json", "as_json", is_flag=True, help="print the scores as one JSON object (task -> split -> score)")
@click.option("--output", type=click.Path(path_type=Path), callback=writable_file("--output"),
              help="write the detailed results JSON here (default: $CSELAB_HOME/eval/, named after the model)")
@click.option("--labels", "labels_file", type=click.Path(path_type=Path),
              help="your text<TAB>label file: k-means V-measure and 5-fold logistic-regression accuracy (mteb)")
@click.option("--pairs", "pairs_file", type=click.Path(path_type=Path),
              help="your s1<TAB>s2<TAB>score file: Spearman of cosine similarity (mteb STS)")
@click.option("--retrieval", "retrieval_dir", type=click.Path(path_type=Path),
              help="your directory with queries.tsv, corpus.tsv, qrels.tsv: nDCG@10 (mteb retrieval)")
@click.option("--domain", help="a domain of the suite (`cselab data fetch domains`), e.g. bbc-news, "
              "or brown-genres, linux-man-overviews, fortune-topics, perl-faq (`domains-check`)")
@precision_opt
@backend_opt
@device_opt
def eval_command(model: str, pooler: str | None, tasks: list[str], splits: list[str], senteval_dir: Path | None,
                 batch_size: int, max_length: int | None, as_json: bool, output: Path | None, precision: str,
                 labels_file: Path | None, pairs_file: Path | None, retrieval_dir: Path | None,
                 domain: str | None, backend: str) -> None:
    """Score MODEL (cselab, sentence-transformers or HF directory, or hub name) on STS tasks, or with --labels /
    --pairs / --retrieval / --domain on those files instead (docs: cselab.evaluation.domain)."""
    if as_json:  # the scores alone: no bars
        click.get_current_context().with_resource(reporting(report().with_bars(False)))
    if any(value is not None for value in (labels_file, pairs_file, retrieval_dir, domain)):
        _refuse_sts_options(click.get_current_context())
        return _eval_domain(model, labels_file, pairs_file, retrieval_dir, domain, pooler=pooler,
                            batch_size=batch_size, max_length=max_length, as_json=as_json, output=output,
                            precision=precision, backend=backend)
    from cselab.evaluation.model_eval import evaluate_model, render_table

    scored = evaluate_model(model, pooler=pooler, tasks=tasks, splits=splits,
                            senteval_dir=senteval_dir, batch_size=batch_size, max_length=max_length,
                            output=output, precision=precision, backend=backend)
    if as_json:
        click.echo(json.dumps(scored["scores"]))
    else:
        click.echo(render_table(scored))
        click.echo(f"results: {scored['output']}")


def _refuse_sts_options(ctx: click.Context) -> None:
    """--tasks, --splits and --senteval-dir choose STS tasks: given with the files of the domain branch, they would
    be ignored, so they are refused."""
    from click.core import ParameterSource

    for name, option in (("tasks", "--tasks"), ("splits", "--splits"), ("senteval_dir", "--senteval-dir")):
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            raise UsageError(f"{option} chooses STS tasks and does not apply to --labels/--pairs/--retrieval/--domain, "
                             "which score their own files; drop it")


def _eval_domain(model: str, labels: Path | None, pairs: Path | None, retrieval: Path | None, domain: str | None, *,
                 pooler: str | None, batch_size: int, max_length: int | None, as_json: bool, output: Path | None,
                 precision: str, backend: str) -> None:
    """The domain branch of ``cselab eval``: every file checked before the model loads, then a table (or one JSON
    object task -> score with --json); the report goes to --output when given."""
    from cselab.evaluation.domain import evaluate_inputs, load_inputs, render_scores

    inputs = load_inputs(labels, pairs, retrieval, domain=domain)  # every file checked before the model loads
    scores, wall_s = evaluate_inputs(model, inputs, pooler=pooler, batch_size=batch_size, max_length=max_length,
                                     precision=precision, output=output, backend=backend)
    if as_json:
        click.echo(json.dumps(scores))
        return
    click.echo(render_scores(model, inputs, scores))
    click.echo(f"wall time {wall_s:.1f} s" + (f"; results: {output}" if output is not None else ""))


@click.command("encode")
@click.argument("model")
@click.option("--input", "input_file", required=True, type=click.Path(path_type=Path),
              help="text file, one sentence per line")
@click.option("--output", "output_file", required=True, type=click.Path(path_type=Path),
              callback=writable_file("--output"), help="output .npy file")
@click.option("--pooler", help="override the pooler")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE)
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings")
@precision_opt
@backend_opt
@device_opt
def encode_command(model: str, input_file: Path, output_file: Path, pooler: str | None, batch_size: int,
                   normalize: bool, precision: str, backend: str) -> None:
    """Embed every line of --input with MODEL and save a float32 [N, d] array to --output."""
    from cselab.evaluation.model_eval import encode_file

    shape = encode_file(model, input_file, output_file, pooler=pooler, batch_size=batch_size, normalize=normalize,
                        precision=precision, backend=backend)
    click.echo(f"wrote {output_file} {shape[0]}x{shape[1]}")


@click.command("mteb")
@click.argument("model")
@click.option("--tasks", default="STSBenchmark", show_default=True, callback=names("--tasks"),
              help="comma-separated mteb task names; cselab's zero-shot tasks: BBCNewsClassification, "
                   "BBCNewsClustering, TweetSentimentClassification (`cselab data fetch zeroshot`); "
                   "jtcse-zero-shot: the tasks JTCSE's tables name (data from the hub)")
@click.option("--pooler", help="override the pooler of a single-encoder model")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE)
@click.option("--hub", is_flag=True, help="take every task's data from the hub, not from the local data home")
@click.option("--results", type=click.Path(path_type=Path), callback=writable_file("--results"),
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
        from cselab.data.stores.jsonl import append_jsonl

        for task, splits in scores.items():
            append_jsonl(results, {"model": model, "variant": variant, "pooler": pooler, "task": task, "scores": splits,
                                   "config": {"batch_size": batch_size, "data": "hub" if hub else "local",
                                              "task": task_settings(task), "mteb": version("mteb")},
                                   "seed": task_settings(task).get("seed"), **provenance()})
        click.echo(f"appended {len(scores)} record(s) to {results}")
