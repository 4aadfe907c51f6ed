"""What the domain study records of every model it scores, in one place: the domain's tasks (mteb's evaluators,
through ``cselab.evaluation.domain``), the domain's main score among them, and STS-B test (the floor the goals
hold every adapted model to)."""

from __future__ import annotations

from typing import Any


def stsb_test(model: Any) -> float:
    """The model's STS-B test Spearman (x100), as ``cselab evaluate`` scores it."""
    return _stsb(model, "test")


def stsb_dev(model: Any) -> float:
    """The model's STS-B dev Spearman (x100): what a choice may read where the test must not be."""
    return _stsb(model, "dev")


def _stsb(model: Any, split: str) -> float:
    import cselab

    return float(cselab.evaluate(model, ["stsb"], splits=(split,))["stsb"][split])


def study_scores(model: Any, inputs: Any, main_task: str) -> dict[str, Any]:
    """``{"scores", "main_score", "stsb_test"}`` of ``model`` on a domain's loaded ``inputs``."""
    from cselab.evaluation.domain import score_inputs

    scores = score_inputs(model, inputs)
    return {"scores": scores, "main_score": scores[main_task], "stsb_test": stsb_test(model)}
