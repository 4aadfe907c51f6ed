"""Attention analyses of a model, per member encoder (twins and ensembles): the CLS energy weight per layer
and its mean (JTCSE Eq. 6, Fig. 10), the attention received by [CLS] / final [SEP] / final punctuation per
layer (attention sink, JTCSE Fig. 9), a heat map of one sentence, and the norms of the last-layer CLS vs
the pooler output (TNCSE Discussion).

Decisions
---------
* The backbone reads the *plain* sentence (``[CLS] s [SEP]``, truncated at the encoder's ``max_length``):
  a prompt template is not applied, so models are compared on the same input.
* The default sentences are the first 256 distinct STS-B test sentences, in file order (sentence 1 then
  sentence 2 of each pair); the heat map shows the first, middle and last layers (averaged over heads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from cselab.errors import CselabError
from cselab.research.analysis.attention import (
    NormStatistics,
    analyze_attention,
    model_norm_statistics,
    punctuation_token_ids,
    sentence_attention_heatmap,
)
from cselab.research.analysis.report_inputs import (
    ModelRef,
    load_model_ref,
    member_encoders,
    model_kind,
    model_label,
    stsb_test_sentences,
)
from cselab.research.reporting.report_json import write_report_json

DEFAULT_HEATMAP_SENTENCE = "A man is playing the guitar."


@dataclass
class EncoderAttention:
    """Attention analysis of one encoder (one member of a twin/ensemble).

    ``cls_energy``: E_CLS per layer (layer 1 first, mean over sentences) and ``cls_energy_mean`` their mean;
    ``attention_cls``/``attention_sep``/``attention_punct``: attention received per layer (mean over heads,
    non-padding queries and sentences; punctuation over the ``n_with_punct`` sentences ending with one);
    ``uniform``: the level uniform attention would give; ``norms``: CLS vs pooler-output norm statistics,
    ``None`` with ``norms_note`` saying why when the backbone has no pooler.
    """

    member: str
    num_layers: int
    cls_energy: list[float]
    cls_energy_mean: float
    attention_cls: list[float]
    attention_sep: list[float]
    attention_punct: list[float]
    uniform: float
    n_sentences: int
    n_with_punct: int
    norms: NormStatistics | None
    norms_note: str | None
    heatmap: str | None


@dataclass
class AttentionReport:
    """Attention analyses of a model: one :class:`EncoderAttention` per member encoder, and the files written."""

    label: str
    model: str
    kind: str
    n_sentences: int
    heatmap_sentence: str | None
    heatmap_layers: list[int]
    members: list[EncoderAttention]
    files: dict[str, str] = field(default_factory=dict)


def _default_layers(n_layers: int) -> list[int]:
    return sorted({0, n_layers // 2, n_layers - 1})


def attention_report(model: ModelRef, out_dir: str | Path, *, sentences: Sequence[str] | None = None,
                     sentence_for_heatmap: str | None = DEFAULT_HEATMAP_SENTENCE,
                     heatmap_layers: Sequence[int] | None = None,
                     pooler: str | None = None, max_length: int | None = None, batch_size: int = 32,
                     label: str | None = None, senteval_dir: Path | None = None) -> AttentionReport:
    """CLS energy weight per layer and its mean, attention received by [CLS] / final [SEP] / final
    punctuation per layer, a heat map of ``sentence_for_heatmap`` and the norm statistics of the last-layer
    CLS vs the pooler output, for every member encoder (JTCSE Eq. 6, Figs. 9-10; TNCSE Discussion).

    ``sentences`` default to the first 256 distinct STS-B test sentences; ``heatmap_layers`` (0-based,
    negative from the end) default to the first, middle and last layer; ``sentence_for_heatmap=None`` draws
    no heat map. Writes ``cls_energy.png``, ``attention_sink.png``, ``attention_heatmap[_<member>].png`` and
    ``attention.json`` into ``out_dir``.
    """
    out = Path(out_dir)
    loaded = load_model_ref(model, pooler)
    members = member_encoders(loaded)
    texts = list(sentences) if sentences is not None else stsb_test_sentences(senteval_dir=senteval_dir)
    if not texts:
        raise CselabError("attention analysis needs at least one sentence")
    reports: list[EncoderAttention] = []
    layers_used: list[int] = []
    for name, enc in members:
        tok = enc.tokenizer
        enc_in = tok(texts, padding=True, truncation=True, max_length=max_length or enc.max_length, return_tensors="pt")
        analysis = analyze_attention(enc.backbone, enc_in["input_ids"], enc_in["attention_mask"],
                                     sep_token_id=tok.sep_token_id, punctuation_ids=punctuation_token_ids(tok),
                                     batch_size=batch_size)
        layers_used = list(heatmap_layers) if heatmap_layers is not None else _default_layers(analysis.num_layers)
        heatmap: Path | None = None
        if sentence_for_heatmap is not None:
            heatmap = out / ("attention_heatmap.png" if len(members) == 1 else f"attention_heatmap_{_slug(name)}.png")
            sentence_attention_heatmap(enc.backbone, tok, sentence_for_heatmap, heatmap, layers=layers_used)
        try:
            norms, note = model_norm_statistics(enc.backbone, enc_in["input_ids"], enc_in["attention_mask"],
                                                batch_size=batch_size), None
        except CselabError as exc:  # no pooler: the comparison does not exist for this backbone
            norms, note = None, f"skipped: {exc}"
        sink, energy = analysis.sink, analysis.energy
        reports.append(EncoderAttention(
            member=name, num_layers=analysis.num_layers, cls_energy=energy.per_layer, cls_energy_mean=energy.mean,
            attention_cls=sink.cls, attention_sep=sink.sep, attention_punct=sink.punct, uniform=sink.uniform,
            n_sentences=sink.n_sentences, n_with_punct=sink.n_with_punct, norms=norms, norms_note=note,
            heatmap=str(heatmap) if heatmap is not None else None))
    label = label or model_label(model)
    files = _attention_figures(reports, out, label)
    report = AttentionReport(label=label, model=str(model) if not isinstance(model, nn.Module) else label,
                             kind=model_kind(loaded), n_sentences=len(texts), heatmap_sentence=sentence_for_heatmap,
                             heatmap_layers=layers_used, members=reports, files=files)
    write_report_json(out / "attention.json", {"analysis": "attention", **asdict(report)})
    files["json"] = str(out / "attention.json")
    return report


def _attention_figures(reports: Sequence[EncoderAttention], out: Path, label: str) -> dict[str, str]:
    """The CLS-energy and attention-sink figures of every member, and the heat maps already drawn, by name."""
    from cselab.research.reporting.plots import plot_attention_sink, plot_cls_energy_per_layer

    return {
        "cls_energy": str(plot_cls_energy_per_layer({r.member: r.cls_energy for r in reports}, out / "cls_energy.png",
                                                    title=f"CLS energy weight per layer: {label}")),
        "attention_sink": str(plot_attention_sink(
            {r.member: _sink_stats(r) for r in reports}, out / "attention_sink.png",
            title=f"Attention received per layer: {label}")),
        **{f"heatmap_{r.member}": r.heatmap for r in reports if r.heatmap is not None},
    }


def _slug(name: str) -> str:
    return name.replace("/", "_")


def _sink_stats(r: EncoderAttention) -> Any:
    """The plotting view of a member's sink numbers (per-sentence arrays are not kept in the report)."""
    from cselab.research.analysis.attention import AttentionSinkStats

    empty = np.empty((r.num_layers, 0))
    return AttentionSinkStats(cls=r.attention_cls, sep=r.attention_sep, punct=r.attention_punct, uniform=r.uniform,
                              n_sentences=r.n_sentences, n_with_punct=r.n_with_punct, cls_per_sentence=empty,
                              sep_per_sentence=empty, punct_per_sentence=empty)
