"""Alignment and uniformity of several models on STS-B test, scatter coloured by STS-B test Spearman
(SimCSE Fig. 2, JTCSE Fig. 7): alignment over the test pairs with gold > 4, uniformity over every test sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from torch import nn

from cselab.errors import CselabError
from cselab.evaluation.alignment_uniformity import sts_alignment_uniformity
from cselab.research.analysis.report_inputs import (
    ModelRef,
    encode_pairs,
    load_model_ref,
    plot_labels,
    stsb_spearman,
    stsb_test_subset,
)
from cselab.research.reporting.plots import AlignUniformPoint, plot_alignment_uniformity
from cselab.research.reporting.report_json import write_report_json


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
    sub = stsb_test_subset(senteval_dir)
    results = []
    for ref, label in zip(models, plot_labels(models, labels), strict=True):
        model = load_model_ref(ref, pooler)
        e1, e2 = encode_pairs(model, sub, batch_size)
        au = sts_alignment_uniformity(e1, e2, sub.scores)
        results.append(AlignUniformResult(label=label, model=str(ref) if not isinstance(ref, nn.Module) else label,
                                          alignment=au.alignment, uniformity=au.uniformity,
                                          n_positive_pairs=au.n_positive_pairs, n_sentences=au.n_sentences,
                                          stsb_test=stsb_spearman(e1, e2, sub.scores)))
        del model
    points = [AlignUniformPoint(r.label, r.alignment, r.uniformity, r.stsb_test) for r in results]
    plot_alignment_uniformity(points, out / "align_uniform.png", score_label="STS-B test Spearman x 100")
    write_report_json(out / "align_uniform.json", {"analysis": "align_uniform", "data": "stsb/test", "threshold": 4.0,
                                             "models": [asdict(r) for r in results],
                                             "files": {"plot": str(out / "align_uniform.png")}})
    return results
