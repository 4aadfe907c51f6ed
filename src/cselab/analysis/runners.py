"""The analyses the papers report, as library functions over saved models and configs (METHODS.md section 7).

Each runner takes models by name or directory (anything :func:`cselab.models.sentence_model.load_model`
accepts, or an already built sentence model), computes with :mod:`cselab.analysis`, writes its PNG(s) and
one JSON result (with provenance: commit, machine, date) into ``out_dir`` and returns plain result objects.
The CLI (``cselab analyze ...``, ``cselab seeds``, ``cselab ablate``) only parses arguments and prints them.

* :func:`align_uniform` -- alignment (STS-B test pairs with gold > 4) and uniformity (every STS-B test
  sentence) of several models, scatter coloured by STS-B test Spearman (SimCSE Fig. 2, JTCSE Fig. 7).
* :func:`attention_report` -- CLS energy weight per layer and mean (JTCSE Eq. 6, Fig. 10), attention
  received by [CLS] / final [SEP] / final punctuation per layer (attention sink, JTCSE Fig. 9), a heat map
  for one sentence, and the norms of the last-layer CLS vs the pooler output (TNCSE Discussion); per
  member encoder for twins and ensembles.
* :func:`cost_report` -- GMACs for one sentence of ``seq_len`` tokens measured on the model itself (sum of
  the member encoders) and efficiency ``eta = score / GMAC`` (JTCSE Table VII).
* :func:`density_report` -- cosine-similarity density by gold group on STS-B test (JTCSE Fig. 5).
* :func:`seeds_run` / :func:`seeds_report` -- one configuration over seeds 1..5, mean and sample std, and
  a paired test between two configurations (JTCSE Figs. 6 and 8).
* :func:`ablation_run` -- a method with every non-empty subset of its loss terms.

Decisions
---------
* The STS-B test split is the data of align/uniform, density and the default attention sentences (the
  papers' choice); ``senteval_dir`` reads SentEval's copy of STS-B when given.
* Attention analyses read the backbone on the *plain* sentence (``[CLS] s [SEP]``, truncated at the
  encoder's ``max_length``): a prompt template is not applied, so models are compared on the same input.
  The default sentences are the first 256 distinct STS-B test sentences, in file order (sentence 1 then
  sentence 2 of each pair); the heat map shows the first, middle and last layers (averaged over heads).
* Cost counts the member *backbones* on a ``(1, seq_len)`` input (``seq_len`` = every token the encoder
  reads: special tokens and any template tokens included). Poolers other than the HF pooler (which runs
  inside the backbone and is counted) and the train-only MLP head cost no matrix product at inference.
* Seeds: run ``S`` uses ``train.seed=S`` and ``train.output_dir=<output_dir>-seed<S>`` (and a twin pipeline's
  shared ``stage1_dir`` becomes ``<stage1_dir>-seed<S>``: stage 1 depends on the seed). Ablation variant
  ``a+b`` sets ``method_options.loss_weights.<t>=0`` for every other term and writes to
  ``<output_dir>-<variant>`` (``-seed<S>`` appended when seeds are given). A run is skipped when the
  results file already has a record of the same method, variant and seed; if that record's effective
  configuration differs (ignoring output dir, device, threads and logging), the runner stops with an error
  instead of mixing two configurations under one name. A run whose output directory holds a saved state
  but no record (it was interrupted) is resumed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import CselabError
from ..models.encoder import check_length
from ..provenance import provenance
from .alignment_uniformity import sts_alignment_uniformity
from .attention import (
    NormStatistics,
    analyze_attention,
    model_norm_statistics,
    plot_attention_sink,
    punctuation_token_ids,
    sentence_attention_heatmap,
)
from .cost import count_gmacs, efficiency
from .plots import AlignUniformPoint, plot_alignment_uniformity, plot_seed_summary
from .significance import paired_test, summarize_seeds
from .similarity_density import plot_similarity_density, similarity_density

__all__ = [
    "DEFAULT_ATTENTION_SENTENCES",
    "DEFAULT_HEATMAP_SENTENCE",
    "DEFAULT_SEEDS",
    "AblationReport",
    "AblationRun",
    "AlignUniformResult",
    "AttentionReport",
    "CostResult",
    "DensityResult",
    "EncoderAttention",
    "SeedsReport",
    "SeedsRun",
    "ablation_run",
    "align_uniform",
    "attention_report",
    "cost_report",
    "density_report",
    "member_encoders",
    "model_label",
    "seeds_report",
    "seeds_run",
    "ablation_report",
    "all_terms_subsets",
    "stsb_test_sentences",
]

ModelRef = str | Path | nn.Module
DEFAULT_ATTENTION_SENTENCES = 256
DEFAULT_HEATMAP_SENTENCE = "A man is playing the guitar."
DEFAULT_SEEDS: tuple[int, ...] = (1, 2, 3, 4, 5)
# Effective-config keys that do not change what a run computes (skipped when matching records).
_IGNORED_CONFIG_KEYS = {("train", "output_dir"), ("train", "seed"), ("train", "device"), ("train", "threads"),
                        ("train", "tensorboard"), ("train", "log_every"), ("train", "save_every"),
                        ("train", "eval_batch_size"), ("method_options", "pipeline", "stage1_dir")}


# --------------------------------------------------------------------------------------------------
# models and data
# --------------------------------------------------------------------------------------------------


def model_label(model: ModelRef) -> str:
    """A short name for plots: the directory name, with its parent for ``.../best`` and ``.../last``."""
    if isinstance(model, nn.Module):
        return type(model).__name__
    path = Path(str(model).rstrip("/"))
    if path.name in ("best", "last") and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or str(model)


def _labels(models: Sequence[ModelRef], labels: Sequence[str] | None) -> list[str]:
    if labels is not None:
        if len(labels) != len(models):
            raise CselabError(f"{len(labels)} labels for {len(models)} models")
        out = [str(x) for x in labels]
    else:
        out = [model_label(m) for m in models]
    seen: dict[str, int] = {}
    unique = []
    for label in out:  # plots and JSON are keyed by label: make them distinct
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return unique


def _load(model: ModelRef, pooler: str | None) -> nn.Module:
    if isinstance(model, nn.Module):
        return model
    from ..models.sentence_model import load_model

    return load_model(model, pooler=pooler)


def member_encoders(model: nn.Module) -> list[tuple[str, Any]]:
    """The encoders a sentence model runs at inference, with names: ``[("encoder", enc)]`` for a single
    encoder, ``encoder_1``/``encoder_2`` for a twin, ``member_<i>[/...]`` for an ensemble (recursively)."""
    from ..models.encoder import Encoder

    if isinstance(model, Encoder):
        return [("encoder", model)]
    if hasattr(model, "named_members"):
        return [(member_name + ("" if name == "encoder" else f"/{name}"), enc)
                for member_name, member in model.named_members() for name, enc in member_encoders(member)]
    raise CselabError(f"cannot find the encoders of a {type(model).__name__}; expected an encoder, twin or ensemble")


def _model_kind(model: nn.Module) -> str:
    describe = getattr(model, "describe", None)
    return str(describe().get("kind", type(model).__name__)) if callable(describe) else type(model).__name__


def _stsb_test(senteval_dir: Path | None) -> Any:
    from ..data.sts import load_task

    return load_task("stsb", "test", senteval_dir=senteval_dir).subsets[0]


def stsb_test_sentences(limit: int | None = DEFAULT_ATTENTION_SENTENCES, *, senteval_dir: Path | None = None) -> list[str]:
    """The first ``limit`` distinct STS-B test sentences in file order (sentence 1, then 2, of each pair)."""
    sub = _stsb_test(senteval_dir)
    ordered = list(dict.fromkeys(s for pair in zip(sub.sentences1, sub.sentences2, strict=True) for s in pair))
    return ordered if limit is None else ordered[:limit]


def _encode_pairs(model: nn.Module, sub: Any, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings of both sides of every pair; each distinct sentence is encoded once."""
    sentences = list(dict.fromkeys([*sub.sentences1, *sub.sentences2]))
    index = {s: i for i, s in enumerate(sentences)}
    emb = model.encode(sentences, batch_size=batch_size)
    return emb[[index[s] for s in sub.sentences1]], emb[[index[s] for s in sub.sentences2]]


def _stsb_spearman(emb1: torch.Tensor, emb2: torch.Tensor, gold: np.ndarray) -> float:
    from ..evaluation.scoring import pair_cosine, spearman100

    return spearman100(pair_cosine(emb1, emb2), np.asarray(gold, dtype=float))


# --------------------------------------------------------------------------------------------------
# JSON output
# --------------------------------------------------------------------------------------------------


def _jsonable(obj: Any) -> Any:
    """Plain JSON values; nan/inf become null (strict JSON has no nan)."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _write_json(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_jsonable({**payload, **provenance()}), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------------------------------
# alignment and uniformity
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignUniformResult:
    """One model's alignment/uniformity on STS-B test (both lower is better) and its STS-B test Spearman x 100."""

    label: str
    model: str
    alignment: float
    uniformity: float
    n_positive_pairs: int
    n_sentences: int
    stsb_test: float


def align_uniform(models: Sequence[ModelRef], out_dir: str | Path, *, pooler: str | None = None,
                  labels: Sequence[str] | None = None, batch_size: int = 128,
                  senteval_dir: Path | None = None) -> list[AlignUniformResult]:
    """Alignment over STS-B test pairs with gold > 4 and uniformity over every STS-B test sentence (both
    sides of every pair) for each model (Wang & Isola 2020; SimCSE Fig. 2, JTCSE Fig. 7).

    Writes ``align_uniform.png`` (x = uniformity, y = alignment, points coloured by STS-B test Spearman)
    and ``align_uniform.json`` into ``out_dir``.
    """
    if not models:
        raise CselabError("align-uniform needs at least one model")
    out = Path(out_dir)
    sub = _stsb_test(senteval_dir)
    results = []
    for ref, label in zip(models, _labels(models, labels), strict=True):
        model = _load(ref, pooler)
        e1, e2 = _encode_pairs(model, sub, batch_size)
        au = sts_alignment_uniformity(e1, e2, sub.scores)
        results.append(AlignUniformResult(label=label, model=str(ref) if not isinstance(ref, nn.Module) else label,
                                          alignment=au.alignment, uniformity=au.uniformity,
                                          n_positive_pairs=au.n_positive_pairs, n_sentences=au.n_sentences,
                                          stsb_test=_stsb_spearman(e1, e2, sub.scores)))
        del model
    points = [AlignUniformPoint(r.label, r.alignment, r.uniformity, r.stsb_test) for r in results]
    plot_alignment_uniformity(points, out / "align_uniform.png", score_label="STS-B test Spearman x 100")
    _write_json(out / "align_uniform.json", {"analysis": "align_uniform", "data": "stsb/test", "threshold": 4.0,
                                             "models": [asdict(r) for r in results],
                                             "files": {"plot": str(out / "align_uniform.png")}})
    return results


# --------------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------------


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
    loaded = _load(model, pooler)
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
    from ..reporting.figures import plot_cls_energy_per_layer

    files = {
        "cls_energy": str(plot_cls_energy_per_layer({r.member: r.cls_energy for r in reports}, out / "cls_energy.png",
                                                    title=f"CLS energy weight per layer: {label}")),
        "attention_sink": str(plot_attention_sink(
            {r.member: _sink_stats(r) for r in reports}, out / "attention_sink.png",
            title=f"Attention received per layer: {label}")),
        **{f"heatmap_{r.member}": r.heatmap for r in reports if r.heatmap is not None},
    }
    report = AttentionReport(label=label, model=str(model) if not isinstance(model, nn.Module) else label,
                             kind=_model_kind(loaded), n_sentences=len(texts), heatmap_sentence=sentence_for_heatmap,
                             heatmap_layers=layers_used, members=reports, files=files)
    _write_json(out / "attention.json", {"analysis": "attention", **asdict(report)})
    files["json"] = str(out / "attention.json")
    return report


def _slug(name: str) -> str:
    return name.replace("/", "_")


def _sink_stats(r: EncoderAttention) -> Any:
    """The plotting view of a member's sink numbers (per-sentence arrays are not kept in the report)."""
    from .attention import AttentionSinkStats

    empty = np.empty((r.num_layers, 0))
    return AttentionSinkStats(cls=r.attention_cls, sep=r.attention_sep, punct=r.attention_punct, uniform=r.uniform,
                              n_sentences=r.n_sentences, n_with_punct=r.n_with_punct, cls_per_sentence=empty,
                              sep_per_sentence=empty, punct_per_sentence=empty)


# --------------------------------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostResult:
    """GMACs of one sentence of ``seq_len`` tokens: total, per member encoder and per aten operator; the
    score (Spearman x 100) and ``efficiency = score / gmacs`` when a score was given or computed."""

    model: str
    kind: str
    seq_len: int
    gmacs: float
    members: dict[str, float]
    by_operator: dict[str, float]
    score: float | None
    score_source: str | None
    efficiency: float | None


SCORE_TASKS = ("stsb", "avg-available")


def _test_score(model: nn.Module, task: str, senteval_dir: Path | None, batch_size: int) -> float:
    from ..evaluation.sts_evaluator import DEFAULT_TASKS, StsEvaluator

    if task == "stsb":
        evaluator = StsEvaluator.from_names(["stsb"], ("test",), senteval_dir=senteval_dir, batch_size=batch_size)
        return evaluator(model).scores[("stsb", "test")].all
    evaluator = StsEvaluator.from_names(DEFAULT_TASKS, ("test",), senteval_dir=senteval_dir, batch_size=batch_size)
    return evaluator(model).average


def cost_report(model: ModelRef, *, seq_len: int = 64, score: float | None = None, score_task: str | None = None,
                pooler: str | None = None, out_dir: str | Path | None = None, senteval_dir: Path | None = None,
                batch_size: int = 128) -> CostResult:
    """Inference cost in GMACs of one sentence of ``seq_len`` tokens, measured on the model's own encoders
    (single = 1 encoder, twin = the sum of its two, ensemble = the sum of its members), and efficiency
    ``eta = score / GMAC`` (JTCSE Table VII).

    ``score`` is used as given; otherwise ``score_task`` computes it: ``"stsb"`` = STS-B test Spearman x 100,
    ``"avg-available"`` = the average over the available test sets (the papers use the 7-STS average).
    Writes ``cost.json`` into ``out_dir`` when one is given.
    """
    if score is not None and score_task is not None:
        raise CselabError("give a score or a task to compute it on, not both")
    if score_task is not None and score_task not in SCORE_TASKS:
        raise CselabError(f"unknown score task {score_task!r}; choose one of: {', '.join(SCORE_TASKS)}")
    if seq_len < 1:
        raise CselabError(f"seq_len must be >= 1, got {seq_len}")
    loaded = _load(model, pooler)
    check_length(loaded, seq_len, "--seq-len")
    members = member_encoders(loaded)
    report = count_gmacs([enc.backbone for _, enc in members], seq_len)
    source = "given" if score is not None else None
    if score_task is not None:
        score, source = _test_score(loaded, score_task, senteval_dir, batch_size), f"{score_task}/test"
    result = CostResult(
        model=str(model) if not isinstance(model, nn.Module) else model_label(model), kind=_model_kind(loaded),
        seq_len=seq_len, gmacs=report.gmacs,
        members={name: g for (name, _), g in zip(members, report.per_module, strict=True)},
        by_operator=report.by_operator, score=score, score_source=source,
        efficiency=efficiency(score, report.gmacs) if score is not None else None)
    if out_dir is not None:
        _write_json(Path(out_dir) / "cost.json", {"analysis": "cost", **asdict(result)})
    return result


# --------------------------------------------------------------------------------------------------
# similarity density
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DensityResult:
    """Per gold group (``[0,1)`` .. ``[4,5]``) of STS-B test: number of pairs, median and mean cosine similarity."""

    label: str
    model: str
    sizes: dict[str, int]
    medians: dict[str, float]
    means: dict[str, float]
    stsb_test: float


def density_report(models: Sequence[ModelRef], out_dir: str | Path, *, pooler: str | None = None,
                   labels: Sequence[str] | None = None, batch_size: int = 128,
                   senteval_dir: Path | None = None) -> list[DensityResult]:
    """Cosine-similarity density of STS-B test pairs by gold-score group, one panel per model (JTCSE Fig. 5).

    Writes ``similarity_density.png`` and ``similarity_density.json`` into ``out_dir``.
    """
    if not models:
        raise CselabError("density needs at least one model")
    out = Path(out_dir)
    sub = _stsb_test(senteval_dir)
    densities, results = {}, []
    for ref, label in zip(models, _labels(models, labels), strict=True):
        model = _load(ref, pooler)
        e1, e2 = _encode_pairs(model, sub, batch_size)
        dens = similarity_density(e1, e2, sub.scores)
        densities[label] = dens
        results.append(DensityResult(
            label=label, model=str(ref) if not isinstance(ref, nn.Module) else label,
            sizes={k: int(v.size) for k, v in dens.groups.items()}, medians=dict(dens.medians),
            means={k: float(v.mean()) if v.size else math.nan for k, v in dens.groups.items()},
            stsb_test=_stsb_spearman(e1, e2, sub.scores)))
        del model
    plot_similarity_density(densities, out / "similarity_density.png")
    _write_json(out / "similarity_density.json", {"analysis": "similarity_density", "data": "stsb/test",
                                                  "models": [asdict(r) for r in results],
                                                  "files": {"plot": str(out / "similarity_density.png")}})
    return results


# --------------------------------------------------------------------------------------------------
# seeds and ablation: many recorded training runs
# --------------------------------------------------------------------------------------------------


@dataclass
class SeedsRun:
    """Records of one configuration over seeds (seed order; earlier records included) and what was done now."""

    label: str
    records: list[dict[str, Any]]
    ran: list[int]
    skipped: list[int]


@dataclass
class AblationRun:
    """Records of every loss-term subset of a method (variant order, then seed) and what was done now.
    ``ran``/``skipped`` hold ``(variant, seed)`` pairs."""

    method: str
    terms: tuple[str, ...]
    variants: list[str]
    records: list[dict[str, Any]]
    ran: list[tuple[str, int]]
    skipped: list[tuple[str, int]]


def _flatten(d: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, (*prefix, str(k))))
        else:
            out[(*prefix, str(k))] = v
    return out


def _config_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Keys (dotted) whose values differ between two effective configs. Run-location keys are ignored, and so
    are typed keys only one side has (a newer cselab may add keys with defaults); ``method_options`` is
    free-form (no defaults filled in), so every key counts, present on one side or both (run locations aside)."""
    a = _flatten({k: v for k, v in recorded.items() if k != "method_options"})
    b = _flatten({k: v for k, v in current.items() if k != "method_options"})
    out = [".".join(k) for k in sorted(set(a) & set(b)) if k not in _IGNORED_CONFIG_KEYS and a[k] != b[k]]
    missing = object()
    ma = _flatten(recorded.get("method_options", {}), ("method_options",))
    mb = _flatten(current.get("method_options", {}), ("method_options",))
    if any(ma.get(k, missing) != mb.get(k, missing) for k in set(ma) | set(mb) if k not in _IGNORED_CONFIG_KEYS):
        out.append("method_options")
    return out


def _stage1_dir(config: Any) -> str | None:
    """The shared stage-1 directory a twin pipeline names (``None``: not a pipeline, or stage 1 under its own run)."""
    pipeline = config.method_options.get("pipeline")
    return str(pipeline["stage1_dir"]).rstrip("/") if isinstance(pipeline, Mapping) and pipeline.get("stage1_dir") else None


def seed_overrides(config: Any, seed: int, *, output_dir: str | None = None, stage1_dir: str | None = None) -> list[str]:
    """The overrides that make ``config`` the run of ``seed``: the seed, ``<output_dir>-seed<S>`` and, for a twin
    pipeline whose stage 1 lives in a shared ``stage1_dir``, ``<stage1_dir>-seed<S>`` (stage 1 depends on the
    seed too; TNCSE and JTCSE presets naming the same stage1_dir still share it per seed). ``output_dir`` and
    ``stage1_dir`` default to the config's."""
    output_dir = (output_dir or config.train.output_dir).rstrip("/")
    stage1_dir = stage1_dir or _stage1_dir(config)
    out = [f"train.seed={seed}", f"train.output_dir={output_dir}-seed{seed}"]
    if stage1_dir:
        out.append(f"method_options.pipeline.stage1_dir={stage1_dir}-seed{seed}")
    return out


def _read_records(results_file: Path) -> list[dict[str, Any]]:
    from ..reporting.tables import read_records

    return read_records(results_file) if results_file.is_file() else []


def _run_one(config_path: str | Path | None, overrides: list[str], *, method: str | None, variant: str,
             results_file: Path, progress: bool, echo: Callable[[str], None]) -> tuple[dict[str, Any] | None, bool]:
    """Train and record one (variant, seed) unless the results file has it. Returns (record, ran)."""
    from ..training.config import load_config
    from ..training.runs import train_and_record

    config = load_config(config_path, overrides, method=method)
    seed = config.train.seed
    effective = config.model_dump(mode="json")
    recorded = [r for r in _read_records(results_file)
                if r.get("method") == config.method and (r.get("variant") or "") == variant and r.get("seed") == seed]
    if recorded:
        previous = recorded[-1]
        differences = _config_differences(previous.get("config", {}).get("effective", {}), effective)
        if differences:
            raise CselabError(
                f"{results_file} already records {config.method} variant {variant!r} seed {seed} with a different "
                f"configuration ({', '.join(differences[:3])}); choose another variant name or results file")
        echo(f"{config.method}{f' {variant}' if variant else ''} seed {seed}: already recorded, skipped")
        return previous, False
    output_dir = Path(config.train.output_dir)
    resume = (output_dir / "last").exists()
    summary = train_and_record(config, resume=resume, results_file=results_file, variant=variant,
                               config_source=str(config_path) if config_path else None, overrides=overrides,
                               progress=progress)
    if not summary:  # a non-main data-parallel rank: the main rank records
        return None, True
    echo(summary)
    return json.loads((output_dir / "results.json").read_text()), True


def seeds_run(config_path: str | Path | None, overrides: Sequence[str] = (), seeds: Iterable[int] = DEFAULT_SEEDS, *,
              results_file: str | Path, variant: str = "", method: str | None = None, progress: bool = True,
              echo: Callable[[str], None] | None = None) -> SeedsRun:
    """Train the same configuration once per seed (``train.seed=S``, ``train.output_dir=<dir>-seed<S>``),
    each run evaluated on test and appended to ``results_file`` under ``variant``.

    Seeds already recorded there for this method/variant are skipped, so a rerun resumes (see the module
    docstring). Returns the configuration's records in seed order. JTCSE Fig. 6 uses seeds 1..5.
    """
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise CselabError(f"seeds must be distinct and at least one, got {seeds}")
    from ..training.config import load_config

    results_file, say = Path(results_file), echo or (lambda _msg: None)
    base_config = load_config(config_path, list(overrides), method=method)
    label = f"{base_config.method}/{variant}" if variant else base_config.method
    records, ran, skipped = [], [], []
    for seed in seeds:
        run_overrides = [*overrides, *seed_overrides(base_config, seed)]
        record, did_run = _run_one(config_path, run_overrides, method=method, variant=variant,
                                   results_file=results_file, progress=progress, echo=say)
        (ran if did_run else skipped).append(seed)
        if record is not None:
            records.append(record)
    return SeedsRun(label=label, records=records, ran=ran, skipped=skipped)


def all_terms_subsets(terms: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of ``terms`` (kept in ``terms`` order), the full set first, then by size."""
    return [c for k in range(len(terms), 0, -1) for c in combinations(terms, k)]


def ablation_run(config_path: str | Path | None, terms_subsets: Sequence[Sequence[str]] | None = None,
                 overrides: Sequence[str] = (), *, results_file: str | Path, seeds: Iterable[int] | None = None,
                 method: str | None = None, progress: bool = True,
                 echo: Callable[[str], None] | None = None) -> AblationRun:
    """Train a method once per subset of its loss terms (``Method.terms`` of the registered method): variant
    ``a+b`` keeps the configured weights of ``a`` and ``b`` and sets every other term's
    ``method_options.loss_weights`` to 0 (not computed). ``terms_subsets`` defaults to every non-empty
    subset; ``seeds`` (default: the config's seed) repeats each variant per seed. Records are appended to
    ``results_file`` with the variant name; recorded (variant, seed) pairs are skipped.
    """
    from ..methods import METHODS
    from ..training.config import load_config

    base_config = load_config(config_path, list(overrides), method=method)
    terms = tuple(METHODS.get(base_config.method).terms)
    subsets = [tuple(s) for s in terms_subsets] if terms_subsets is not None else all_terms_subsets(terms)
    for subset in subsets:
        unknown = [t for t in subset if t not in terms]
        if not subset or unknown or len(set(subset)) != len(subset):
            raise CselabError(f"invalid loss-term subset {list(subset)} for method {base_config.method!r}; "
                              f"terms: {', '.join(terms)}")
    subsets = list(dict.fromkeys(tuple(t for t in terms if t in s) for s in subsets))  # canonical term order
    seed_list = [int(s) for s in seeds] if seeds is not None else [None]
    results_file, say = Path(results_file), echo or (lambda _msg: None)
    base = base_config.train.output_dir.rstrip("/")
    pipeline = base_config.method_options.get("pipeline")
    stage1_dir = None
    if isinstance(pipeline, dict):
        # twin pipelines: every variant shares one stage 1 per seed (only stage 2's loss terms are ablated)
        stage1_dir = _stage1_dir(base_config) or f"{base}-stage1"
        overrides = [*overrides, f"method_options.pipeline.stage1_dir={stage1_dir}"]
    records, ran, skipped, variants = [], [], [], []
    for subset in subsets:
        variant = "+".join(subset)
        variants.append(variant)
        for seed in seed_list:
            out = f"{base}-{variant}"
            placement = ([f"train.output_dir={out}"] if seed is None
                         else seed_overrides(base_config, seed, output_dir=out, stage1_dir=stage1_dir))
            run_overrides = [*overrides, *[f"method_options.loss_weights.{t}=0" for t in terms if t not in subset],
                             *placement]
            record, did_run = _run_one(config_path, run_overrides, method=method, variant=variant,
                                       results_file=results_file, progress=progress, echo=say)
            key = (variant, seed if seed is not None else base_config.train.seed)
            (ran if did_run else skipped).append(key)
            if record is not None:
                records.append(record)
    return AblationRun(method=base_config.method, terms=terms, variants=variants, records=records, ran=ran,
                       skipped=skipped)


# --------------------------------------------------------------------------------------------------
# seeds report
# --------------------------------------------------------------------------------------------------


@dataclass
class SeedsReport:
    """Per configuration: ``metric`` per seed, its mean and sample std; the paired test of A vs B when
    asked (``None`` otherwise); the Markdown table and the files written."""

    metric: str
    scores: dict[str, dict[int, float]]
    summaries: dict[str, dict[str, float]]
    paired: dict[str, Any] | None
    markdown: str
    files: dict[str, str]


def seeds_report(records: Sequence[dict[str, Any]], out_dir: str | Path, *, a_variant: str | None = None,
                 b_variant: str | None = None, metric: str = "avg-available",
                 alternative: str = "two-sided") -> SeedsReport:
    """Mean and sample std over seeds per configuration (JTCSE Fig. 6) and a paired test of ``metric``
    between configurations A and B over their matched seeds (JTCSE Fig. 8).

    Writes ``seeds.png`` (mean ± std with every seed), ``seeds.md`` (the table of
    :func:`cselab.reporting.tables.seeds_table`) and ``seeds.json`` into ``out_dir``.
    """
    from ..reporting.tables import record_label, records_by_seed, resolve_configuration, seeds_table

    if not records:
        raise CselabError("no records to summarise")
    out = Path(out_dir)
    markdown = seeds_table(records, a_variant, b_variant, metric=metric, alternative=alternative)
    scores: dict[str, dict[int, float]] = {}
    for label in dict.fromkeys(record_label(r) for r in records):
        values = {s: r.get("scores", {}).get(metric) for s, r in records_by_seed(records, label).items()}
        values = {s: float(v) for s, v in values.items() if isinstance(v, (int, float))}
        if values:
            scores[label] = values
    if not scores:
        raise CselabError(f"no record has a {metric!r} score")
    summaries = {}
    for label, values in scores.items():
        s = summarize_seeds(values)
        summaries[label] = {"mean": s.mean, "std": s.std, "n": s.n}
    paired = None
    if a_variant is not None and b_variant is not None:
        a_label, b_label = resolve_configuration(records, a_variant), resolve_configuration(records, b_variant)
        common = sorted(set(scores.get(a_label, {})) & set(scores.get(b_label, {})))
        test = paired_test({s: scores[a_label][s] for s in common}, {s: scores[b_label][s] for s in common},
                           alternative=alternative)
        paired = {"a": a_label, "b": b_label, "seeds": common, **asdict(test),
                  "significant_at_0.05": test.significant(0.05)}
    plot_seed_summary({k: [v[s] for s in sorted(v)] for k, v in scores.items()}, out / "seeds.png",
                      ylabel=f"{metric} (Spearman x 100)")
    (out / "seeds.md").write_text(markdown + "\n", encoding="utf-8")
    files = {"plot": str(out / "seeds.png"), "markdown": str(out / "seeds.md"), "json": str(out / "seeds.json")}
    report = SeedsReport(metric=metric, scores=scores, summaries=summaries, paired=paired, markdown=markdown,
                         files=files)
    _write_json(out / "seeds.json", {"analysis": "seeds", **asdict(report)})
    return report


# --------------------------------------------------------------------------------------------------
# ablation report
# --------------------------------------------------------------------------------------------------


@dataclass
class AblationReport:
    """Per variant: ``metric`` mean and sample std over its seeds; the Markdown table and the files written."""

    method: str
    terms: tuple[str, ...]
    metric: str
    means: dict[str, float]
    stds: dict[str, float]
    seeds: dict[str, list[int]]
    markdown: str
    files: dict[str, str]


def ablation_report(records: Sequence[dict[str, Any]], terms: Sequence[str], out_dir: str | Path, *,
                    method: str | None = None, metric: str = "avg-available") -> AblationReport:
    """The loss-term ablation of a method: ``ablation.md`` (:func:`cselab.reporting.tables.ablation_table`),
    ``ablation.png`` (one bar per variant, mean ± sample std of ``metric``) and ``ablation.json``."""
    from ..reporting.figures import plot_ablation
    from ..reporting.tables import ablation_table, records_by_seed

    markdown = ablation_table(records, terms, method=method, metric=metric)
    method = method or str(records[0].get("method"))
    order = {t: i for i, t in enumerate(terms)}
    variants = [v for v in dict.fromkeys(str(r.get("variant") or "") for r in records if r.get("method") == method)
                if v and all(t in order for t in v.split("+"))]
    variants.sort(key=lambda v: (-len(v.split("+")), [order[t] for t in v.split("+")]))
    means, stds, seeds = {}, {}, {}
    for v in variants:
        by_seed = records_by_seed(records, f"{method}/{v}")
        values = {s: r.get("scores", {}).get(metric) for s, r in by_seed.items()}
        values = {s: float(x) for s, x in values.items() if isinstance(x, (int, float))}
        if values:
            summary = summarize_seeds(values)
            means[v], stds[v], seeds[v] = summary.mean, summary.std, sorted(values)
    if not means:
        raise CselabError(f"no ablation record of {method!r} has a {metric!r} score")
    out = Path(out_dir)
    plot_ablation(means, out / "ablation.png", stds=stds, ylabel=f"{metric} (Spearman x 100)",
                  title=f"Loss-term ablation of {method}")
    (out / "ablation.md").write_text(markdown + "\n", encoding="utf-8")
    files = {"plot": str(out / "ablation.png"), "markdown": str(out / "ablation.md"), "json": str(out / "ablation.json")}
    report = AblationReport(method=method, terms=tuple(terms), metric=metric, means=means, stds=stds, seeds=seeds,
                            markdown=markdown, files=files)
    _write_json(out / "ablation.json", {"analysis": "ablation", **asdict(report)})
    return report
