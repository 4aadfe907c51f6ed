"""``cselab export``: a model for serving on CPUs (ONNX, OpenVINO, int8)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cselab.vocabulary import FORMATS, QUANTIZATIONS


@click.command("export")
@click.argument("model")
@click.option("--format", "fmt", required=True, type=click.Choice(FORMATS),
              help="the files sentence-transformers' backend of that name loads")
@click.option("--quantize", type=click.Choice(QUANTIZATIONS),
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

    path = export_model(model, fmt, quantize, output=output, calibration=calibration)
    manifest = json.loads((path / "cselab_export.json").read_text())
    check = manifest["check"]
    click.echo(f"wrote {path} ({fmt} {quantize or 'fp32'}); against torch on {check['sentences']} sentences: "
               f"max |diff| {check['max_abs_diff']:.2e}, min cosine {check['min_cosine']:.6f}")
    click.echo(f'load: SentenceTransformer("{path}", backend="{fmt}") or cselab encode {path} --backend {fmt} ...')
