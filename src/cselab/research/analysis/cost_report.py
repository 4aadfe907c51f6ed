"""Inference cost of a model in GMACs for one sentence of ``seq_len`` tokens, measured on the model itself
(the sum of its member encoders), and the efficiency ``eta = score / GMAC`` (JTCSE Table VII).

Decision: cost counts the member *backbones* on a ``(1, seq_len)`` input (``seq_len`` = every token the
encoder reads: special tokens and any template tokens included). Poolers other than the HF pooler (which runs
inside the backbone and is counted) and the train-only MLP head cost no matrix product at inference.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from torch import nn

from cselab.errors import CselabError
from cselab.models.encoder import check_length
from cselab.research.analysis.cost import count_gmacs, efficiency
from cselab.research.analysis.report_inputs import ModelRef, load_model_ref, member_encoders, model_kind, model_label
from cselab.research.reporting.report_json import write_report_json


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
    from cselab.data.evalsets.sts import DEFAULT_TASKS
    from cselab.evaluation.sts_evaluator import StsEvaluator

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
    loaded = load_model_ref(model, pooler)
    check_length(loaded, seq_len, "--seq-len")
    members = member_encoders(loaded)
    report = count_gmacs([enc.backbone for _, enc in members], seq_len)
    source = "given" if score is not None else None
    if score_task is not None:
        score, source = _test_score(loaded, score_task, senteval_dir, batch_size), f"{score_task}/test"
    result = CostResult(
        model=str(model) if not isinstance(model, nn.Module) else model_label(model), kind=model_kind(loaded),
        seq_len=seq_len, gmacs=report.gmacs,
        members={name: g for (name, _), g in zip(members, report.per_module, strict=True)},
        by_operator=report.by_operator, score=score, score_source=source,
        efficiency=efficiency(score, report.gmacs) if score is not None else None)
    if out_dir is not None:
        write_report_json(Path(out_dir) / "cost.json", {"analysis": "cost", **asdict(result)})
    return result
