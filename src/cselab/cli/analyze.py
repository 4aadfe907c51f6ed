"""``cselab analyze``: the papers' analyses of trained models (alignment/uniformity, attention, cost, density)."""

from __future__ import annotations

from pathlib import Path

import click

from cselab.cli.options import POSITIVE, device_opt, not_empty, number, output_opt, split_list


@click.group()
def analyze() -> None:
    """The papers' analyses of trained models, as JSON and PNG plots."""


_models_arg = click.argument("models", nargs=-1, required=True)
_out_opt = output_opt("--out", dest="out_dir", help="directory for the JSON and PNG files")
_pooler_opt = click.option("--pooler", help="override the pooler of single-encoder models")
_labels_opt = click.option("--labels", callback=lambda _ctx, _param, value: split_list(value) if value else None,
                           help="comma-separated plot labels, one per model (default: from the paths)")


@analyze.command("align-uniform")
@_models_arg
@_out_opt
@_pooler_opt
@_labels_opt
@device_opt
def analyze_align_uniform(models: tuple[str, ...], out_dir: Path, pooler: str | None, labels: list[str] | None) -> None:
    """Alignment (STS-B test pairs with gold > 4) and uniformity of MODELS, with the scatter plot."""
    from cselab.research.analysis.align_uniform_report import align_uniform

    for r in align_uniform(list(models), out_dir, pooler=pooler, labels=labels):
        click.echo(f"{r.label}: alignment {r.alignment:.4f}  uniformity {r.uniformity:.4f}  "
                   f"STS-B test {r.stsb_test:.2f}")
    click.echo(f"wrote {out_dir}/align_uniform.png and .json")


@analyze.command("attention")
@click.argument("model")
@_out_opt
@_pooler_opt
@click.option("--sentence", default="A man is playing the guitar.", show_default=True, callback=not_empty("--sentence"),
              help="sentence of the heat-map")
@click.option("--label", help="the model's name in the plots (default: from the path)")
@device_opt
def analyze_attention(model: str, out_dir: Path, pooler: str | None, sentence: str, label: str | None) -> None:
    """CLS energy weight and attention sink per layer, a heat-map, norm statistics."""
    from cselab.research.analysis.attention_report import attention_report

    report = attention_report(model, out_dir, pooler=pooler, sentence_for_heatmap=sentence, label=label)
    for enc in report.members:
        click.echo(f"{enc.member}: E_CLS per layer {' '.join(f'{v:.3f}' for v in enc.cls_energy)} "
                   f"(mean {enc.cls_energy_mean:.3f}); "
                   f"attention to [CLS] {' '.join(f'{v:.3f}' for v in enc.attention_cls)}")
    click.echo(f"wrote {out_dir}/attention.json and plots")


@analyze.command("cost")
@click.argument("model")
@click.option("--seq-len", default=64, show_default=True, type=POSITIVE, help="at most the model's positions")
@click.option("--score", type=float, callback=number("--score", -100.0, 100.0),
              help="score (Spearman x 100, in [-100, 100]) for the efficiency eta = score / GMAC")
@click.option("--score-task", type=click.Choice(["stsb", "avg-available"]), help="compute the score on this test set")
@_pooler_opt
@device_opt
def analyze_cost(model: str, seq_len: int, score: float | None, score_task: str | None, pooler: str | None) -> None:
    """Inference cost in GMACs of one sentence of --seq-len tokens (counted from the model), and efficiency."""
    from cselab.research.analysis.cost_report import cost_report

    r = cost_report(model, seq_len=seq_len, score=score, score_task=score_task, pooler=pooler)
    eta = f"  score {r.score:.2f}  eta {r.efficiency:.2f}" if r.efficiency is not None else ""
    click.echo(f"{model}: {r.gmacs:.3f} GMAC at {seq_len} tokens ({r.kind}, {len(r.members)} encoder(s)){eta}")


@analyze.command("density")
@_models_arg
@_out_opt
@_pooler_opt
@_labels_opt
@device_opt
def analyze_density(models: tuple[str, ...], out_dir: Path, pooler: str | None, labels: list[str] | None) -> None:
    """Cosine-similarity density by gold-score group on STS-B test."""
    from cselab.research.analysis.density_report import density_report

    density_report(list(models), out_dir, pooler=pooler, labels=labels)
    click.echo(f"wrote {out_dir}/similarity_density.png and .json")
