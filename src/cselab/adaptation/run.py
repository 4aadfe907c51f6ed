"""``run_adapt``: the whole adaptation of a plan: the run directory, the texts, the teacher's pass, training with the
plan's selection, the scores before and after on the user's labelled data, the model card and the report.

The run directory is cselab's to write only when it is new, empty, or an adaptation of the same text
(``adapt-plan.json``): every check is made before anything is written, so a refused run leaves no trace.
``--resume`` continues an adaptation of the same text with the same options (a changed text or option is
refused), refuses a directory that holds nothing to resume or a guarded run whose reference is gone after a save
(:func:`check_guard_reference`), and changes nothing in a finished one.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cselab.adaptation.plan import (
    ADAPT_FILE,
    ADAPTED_TEACHER_EXPORTS_DIR,
    DEFAULT_MODEL,
    HELD_OUT_FILE,
    PLAN_FILE,
    TEACHER_DIR,
    TRAIN_FILE,
    AdaptPlan,
    evaluation_every,
    mixed_phrase,
    plan_adapt,
    write_texts,
)
from cselab.adaptation.recipe import Recipe
from cselab.adaptation.report import annotate_model, scores_lost, teacher_not_ahead, write_report
from cselab.adaptation.selection import (
    DISTILLATION_LOSS,
    FIXED_BUDGET,
    GUARD_MAX_LENGTH,
    GUARDED_DISTILLATION_LOSS,
    GuardedDistillationLoss,
    HeldOutDistillationLoss,
    HeldOutLoss,
    teacher_agreement_task_from_vectors,
    teacher_vectors_by_view,
)
from cselab.errors import CselabError
from cselab.fileio import LOCK_FILE, write_json_atomic
from cselab.provenance import provenance
from cselab.reporter import report, reporting
from cselab.runtime.allocator import resident_mb
from cselab.runtime.memory import ActivationBudget


@dataclass
class AdaptResult:
    model_dir: Path
    best_step: int | None
    selection: str
    before: dict[str, float]
    after: dict[str, float]
    wall_s: float
    report: Path
    mix: float = 1.0  # the selected model's share of the weights of model_dir, mixed with the untouched model's
    teacher: str | None = None
    teacher_scores: dict[str, float] = field(default_factory=dict)  # the teacher's, before training


def check_output(plan: AdaptPlan, *, resume: bool) -> str:
    """Whether ``plan.output_dir`` may hold this adaptation: ``"fresh"`` (new or empty), ``"resume"`` or
    ``"finished"`` (only with ``resume``); anything else is refused in one line. Reads only."""
    from cselab.training.run_directory import RUN_MARKER

    facts = plan.facts()
    directory = plan.output_dir
    if not directory.exists() or not [p for p in directory.iterdir() if not p.name.startswith(LOCK_FILE)]:
        if resume:
            raise CselabError(f"--resume: {directory} holds no adaptation to resume; drop --resume to start one")
        return "fresh"
    if not (directory / RUN_MARKER).is_file():  # only cselab's marker makes a directory cselab's to write
        names = sorted(p.name for p in directory.iterdir() if not p.name.startswith(LOCK_FILE))
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise CselabError(f"{directory} holds files that cselab did not write ({shown}); give --output a new or "
                          "empty directory")
    try:
        saved = json.loads((directory / PLAN_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CselabError(f"{directory} holds another cselab run, not an adaptation; choose another --output") from None
    except (OSError, ValueError) as exc:
        raise CselabError(f"{directory / PLAN_FILE} is damaged ({exc}); choose another --output") from None
    finished = (directory / ADAPT_FILE).is_file()
    if not resume:
        if finished:
            raise CselabError(f"{directory} holds a finished adaptation; choose another --output")
        raise CselabError(f"{directory} holds an unfinished adaptation: add --resume to continue it, or choose "
                          "another --output")
    # over both sides' keys: a recipe field recorded only when set (mix, passages, general) and dropped on resume
    # is a change too
    keys = [*facts, *(key for key in saved if key not in facts)]
    changed = [f"{key}: {saved.get(key)!r} -> {facts.get(key)!r}" for key in keys if saved.get(key) != facts.get(key)]
    if changed:
        what = "the text changed" if any(c.startswith(("text_sha256", "sentences")) for c in changed) else \
            "; ".join(changed[:3])
        raise CselabError(f"--resume: {directory} adapted another text or with other options ({what}); resume with "
                          "the text and options it was started with, or choose another --output")
    if finished:
        return "finished"
    check_guard_reference(plan)
    return "resume"


def check_batch(plan: AdaptPlan) -> None:
    """Refuse a plan (or the teacher's own adaptation it runs first) whose training examples do not fill one batch,
    before anything is written: the trainer would refuse it only after the teacher's pass."""
    for each in (plan, plan.teacher_plan):
        if each is not None and len(each.train_units) < each.config.train.batch_size:
            raise CselabError(f"the text makes {len(each.train_units)} training examples ({each.units} of up to "
                              f"{each.config.model.max_length} tokens), fewer than one batch of "
                              f"{each.config.train.batch_size}: give a longer text, or a recipe with a smaller "
                              "batch_size or a shorter max_length")


def check_guard_reference(plan: AdaptPlan) -> None:
    """Refuse to resume a guarded run whose trainer has saved a state but whose reference (:data:`GUARD_REFERENCE_FILE`)
    is gone: a resumed trainer never scores step 0 again, so the guard would silently take the first step scored after
    the resume as the untouched model. Before the first save (step 0 is scored again) or once training finished
    (nothing is scored again) the reference is not needed. Reads only."""
    from cselab.training.run_directory import LAST_DIR, is_finished

    directory = plan.output_dir
    if plan.selection != GUARDED_DISTILLATION_LOSS or (directory / GUARD_REFERENCE_FILE).is_file():
        return
    # the trainer's saved state; ``last.old`` is one that a kill inside its swap left aside (the trainer puts it back)
    saved = any((directory / name).is_dir() for name in (LAST_DIR, f"{LAST_DIR}.old"))
    if saved and not is_finished(directory):
        raise CselabError(f"--resume: {directory} lacks {GUARD_REFERENCE_FILE}, the run's reference (the untouched "
                          "model's held-out losses, which the guarded selection compares every step with), and it "
                          "cannot be scored again after a saved step; start the adaptation afresh in a new --output")


def _finished_result(plan: AdaptPlan) -> AdaptResult:
    summary = json.loads((plan.output_dir / ADAPT_FILE).read_text(encoding="utf-8"))
    return AdaptResult(plan.model_dir, summary.get("best_step"), summary.get("selection", plan.selection),
                       summary.get("before") or {}, summary.get("after") or {}, float(summary.get("wall_s") or 0.0),
                       plan.output_dir / "adapt-report.md", float(summary.get("mix", 1.0)), summary.get("teacher"),
                       summary.get("teacher_scores") or {})


def _texts_in_place(plan: AdaptPlan) -> bool:
    """Whether the run directory's texts are this plan's (a resumed run reads them)."""
    def lines(name: str) -> list[str] | None:
        try:
            return (plan.output_dir / name).read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
    return lines(TRAIN_FILE) == plan.train_units and lines(HELD_OUT_FILE) == list(plan.held_out)


GUARD_TEACHER_DIR = "teacher-guard"  # the teacher's pass over the guarded selection's views of the held-out text
GUARD_REFERENCE_FILE = "guard-reference.json"  # the untouched model's held-out losses, which the guard compares with


def _selector(plan: AdaptPlan, teacher_held: Any, teacher_views: dict[str, Any]) -> Any:
    """What scores a step: the plan's selection criterion, or (fixed budget) what the last step records."""
    from cselab.evaluation.sts_evaluator import StsEvaluator

    batch = plan.config.train.eval_batch_size
    if plan.teacher is None:
        return HeldOutLoss(plan.held_out_units)
    if plan.selection == GUARDED_DISTILLATION_LOSS:
        # passages are scored at their own length; lines at the length the student trains at
        views = {name: (units, teacher_views[name], GUARD_MAX_LENGTH if name == "passages" else None)
                 for name, units in plan.guard_views.items()}
        return GuardedDistillationLoss(views, plan.output_dir / GUARD_REFERENCE_FILE, batch_size=batch)
    if plan.selection in (FIXED_BUDGET, DISTILLATION_LOSS):
        return HeldOutDistillationLoss(plan.held_out_units, teacher_held, batch_size=batch)
    task = teacher_agreement_task_from_vectors(plan.held_out_units, teacher_held)
    return StsEvaluator([task], batch_size=batch, primary="teacher-agreement/dev")


def held_out_teacher_vectors(plan: AdaptPlan, teacher: str, store_dir: str | Path | None,
                             **options: Any) -> np.ndarray:
    """``teacher``'s vectors of the plan's held-out units, from its pass over the plan's training and held-out text,
    one pass per kind of unit (:meth:`AdaptPlan.teacher_parts`, :func:`cselab.teacher.vectors.teacher_vectors_of_parts`)
    kept in ``store_dir`` (``None``: in the cache only, as the domain study's observer asks for it)."""
    from cselab.teacher.vectors import teacher_vectors_of_parts

    parts = plan.teacher_parts()
    vectors = teacher_vectors_of_parts(teacher, parts, store_dir, **options)
    row: dict[str, int] = {}
    for i, text in enumerate(text for part in parts.values() for text in part):
        row.setdefault(text, i)  # a text in several parts reads its first part's row, as the assembled store keeps
    return vectors[[row[text] for text in plan.held_out_units]]


def scorer(labels: str | Path | None = None, pairs: str | Path | None = None, retrieval: str | Path | None = None,
           domain: str | None = None) -> Callable[[Any], dict[str, float]] | None:
    """What scores a model on the user's labelled data (mteb's evaluators), every file checked now, before any
    training; ``None`` when none is given."""
    if labels is None and pairs is None and retrieval is None and domain is None:
        return None
    import importlib.util

    from cselab.evaluation.domain import load_inputs, score_inputs

    if importlib.util.find_spec("mteb") is None:  # scoring runs mteb: refused now, not after training
        raise CselabError("scoring before/after runs mteb, which is not installed: pip install 'cselab[mteb]'")
    inputs = load_inputs(labels, pairs, retrieval, domain=domain)

    def evaluate(encoder: Any, precision: str = "fp32", desc: str = "scoring") -> dict[str, float]:
        return score_inputs(encoder, inputs, precision=precision, desc=desc)
    evaluate.takes_precision = True  # type: ignore[attr-defined]  # the teacher is scored on its pass's way
    return evaluate


def adapt(text: str | Path, output: str | Path, *, recipe: str | Path | Recipe | None = None,
          model: str = DEFAULT_MODEL, teacher: str | None = None, no_teacher: bool = False, task: str | None = None,
          steps: int | None = None, seed: int = 1, max_sentences: int | None = None, device: str = "auto",
          labels: str | Path | None = None, pairs: str | Path | None = None, retrieval: str | Path | None = None,
          domain: str | None = None, resume: bool = False) -> AdaptResult:
    """``cselab adapt``, whole: plan (the text read once, the models and the recipe checked), check the scoring
    files, then :func:`run_adapt` (the output checked once, under its lock, before any model loads)."""
    plan = plan_adapt(text, output, recipe=recipe, model=model, teacher=teacher, no_teacher=no_teacher, task=task,
                      steps=steps, seed=seed, max_sentences=max_sentences, device=device)
    return run_adapt(plan, resume=resume, evaluate=scorer(labels, pairs, retrieval, domain))


class _Models:
    """The untouched student and the teacher, each loaded once for the whole run (the estimate, the scores, the
    teacher's pass and the weight mix share them); training builds its own trainable copy."""

    def __init__(self, plan: AdaptPlan) -> None:
        self.plan = plan
        self._student: Any = None
        self._teacher: Any = None

    @property
    def student(self) -> Any:
        if self._student is None:
            from cselab.models.sentence_model import load_model

            self._student = load_model(self.plan.model, pooler="mean")
        return self._student

    @property
    def teacher(self) -> Any:
        if self._teacher is None and self.plan.teacher is not None:
            from cselab.runtime.devices import pick_device
            from cselab.teacher.vectors import load_teacher

            self._teacher = load_teacher(self.plan.teacher, pick_device(self.plan.config.train.device))
        return self._teacher

    def drop_teacher(self) -> None:
        """Free the teacher before training, which reads its pass from disk: the memory handed back to the system
        (runtime/allocator.py keeps up to its trim threshold otherwise, and training would start 0.6 GB higher)."""
        self._teacher = None
        _give_back()

    def drop_student(self) -> None:
        """Free the untouched student before training where nothing after it reads the student (a recipe that
        does not mix the weights: the scores after training are the handed-back model's). Why: it is a whole model
        held beside training's own copy, its gradients and the optimizer's state; ``--no-teacher`` peaked in
        training with it held (``python -m lab.speed.adapt_footprint --case demo --no-teacher``)."""
        if self.plan.mix >= 1.0:
            self._student = None
            _give_back()


def _give_back() -> None:
    """What Python freed, collected and handed back to the system (:mod:`cselab.runtime.allocator`)."""
    import gc

    from cselab.runtime.allocator import give_back_free_memory

    gc.collect()
    give_back_free_memory()


def run_adapt(plan: AdaptPlan, *, resume: bool = False, evaluate: Callable[[Any], dict[str, float]] | None = None,
              observe: Callable[[Any, int], dict[str, float]] | None = None,
              observe_every: int | None = None, estimate: bool = True) -> AdaptResult:
    """Run a plan: check the output (once, under the run's lock), estimate the time, run the teacher's pass, train
    with the plan's selection, hand back the model (``OUTPUT/model``: the selected weights, mixed with the untouched
    model's when the recipe's ``mix`` is below 1), score before/after with ``evaluate`` (the user's labelled files),
    and write the model card's figures and the report.

    ``observe(model, step)`` (optional) only watches the training: the trainer calls it at step 0, every
    ``observe_every`` steps (default :func:`evaluation_every` of the budget) and at the last step, and logs what it
    returns in ``metrics.jsonl`` (``"observed"``); it never changes what is selected. The domain study records the
    candidate selection criteria and the domain's score this way. What it does is said, and its bars shown, through
    the reporter in effect (:mod:`cselab.reporter`)."""
    from cselab.runtime.allocator import bound_onednn_cache, tune_allocator
    from cselab.training.run_directory import BEST_DIR, RunDirectory
    from cselab.training.trainer import Trainer

    tune_allocator()  # the Python API's runs too, not only the CLI's (runtime/allocator.py)
    bound_onednn_cache()  # holds where torch has run no matmul yet in this process
    start = time.perf_counter()
    with RunDirectory(plan.output_dir) as run_dir:
        state = check_output(plan, resume=resume)
        if state == "finished":
            report().say(f"adapt: {plan.output_dir} holds this adaptation, finished; nothing to do")
            return _finished_result(plan)
        check_batch(plan)
        report().say(plan.describe())
        models = _Models(plan)
        estimate_s = _estimate(plan, models) if estimate else None
        run_dir.mark()
        if state == "fresh":
            write_json_atomic(plan.output_dir / PLAN_FILE, plan.facts())
        if not _texts_in_place(plan):
            write_texts(plan)
        adapted_teacher = _adapt_teacher_first(plan)
        phases = Phases()
        before = phases.timed("scoring your model", _scored, evaluate, models.student, desc="scoring your model") \
            if evaluate else {}
        teacher = _teacher_phases(plan, models, evaluate, before, phases) if plan.teacher is not None \
            else _TeacherPhases()
        selector = _selector(plan, teacher.held_out, teacher.views)
        models.drop_student()
        trainer = Trainer(plan.config, selector=selector, observer=observe,
                          observe_every=observe_every or evaluation_every(plan.steps),
                          activation_budget=ActivationBudget())
        result = phases.timed("training", trainer.run, resume=resume)
        micro_batch = trainer.micro_batch_facts()  # with the piece sizes the batches ran in
        handed_back = hand_back(plan, models, plan.output_dir / BEST_DIR)
        after = phases.timed("scoring your model", _scored, evaluate, handed_back, desc="scoring your model") \
            if evaluate else {}
        if teacher.scores:  # the user sees both models' scores: each beside its price
            teacher.serving["model"] = phases.timed("serving cost", _serving, plan, str(plan.model_dir),
                                                    handed_back, plan.output_dir / SERVING_EXPORTS_DIR)
        wall = time.perf_counter() - start
        summary = _summary(plan, result, before, after, teacher, phases, selector, wall, estimate_s,
                           micro_batch, adapted_teacher)
        annotate_model(plan.model_dir, summary)
        report_file = write_report(plan.output_dir, summary)
        write_json_atomic(plan.output_dir / ADAPT_FILE, summary)
    return AdaptResult(plan.model_dir, result.best_step, plan.selection, before, after, wall, report_file, plan.mix,
                       plan.teacher, teacher.scores)


def _estimate(plan: AdaptPlan, models: _Models) -> float:
    """The time estimate, said, and refused where it exceeds the plan's budget."""
    from cselab.adaptation.estimate import check_budget, estimate_seconds

    estimate_s = estimate_seconds(plan, models.student, models.teacher if plan.teacher_plan is None else None)
    check_budget(plan, estimate_s)
    report().say(f"adapt: estimated {estimate_s / 60:.0f} min on this machine (training, its evaluations, "
                 "the teacher pass; not loading models)")
    return estimate_s


def _adapt_teacher_first(plan: AdaptPlan) -> dict[str, Any] | None:
    """The teacher's own adaptation, run first where the recipe asks for it (a resume skips it): what it kept."""
    if plan.teacher_plan is None:
        return None
    inner = plan.teacher_plan
    report().say(f"adapt: first {inner.model}, adapted to the text ({inner.steps} steps of SimCSE)")
    kept = run_adapt(inner, resume=(inner.output_dir / PLAN_FILE).is_file(), estimate=False)
    return {"model": inner.model, "steps": inner.steps, "kept": str(kept.model_dir), "wall_s": round(kept.wall_s, 3)}


@dataclass
class _TeacherPhases:
    """What the teacher's phases gave: its scores on the user's labels, its vectors of the held-out text and of the
    guard views (read by the selection), and what the teacher and the model cost to serve."""

    scores: dict[str, float] = field(default_factory=dict)
    held_out: Any = None
    views: dict[str, Any] = field(default_factory=dict)
    serving: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def _teacher_phases(plan: AdaptPlan, models: _Models, evaluate: Callable[[Any], dict[str, float]] | None,
                    before: dict[str, float], phases: Phases) -> _TeacherPhases:
    """Score the teacher (said before its pass and the training, so that a user can stop before paying for them),
    run its passes over the held-out text and the guard views, and time what it costs to serve; then its memory is
    freed before training."""
    out = _TeacherPhases()
    # an adapted teacher serves this run alone: its exports stay in the run, not in the data home
    exports = None if plan.teacher_plan is None else plan.output_dir / ADAPTED_TEACHER_EXPORTS_DIR
    options = {"model": models.teacher, "requested_precision": plan.config.train.precision, "export_dir": exports}
    if evaluate:
        out.scores = phases.timed("scoring the teacher", _score_teacher, plan, evaluate, options)
        if behind := teacher_not_ahead(before, out.scores, plan.teacher):
            report().say(f"warning: {behind}")
    mark = phases.begin()
    # the teacher's pass over what the student is trained on and over the held-out text, kept in the run
    out.held_out = held_out_teacher_vectors(plan, plan.teacher, plan.output_dir / TEACHER_DIR, **options)
    if plan.guard_views:  # a pass of its own: the training text's pass stays the same (and cached)
        out.views = teacher_vectors_by_view(plan.teacher, plan.guard_views, plan.output_dir / GUARD_TEACHER_DIR,
                                            **options)
    phases.end("teacher's pass", mark)
    if out.scores:  # after its passes (timing it moves it to the CPU), and not counted in them
        # on the ways its pass chose among (the same kept choice): exporting a teacher only for this figure would
        # hold its runtime beside the torch teacher, 0.9 GB more for all-mpnet-base-v2 in OpenVINO
        from cselab.teacher.vectors import pass_backends, store_texts

        ways = pass_backends(len(store_texts(list(max(plan.teacher_parts().values(), key=len)))))
        out.serving["teacher"] = phases.timed("serving cost", _serving, plan, plan.teacher, options["model"], exports,
                                              ways)
    del options
    models.drop_teacher()
    return out


def _summary(plan: AdaptPlan, result: Any, before: dict[str, float], after: dict[str, float],
             teacher: _TeacherPhases, phases: Phases, selector: Any, wall: float, estimate_s: float | None,
             micro_batch: dict[str, Any], adapted_teacher: dict[str, Any] | None) -> dict[str, Any]:
    """``adapt.json``: what was adapted, how, what it scored and cost, each phase's time and the peak memory."""
    serving = {who: cost for who, cost in teacher.serving.items() if cost is not None}
    seconds = phases.seconds
    # times to the millisecond: rounded to 0.1 s, a short run's training time read 0.0
    return {"text": plan.text, "sentences": plan.sentences, "train_sentences": plan.train_sentences,
            "text_train_sentences": plan.text_train_sentences,
            "held_out": len(plan.held_out), "model": plan.model, "teacher": plan.teacher,
            "task": plan.task, "recipe": plan.recipe.name, "selection": plan.selection,
            "criterion": getattr(selector, "primary", None),
            "steps": plan.steps, "best_step": result.best_step, "mix": plan.mix,
            "model_dir": str(plan.model_dir),
            "selection_score": result.best_dev, "selection_start": result.dev_at_start,
            "before": before, "after": after,
            **({"teacher_scores": teacher.scores} if teacher.scores else {}),
            **({"serving": serving} if serving else {}),
            **({"teacher_pass": _pass_way(plan)} if plan.teacher is not None else {}),
            "wall_s": round(wall, 3), "teacher_s": round(seconds.get("teacher's pass", 0.0), 3),
            "train_s": round(seconds.get("training", 0.0), 3),
            "evaluate_s": round(seconds.get("scoring your model", 0.0) + seconds.get("scoring the teacher", 0.0), 3),
            **({"serving_s": round(seconds.get("serving cost", 0.0), 3)} if teacher.scores else {}),
            "phases": seconds, "peak_rss_mb": phases.peak_rss_mb, "phase_usage": phases.usage,
            "micro_batch": micro_batch,
            "estimate_s": None if estimate_s is None else round(estimate_s, 1), "provenance": provenance(),
            **({"general": plan.general, "general_sentences": len(plan.general_units)} if plan.general_units else {}),
            **({"adapted_teacher": adapted_teacher} if adapted_teacher is not None else {})}


class Phases:
    """Each phase's wall seconds (a phase that runs twice, such as scoring your model before and after, adds up), the
    command's peak resident memory by the end of each run of a phase, in the order they ran (the kernel's
    high-water mark: it only grows, so the first entry that jumps names the phase that set the peak), and the CPU
    time and minor page faults each run of a phase took (``usage``: where the kernel's share goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.peak_rss_mb: list[dict[str, Any]] = []
        self.usage: list[dict[str, Any]] = []

    @staticmethod
    def begin() -> tuple[float, Any]:
        """A mark at a phase's start, for :meth:`end`: the wall clock and the process's resource usage."""
        return time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)

    def end(self, name: str, mark: tuple[float, Any]) -> None:
        """Count the time since ``mark`` to phase ``name``, and hand what the phase freed back to the system: the
        next phase starts from what is still held, not from this one's high-water mark (a scoring's corpus, a
        pass's batches)."""
        clock, before = mark
        _give_back()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - clock, 3)
        now = resource.getrusage(resource.RUSAGE_SELF)
        self.peak_rss_mb.append({"after": name, "mb": round(now.ru_maxrss / 1024, 1),  # KiB on Linux
                                 "held_mb": resident_mb()})
        self.usage.append({"phase": name, "user_s": round(now.ru_utime - before.ru_utime, 2),
                           "system_s": round(now.ru_stime - before.ru_stime, 2),
                           "minor_faults": now.ru_minflt - before.ru_minflt})

    def timed(self, name: str, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``work(*args, **kwargs)``, its time added to phase ``name``."""
        mark = self.begin()
        out = work(*args, **kwargs)
        self.end(name, mark)
        return out


def _score_teacher(plan: AdaptPlan, evaluate: Callable[..., dict[str, float]], options: dict[str, Any]
                   ) -> dict[str, float]:
    """The teacher's scores on the user's labels, run on the way its pass over the text will run (chosen here and
    kept for the pass, :func:`cselab.teacher.vectors.fastest_way`): torch at its precision, or its export. A scorer
    that is not cselab's own (no ``takes_precision``) scores the torch model as it is."""
    if not getattr(evaluate, "takes_precision", False):
        return evaluate(options["model"])
    from cselab.teacher.vectors import fastest_way

    text = max(plan.teacher_parts().values(), key=len)  # the pass's largest part decides its candidates
    runner = fastest_way(str(plan.teacher), options["model"], text,
                         requested_precision=options["requested_precision"], export_dir=options["export_dir"])
    report().say(f"adapt: the teacher is scored on {runner.backend} {runner.precision}, the way its pass runs")
    if runner.backend == "torch":
        return evaluate(options["model"], precision=runner.precision, desc="scoring the teacher")
    return evaluate(runner.loaded(), desc="scoring the teacher")


def _scored(evaluate: Callable[..., dict[str, float]], model: Any, **options: Any) -> dict[str, float]:
    """``evaluate(model)``, with ``options`` (its bar's name) where the scorer is cselab's own."""
    return evaluate(model, **options) if getattr(evaluate, "takes_precision", False) else evaluate(model)


def _pass_way(plan: AdaptPlan) -> dict[str, str]:
    """How the teacher's pass over the text ran (backend and precision, chosen once per machine and teacher and
    kept: the same command hands back the same model), as the pass's store records it."""
    from cselab.teacher.vectors import pass_backend

    return pass_backend(plan.output_dir / TEACHER_DIR)


SERVING_EXPORTS_DIR = "serving-exports"  # the exports of the model handed back, timed for its serving cost


def _serving(plan: AdaptPlan, name: str, model: Any, export_dir: Path | None,
             backends: list[str] | None = None) -> dict[str, Any] | None:
    """What ``model`` costs to serve on this machine (:func:`cselab.adaptation.serving.serving_cost`, on the ways in
    ``backends``, default all), timed on the held-out lines; a failure to time it (an export that will not load,
    say) is said and gives ``None``, not an error: the scores stand without it."""
    import tempfile

    from cselab.adaptation.serving import serving_cost

    clock = time.perf_counter()
    bar = report().bar(total=1, desc=f"serving cost of {Path(name).name}", unit="model")
    try:
        with tempfile.TemporaryDirectory() as scratch, reporting(report().with_bars(False)):
            cost = serving_cost(name, model, plan.held_out, Path(scratch), export_dir, backends).to_dict()
        bar.update(1)
    except CselabError as exc:
        bar.close()
        report().say(f"adapt: {name}'s serving cost could not be timed ({exc}); the report leaves it out")
        return None
    bar.close()
    report().say(f"adapt: {name} serves {cost['sentences_per_s']:,.0f} sentences/s here ({cost['backend']} "
                 f"{cost['precision']}, {cost['size_mb']:,.0f} MB; timed in {time.perf_counter() - clock:.0f} s)")
    return cost


def hand_back(plan: AdaptPlan, models: _Models, best: Path) -> Any:
    """Save the model handed back in ``plan.model_dir``: the selected model (``best``), its weights mixed with the
    untouched model's as ``(1 - mix) * untouched + mix * selected`` (WiSE-FT,
    :func:`cselab.models.weight_mix.mixed_weights`) when the recipe's ``mix`` is below 1. Saved whole or not at
    all: a kill before it is saved makes it again on ``--resume``. Returns the model."""
    from cselab.models.sentence_model import load_model, save_model
    from cselab.models.weight_mix import mixed_weights

    if plan.model_dir.is_dir():
        return load_model(plan.model_dir)
    selected = load_model(best, device="cpu")
    if plan.mix < 1.0:
        untouched = {k: v.detach().cpu() for k, v in models.student.state_dict().items()}
        selected.load_state_dict(mixed_weights(untouched, selected.state_dict(), plan.mix), strict=True)
    save_model(selected, plan.model_dir, extra={"sources": [str(plan.model), str(best)],
                                                "weights_mixed": {"weight": plan.mix}})
    return selected


def summary_of(result: AdaptResult) -> str:
    lines = [f"model: {result.model_dir} (selected at step {result.best_step}; {result.selection}"
             f"{mixed_phrase(result.mix)})"]
    for key, old in result.before.items():
        new = result.after.get(key)
        if new is not None:
            lines.append(f"{key}: {old:.2f} -> {new:.2f} ({new - old:+.2f})")
    for warning in (teacher_not_ahead(result.before, result.teacher_scores, str(result.teacher)),
                    scores_lost(result.before, result.after)):
        if warning:
            lines.append(f"warning: {warning}")
    lines.append(f"report: {result.report} ({result.wall_s:.0f} s)")
    return "\n".join(lines)
