"""``cselab data``: fetch, download and build the data sets, corpora and models cselab works with."""

from __future__ import annotations

from pathlib import Path

import click

from cselab.cli.options import POSITIVE, device_opt, writable_dir
from cselab.errors import CselabError


@click.group()
def data() -> None:
    """Obtain evaluation sets, training corpora and checkpoints."""


@data.command("fetch")
@click.argument("target")
@click.option("--from", "from_dir", type=click.Path(path_type=Path),
              help="directory holding already downloaded archives (paper targets: wiki1m_for_simcse.txt, "
              "senteval.tar or an extracted SentEval data directory)")
@click.option("--with-stsb-train", is_flag=True, help="corpus: also build default+stsb-train (unlabelled STS-B train)")
@click.option("--verify", is_flag=True, help="re-check every file of TARGET against the size and sha256 its manifest "
              "recorded")
@click.option("--rebuild", is_flag=True, help="fetch TARGET again even if it is in (e.g. after --verify found a "
              "changed file); a directory holding files cselab did not write is refused, never replaced")
def data_fetch(target: str, from_dir: Path | None, with_stsb_train: bool, verify: bool, rebuild: bool) -> None:
    """Fetch TARGET: sts, corpus, parallel-de, models, models-mpnet, models-e5, zeroshot, domains, domains-check
    or all; the papers' own data from SimCSE's release over HTTP: wiki1m, senteval (STS12-16, STS-B, SICK-R for
    --senteval-dir), sickr (unlabelled SICK-R sentences), wiki1m-sickr, or papers (all four)."""
    from cselab.data.registry.fetch import fetch

    path = fetch(target, from_dir=from_dir, include_stsb_train=with_stsb_train, verify=verify, rebuild=rebuild)
    click.echo(f"ready: {path}")


@data.command("rtt")
@click.argument("text", type=click.Path(path_type=Path))
@click.option("--via", default="fr,ru", show_default=True, help="pivot languages: TEXT -> each -> English")
@click.option("--output", "output_dir", required=True, type=click.Path(path_type=Path),
              callback=writable_dir("--output"), help="directory for <stem>.XX.txt and <stem>.rtt-XX.txt")
@click.option("--models", help="translation models by direction, e.g. en-fr=/models/opus-mt-en-fr,fr-en=NAME "
              "(hub names or local directories; default Helsinki-NLP/opus-mt-SRC-TGT)")
@click.option("--batch-size", default=32, show_default=True, type=POSITIVE)
@click.option("--max-length", default=256, show_default=True, type=POSITIVE, help="tokens in and out per sentence")
@click.option("--beams", default=1, show_default=True, type=POSITIVE, help="beam search width (1: greedy)")
@device_opt
def data_rtt(text: Path, via: str, output_dir: Path, models: str | None, batch_size: int, max_length: int,
             beams: int) -> None:
    """Round-trip translate TEXT (one sentence per line) through each --via language and back to English: the
    line-aligned files TNCSE's and JTCSE's stage 1 read (augmentation: {kind: file}). A killed run resumes."""
    from cselab.data.text.rtt import parse_languages, parse_models, round_trip

    languages, chosen = parse_languages(via), parse_models(models)
    if not text.is_file():
        raise CselabError(f"text file not found: {text}")
    for lang, path in round_trip(text, languages, output_dir, models=chosen, batch_size=batch_size,
                                 max_length=max_length, num_beams=beams).items():
        click.echo(f"{lang}: {path}")


@data.command("download")
@click.argument("target")
@click.option("--to", "dest", required=True, type=click.Path(path_type=Path), callback=writable_dir("--to"),
              help="directory to put the archives in")
def data_download(target: str, dest: Path) -> None:
    """Download TARGET's verified archives only (on a machine with registry access), for a later
    `cselab data fetch TARGET --from DIR` on a machine without; for the paper targets (wiki1m, senteval, ...), the
    published files."""
    from cselab.data.papers.paper_data import PAPER_TARGETS, download_paper
    from cselab.data.registry.download import download

    paths = download_paper(target, dest) if target in PAPER_TARGETS else download(target, dest)
    click.echo(f"{len(paths)} archive(s) in {dest}; on the offline machine: cselab data fetch {target} --from {dest}")


@data.command("indomain")
def data_indomain() -> None:
    """Build the STS-B adaptation protocol's in-domain corpora: STS-B train sentences minus held-out ones."""
    from cselab.data.evalsets.indomain import build_indomain_corpora

    for m in build_indomain_corpora():
        kept = f"{m['kept']} of {m['train_sentences']} STS-B train sentences kept"
        click.echo(f"{m['file']}: {kept}; not held out: {', '.join(m['not_held_out']) or 'none'}")
