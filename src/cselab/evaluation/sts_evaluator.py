"""The STS evaluator: an object that scores a sentence model on STS tasks and has a primary metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cselab.data.evalsets.sts import TASK_SPLITS, StsTask, load_task
from cselab.errors import CselabError
from cselab.evaluation.scoring import StsScore, pair_cosine, rounded_average, score_subsets


@dataclass(frozen=True)
class EvalResult:
    """Scores per ``(task, split)``; ``average`` is the rounded average over the test splits present."""

    scores: dict[tuple[str, str], StsScore]

    def table(self) -> dict[str, dict[str, float]]:
        """``task -> split -> score`` (the papers' ``all`` figure), for printing and JSON."""
        out: dict[str, dict[str, float]] = {}
        for (task, split), score in self.scores.items():
            out.setdefault(task, {})[split] = round(score.all, 2)
        return out

    @property
    def average(self) -> float:
        return rounded_average([s.all for (_, split), s in self.scores.items() if split == "test"])

    def average_tasks(self) -> list[str]:
        return [task for (task, split) in self.scores if split == "test"]

    def details(self) -> dict[str, Any]:
        return {
            f"{task}/{split}": {"all": s.all, "mean": s.mean, "wmean": s.wmean, "subsets": s.subsets, "sizes": s.sizes}
            for (task, split), s in self.scores.items()
        }


class StsEvaluator:
    """Scores a model on STS task splits; sentences shared between tasks are encoded once.

    ``primary`` names the ``task/split`` used for model selection (always a dev split: never test).
    """

    def __init__(self, tasks: Sequence[StsTask], *, batch_size: int = 128, primary: str | None = None) -> None:
        if not tasks:
            raise CselabError("no STS tasks to evaluate")
        self.tasks = list(tasks)
        self.batch_size = batch_size
        self.primary = primary
        if primary is not None and primary not in {f"{t.name}/{t.split}" for t in self.tasks}:
            raise CselabError(f"primary metric {primary!r} is not among the evaluated task splits")

    @classmethod
    def from_names(
        cls,
        names: Sequence[str],
        splits: Sequence[str] = ("test",),
        *,
        senteval_dir: Path | None = None,
        home: Path | None = None,
        batch_size: int = 128,
        primary: str | None = None,
    ) -> StsEvaluator:
        """Load every ``(name, split)`` that exists (STS12-16/17 have a test split only)."""
        tasks = []
        for name in names:
            for split in splits:
                if split not in TASK_SPLITS.get(name, (split,)):  # unknown names fail in load_task
                    continue
                tasks.append(load_task(name, split, home=home, senteval_dir=senteval_dir))
        return cls(tasks, batch_size=batch_size, primary=primary)

    def __call__(self, model: Any) -> EvalResult:
        """Score ``model`` (anything with ``encode(texts, batch_size=, progress=)``) on every task; its encoding
        shows a bar if the reporter in effect shows bars (:mod:`cselab.reporter`)."""
        sentences = sorted({s for t in self.tasks for sub in t.subsets for s in (*sub.sentences1, *sub.sentences2)})
        index = {s: i for i, s in enumerate(sentences)}
        embeddings = model.encode(sentences, batch_size=self.batch_size, progress=True)
        scores = {}
        for task in self.tasks:
            predicted, gold = {}, {}
            for sub in task.subsets:
                a = embeddings[[index[s] for s in sub.sentences1]]
                b = embeddings[[index[s] for s in sub.sentences2]]
                predicted[sub.name] = pair_cosine(a, b)
                gold[sub.name] = np.asarray(sub.scores, dtype=float)
            scores[(task.name, task.split)] = score_subsets(predicted, gold)
        return EvalResult(scores)

    def primary_score(self, result: EvalResult) -> float:
        task, split = (self.primary or f"{self.tasks[0].name}/{self.tasks[0].split}").split("/")
        return result.scores[(task, split)].all

