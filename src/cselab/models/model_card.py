"""The model card (``README.md``) of a saved model: what it is, how to load it, how it was made.

Rendered from the model's ``cselab.json`` only (kind, pooler, training method, configuration, data, dev and
test scores), so the card never says more than the directory records. sentence-transformers shows the same
file as the model's card; :func:`record_test_scores` adds the test scores once a run has computed them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cselab.models.kinds import MODEL_KINDS

CARD_FILE = "README.md"


def needs_cselab_module(description: dict[str, Any]) -> bool:
    """True when ``SentenceTransformer(dir)`` needs ``trust_remote_code=True`` (a cselab module): the model's kind
    decides (:mod:`cselab.models.kinds`); an unknown kind always does."""
    kind = MODEL_KINDS.get(description.get("kind"))  # type: ignore[arg-type]
    return True if kind is None else bool(kind.needs_cselab_module(description))


def adapted_teacher_phrase(first: dict[str, Any]) -> str:
    """How the model card and ``cselab adapt``'s report say that the teacher was adapted first (a recipe's
    ``adapt_teacher``)."""
    return f"{first.get('model')} adapted to the text first ({first.get('steps')} steps of SimCSE)"


def model_card(description: dict[str, Any], *, model_type: str = "") -> str:
    """Markdown text of the card."""
    kind = description.get("kind", "?")
    training = description.get("training") or {}
    config = training.get("config") or {}
    lines = ["---", "library_name: sentence-transformers", "tags:", "- sentence-transformers",
             "- sentence-similarity", "- cselab", "---", "", f"# cselab {kind} model", ""]
    lines += [f"A sentence embedding model saved by cselab ({model_type or kind}): {_what(description)}", ""]
    trust = needs_cselab_module(description)
    lines += ["## Usage", "", "```python", "from sentence_transformers import SentenceTransformer", "",
              "model = SentenceTransformer(\"PATH\"" + (", trust_remote_code=True)" if trust else ")"),
              "embeddings = model.encode([\"A man is playing a guitar.\"])", "```", ""]
    if trust:
        lines += ["This model uses a module of cselab (`pip install cselab`); sentence-transformers runs it only "
                  "with `trust_remote_code=True` and refuses to load it otherwise.", ""]
    lines += ["Or with cselab: `import cselab; cselab.load_model(\"PATH\").encode([...])`.", ""]
    if training:
        lines += ["## Training", "", f"- method: {training.get('method', '?')}"]
        model_cfg, data_cfg, train_cfg = config.get("model", {}), config.get("data", {}), config.get("train", {})
        if model_cfg.get("backbone"):
            lines.append(f"- backbone: {model_cfg['backbone']}")
        if data_cfg:
            lines.append(f"- data: {data_cfg.get('corpus', '?')}")
        keys = ("max_steps", "epochs", "batch_size", "lr", "seed", "precision")
        settings = ", ".join(f"{k} {train_cfg[k]}" for k in keys if k in train_cfg)
        if settings:
            lines.append(f"- training: {settings}")
        if training.get("dev_score") is not None:
            lines.append(f"- selected at step {training.get('step')} on {training.get('dev_task', 'dev')}: "
                         f"{float(training['dev_score']):.2f}")
        lines.append("")
    scores = description.get("test_scores")
    if scores:
        lines += ["## Test scores (cosine Spearman x 100)", "", "| task | score |", "|---|---|"]
        lines += [f"| {task} | {float(score):.2f} |" for task, score in scores.items()]
        lines.append("")
    adaptation = description.get("adaptation")
    if adaptation:
        first = adaptation.get("adapted_teacher")
        adapted = f" ({adapted_teacher_phrase(first)})" if isinstance(first, dict) else ""
        lines += ["## Adaptation (`cselab adapt`)", "",
                  f"- text: {adaptation.get('text')} ({adaptation.get('sentences')} sentences)",
                  f"- teacher: {adaptation.get('teacher') or 'none'}{adapted}; selection without labels: "
                  f"{adaptation.get('selection')}, step {adaptation.get('best_step')}", ""]
        before, after = adaptation.get("before") or {}, adaptation.get("after") or {}
        if before:
            lines += ["| score | before | after |", "|---|---|---|"]
            lines += [f"| {k} | {float(v):.2f} | {float(after[k]):.2f} |" for k, v in before.items() if k in after]
            lines.append("")
    if description.get("sources"):
        lines += ["## Sources", "", *[f"- {s}" for s in description["sources"]], ""]
    if config:
        lines += ["## Configuration", "", "```json", json.dumps(config, indent=2), "```", ""]
    return "\n".join(lines)


def _what(description: dict[str, Any]) -> str:
    kind = MODEL_KINDS.get(description.get("kind"))  # type: ignore[arg-type]
    return f"kind {description.get('kind')}." if kind is None else kind.card_summary(description)


def record_test_scores(model_dir: str | Path, scores: dict[str, float]) -> None:
    """Add a run's test scores to the saved model's ``cselab.json`` and re-render its card."""
    model_dir = Path(model_dir)
    file = model_dir / "cselab.json"
    description = json.loads(file.read_text())
    description["test_scores"] = dict(scores)
    file.write_text(json.dumps(description, indent=2) + "\n")
    (model_dir / CARD_FILE).write_text(model_card(description))
