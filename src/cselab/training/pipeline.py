"""Multi-stage recipes built from ordinary training runs: the TNCSE/JTCSE two-stage pipeline, distillation
into one encoder (-D) and the +UC ensemble (docs/methods.md#tncse and #jtcse).

The two-stage pipeline (:func:`run_twin_pipeline`) reads a stage-2 config (method ``tncse`` or ``jtcse``)
whose ``method_options.pipeline`` block describes stage 1::

    method_options:
      pipeline:
        stage1:
          settings:                      # RunConfig sections merged over the stage-2 config for stage 1
            model: {dropout: 0.1}
            train: {lr: 3.0e-5, max_steps: 300, scheduler: linear}
          encoders:                      # exactly two: encoder I and encoder II
            - augmentation: {kind: word_dropout, p: 0.1}
            - augmentation: {kind: file, path: data/corpus.rtt-ru.txt}
              settings: {train: {lr: 2.0e-5}}
        stage1_dir: null                 # default <train.output_dir>/stage1 (the ablation grid shares one)

Stage 1 config of encoder k = the stage-2 config, with ``method`` = ``stage1.method`` (simcse),
``method_options`` = ``stage1.settings.method_options`` (or {}), then ``stage1.settings`` merged in, then the
encoder's own ``settings``; ``data.corpus`` = its augmented copy of the stage-2 corpus and
``train.output_dir`` = ``<stage1_dir>/encoder_k``. Stage 2 runs in ``<train.output_dir>/stage2`` from the two
stage-1 ``best`` checkpoints (``method_options.encoder_1/2`` are filled in).

Every stage is its own run directory: a finished stage (its ``summary.json`` exists) is skipped, an
interrupted one is resumed from its ``last`` state, and a directory holding a run with a DIFFERENT
configuration is an error (never silently reused). **Decision:** stage 1 trains on the augmented copy alone
(as EDFSE/TNCSE's encoders were trained on their round-trip-translated corpora), stage 2 on the original.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cselab.config.run_config import RunConfig, load_config, validate
from cselab.config.stages import AugmentationSpec, PipelineSpec
from cselab.data.text.augment import augmented_corpus_path, prepare_augmented_corpus
from cselab.errors import CselabError
from cselab.methods import METHODS
from cselab.runtime.launch import is_main_process
from cselab.training.run_directory import BEST_DIR, STAGE1_DIR, STAGE2_DIR
from cselab.training.trainer import Trainer, TrainResult

AUGMENTED_DIR = "augmented"


@dataclass
class PipelinePlan:
    """The effective configs of every stage, built (and validated) before anything runs."""

    # the stage-2 training corpus (a fetched corpus's name or a file), which stage 1 sees augmented; resolved
    # only when the pipeline runs, so a plan can be built and validated before the corpus is fetched
    corpus: str
    stage1: list[RunConfig]
    stage2: RunConfig
    augmentations: list[AugmentationSpec]  # with their seeds filled in
    stage1_dir: Path


@dataclass
class PipelineResult:
    stage1: list[TrainResult]
    stage2: TrainResult
    skipped: list[str] = field(default_factory=list)
    scores: dict[str, float] | None = None

    @property
    def model_dir(self) -> Path:
        return Path(self.stage2.output_dir) / BEST_DIR

    def summary(self) -> str:
        lines = []
        for k, result in enumerate(self.stage1, start=1):
            lines.append(f"stage 1 encoder {k}: best dev {_fmt(result.best_dev)} at step {result.best_step} "
                         f"({result.output_dir})")
        start = f"{self.stage2.dev_at_start:.2f} -> " if self.stage2.dev_at_start is not None else ""
        lines.append(f"stage 2: {self.stage2.steps} steps, best dev {start}{_fmt(self.stage2.best_dev)} at step "
                     f"{self.stage2.best_step}")
        if self.skipped:
            lines.append("skipped (already finished): " + ", ".join(self.skipped))
        if self.scores:
            lines.append("test: " + "  ".join(f"{k} {v:.2f}" for k, v in self.scores.items()))
        lines.append(f"model: {self.model_dir}")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# -- planning -----------------------------------------------------------------------------------------
def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge (``update`` wins); neither argument is modified."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def pipeline_spec(config: RunConfig) -> PipelineSpec:
    """The validated pipeline block of a twin config; a clear error if there is none."""
    two_stage = [name for name in METHODS.names() if METHODS.get(name).two_stage]
    if config.method not in two_stage:
        raise CselabError(f"the two-stage pipeline trains {' or '.join(two_stage)}, not {config.method!r}")
    raw = config.method_options.get("pipeline")
    if raw is None:
        raise CselabError(
            f"method {config.method!r} needs a method_options.pipeline block (stage 1) for the two-stage pipeline; "
            "with ready stage-1 models set method_options.encoder_1/encoder_2 and train stage 2 as an ordinary run"
        )
    return validate(PipelineSpec, raw, prefix="method_options.pipeline.")


def plan_pipeline(config: RunConfig) -> PipelinePlan:
    """Build every stage's config (validated, so a typo fails before any training; nothing is read)."""
    spec = pipeline_spec(config)
    root = Path(config.train.output_dir)
    stage1_dir = Path(spec.stage1_dir) if spec.stage1_dir else root / STAGE1_DIR
    base = config.model_dump(mode="json")
    base["method"] = spec.stage1.method
    base["method_options"] = {}
    stage1, augmentations = [], []
    for k, encoder in enumerate(spec.stage1.encoders, start=1):
        augmentation = encoder.augmentation
        if augmentation.kind != "file" and augmentation.seed is None:
            # default seed: the run's seed plus the encoder index, so two encoders never share one
            augmentation = augmentation.model_copy(update={"seed": config.train.seed + k - 1})
        corpus = augmented_corpus_path(augmentation, stage1_dir / AUGMENTED_DIR, default_seed=config.train.seed)
        raw = _merge(_merge(base, spec.stage1.settings), encoder.settings)
        raw = _merge(raw, {"data": {"corpus": str(corpus)}, "train": {"output_dir": str(stage1_dir / f"encoder_{k}")}})
        stage1.append(validate(RunConfig, raw, prefix=f"method_options.pipeline.stage1 (encoder {k}): "))
        augmentations.append(augmentation)
    options = dict(config.method_options,
                   encoder_1=str(stage1_dir / "encoder_1" / BEST_DIR),
                   encoder_2=str(stage1_dir / "encoder_2" / BEST_DIR))
    stage2 = config.model_copy(update={"method_options": options,
                                       "train": config.train.model_copy(update={"output_dir": str(root / STAGE2_DIR)})})
    return PipelinePlan(config.data.corpus, stage1, stage2, augmentations, stage1_dir)


# -- running ------------------------------------------------------------------------------------------
def _check_same_run(out: Path, config: RunConfig) -> None:
    """Refuse a stage directory that holds a run of another configuration (``save_every`` aside: it changes no
    step); the comparison is the resume check's (:func:`~cselab.training.run_directory.settings_changes`)."""
    import yaml

    from cselab.training.run_directory import CONFIG_FILE, settings_changes

    saved_file = out / CONFIG_FILE
    if not saved_file.is_file():
        return
    saved = validate(RunConfig, yaml.safe_load(saved_file.read_text()) or {})
    changes = {k: v for k, v in settings_changes(out, saved, config).items() if k != "train.save_every"}
    if changes:
        key, (old, new) = next(iter(changes.items()))
        raise CselabError(f"{out} holds a run with a different configuration ({key}: {old!r} -> {new!r}); "
                          "remove it or choose another train.output_dir")


def run_stage(config: RunConfig) -> tuple[TrainResult, bool]:
    """Run one stage: skip it when finished, resume it when interrupted. Returns (result, skipped)."""
    out = Path(config.train.output_dir)
    _check_same_run(out, config)
    summary = out / "summary.json"
    if summary.is_file():
        return TrainResult(**json.loads(summary.read_text())), True
    # anything left by an earlier attempt: resume continues its saved state (also one a kill left as last.old),
    # or starts the stage over when it died before its first save
    resume = out.is_dir() and any(out.iterdir())
    return Trainer(config).run(resume=resume), False


def run_twin_pipeline(
    config: RunConfig,
    *,
    evaluate_test: bool = True,
    results_file: Path | None = None,
    variant: str = "",
    config_source: str | None = None,
    overrides: list[str] | None = None,
    row: str = "",
) -> PipelineResult:
    """TNCSE/JTCSE end to end: augment, stage 1 (two SimCSE runs), stage 2, then test-score the best model.

    Rerunning skips finished stages and resumes an interrupted one. With ``evaluate_test`` the stage-2
    best checkpoint is scored once on the test sets and a results record (docs/results.md#results-record,
    variant ``variant``) is written to ``stage2/results.json`` and appended to ``results_file``.
    """
    from cselab.data.text.training_data import corpus_path

    plan = plan_pipeline(config)
    source = corpus_path(plan.corpus)
    stage1_results, skipped = [], []
    for k, (stage_config, augmentation) in enumerate(zip(plan.stage1, plan.augmentations, strict=True), start=1):
        prepare_augmented_corpus(source, augmentation, plan.stage1_dir / AUGMENTED_DIR,
                                 default_seed=config.train.seed)
        result, was_skipped = run_stage(stage_config)
        stage1_results.append(result)
        if was_skipped:
            skipped.append(f"{STAGE1_DIR}/encoder_{k}")
    stage2, was_skipped = run_stage(plan.stage2)
    if was_skipped:
        skipped.append(STAGE2_DIR)
    outcome = PipelineResult(stage1_results, stage2, skipped)
    if evaluate_test and is_main_process():
        outcome.scores = _test_and_record(plan, outcome, results_file=results_file, variant=variant, row=row,
                                          config_source=config_source, overrides=overrides)
    return outcome


def _test_and_record(plan: PipelinePlan, outcome: PipelineResult, *, results_file: Path | None, variant: str,
                     row: str, config_source: str | None, overrides: list[str] | None) -> dict[str, float]:
    from cselab.models.model_card import record_test_scores
    from cselab.training.results import append_record, results_record, score_test_sets

    # the record of the whole pipeline lives at the run's top directory (beside stage1/ and stage2/)
    results_json = Path(outcome.stage2.output_dir).parent / "results.json"
    if results_json.is_file():  # a finished pipeline is scored once
        recorded = json.loads(results_json.read_text())["scores"]
        return {k: v for k, v in recorded.items() if not k.startswith("stsb_dev_")}
    # the twin's cost counts both stages (docs/results.md#cpu-protocol)
    total = TrainResult(**{**asdict(outcome.stage2),
                           "wall_s": outcome.stage2.wall_s + sum(r.wall_s for r in outcome.stage1)})
    scores = score_test_sets(outcome.model_dir, batch_size=plan.stage2.train.eval_batch_size,
                             device=plan.stage2.train.device)
    record_test_scores(outcome.model_dir, scores)  # the model card shows them
    record = results_record(plan.stage2, total, scores, variant=variant, row=row, config_source=config_source,
                            overrides=overrides)
    record["stage1"] = [{"output_dir": r.output_dir, "best_dev": r.best_dev, "steps": r.steps, "wall_s": r.wall_s}
                        for r in outcome.stage1]
    results_json.write_text(json.dumps(record, indent=2) + "\n")
    if results_file is not None:
        append_record(results_file, record)
    return scores


# -- distillation (-D) -------------------------------------------------------------------------------
def distill_config(
    teacher_dir: str | Path,
    student_backbone: str,
    corpus: str | Path | None,
    *,
    output_dir: str | Path,
    config_file: str | Path | None = None,
    overrides: list[str] | None = None,
) -> RunConfig:
    """The run config of a distillation: ``config_file`` + ``overrides`` with method ``distill`` and the given
    fields set (they win over the file); ``corpus`` None keeps the file's (or an override's) ``data.corpus``."""
    config = load_config(config_file, list(overrides or []), method="distill")
    raw = _merge(config.model_dump(mode="json"), {
        "model": {"backbone": str(student_backbone)},
        **({"data": {"corpus": str(corpus)}} if corpus is not None else {}),
        "train": {"output_dir": str(output_dir)},
        "method_options": {"teacher": str(teacher_dir)},
    })
    return validate(RunConfig, raw)
