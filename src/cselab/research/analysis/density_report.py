"""Cosine-similarity density of the STS-B test pairs by gold-score group, one panel per model (JTCSE Fig. 5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from torch import nn

from cselab.errors import CselabError
from cselab.research.analysis.report_inputs import (
    ModelRef,
    encode_pairs,
    load_model_ref,
    plot_labels,
    stsb_spearman,
    stsb_test_subset,
)
from cselab.research.analysis.similarity_density import similarity_density
from cselab.research.reporting.plots import plot_similarity_density
from cselab.research.reporting.report_json import write_report_json


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
    sub = stsb_test_subset(senteval_dir)
    densities, results = {}, []
    for ref, label in zip(models, plot_labels(models, labels), strict=True):
        model = load_model_ref(ref, pooler)
        e1, e2 = encode_pairs(model, sub, batch_size)
        dens = similarity_density(e1, e2, sub.scores)
        densities[label] = dens
        results.append(DensityResult(
            label=label, model=str(ref) if not isinstance(ref, nn.Module) else label,
            sizes={k: int(v.size) for k, v in dens.groups.items()}, medians=dict(dens.medians),
            means={k: float(v.mean()) if v.size else math.nan for k, v in dens.groups.items()},
            stsb_test=stsb_spearman(e1, e2, sub.scores)))
        del model
    plot_similarity_density(densities, out / "similarity_density.png")
    write_report_json(out / "similarity_density.json", {"analysis": "similarity_density", "data": "stsb/test",
                                                  "models": [asdict(r) for r in results],
                                                  "files": {"plot": str(out / "similarity_density.png")}})
    return results
