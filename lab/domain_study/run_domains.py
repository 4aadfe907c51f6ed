"""The domain study: every configuration on every domain of the suite, one record per (domain, configuration, seed).

Configurations (lab/books/domain_study.md; ``lab.domain_study.study.CONFIGURATIONS``):

* ``checkpoint``: all-MiniLM-L6-v2 untouched, its own mean pooling;
* ``mpnet``: all-mpnet-base-v2 untouched (the teacher of the ``cselab-*`` configurations with a teacher, five times
  larger);
* ``st-tsdae``, ``st-ct``, ``st-mnrl``, ``st-distill``: sentence-transformers' own recipes through its trainer
  (``lab/domain_study/domain_peers.py``), on the domain's whole ``train.txt``;
* ``cselab-simcse``: ``cselab adapt --no-teacher`` (SimCSE, fixed budget);
* ``cselab-distill-*``: ``cselab adapt`` with the teacher, each naming the settings that tell it apart (the
  default, ``cselab-vectors-and-head-mix075``, is ``cselab-distill-pcahead-cos-general``'s runs mixed at 0.75:
  ``lab/domain_study/default_records.py``);
* ``mpnet-simcse``: all-mpnet-base-v2 itself adapted with ``cselab adapt --no-teacher``; a configuration with a
  ``teacher_run`` (``cselab-distill-pcahead-cos-general-tsimcse``) is taught by the model that run kept on the same
  domain and seed, which must have run first;
* ``cselab-adapt``: the teacher recipe before the distillation study (neighbour-pair cosines, selection by
  agreement with the teacher);
* ``cselab-simcse-transductive``: SimCSE on ``train-transductive.txt``, the text WITH the test items' text
  (what a user clustering or searching their own text would run), reported apart from the held-out rows.

A record says whether it ran ``cselab adapt``'s default (``"default": true``).

Every trained configuration starts from the same checkpoint and runs the same budget: the steps ``cselab adapt``
sets for the domain's text (``--steps`` overrides it for ALL configurations of a run; the record then says so),
with the examples per step and tokens of its recipe (sentence-transformers' recipes: 64 and 64). Every model is
scored at the checkpoint's own max length (256) so no configuration is cut shorter than the checkpoint at
evaluation. The domain's task is scored with cselab's domain evaluation (mteb), STS-B test with cselab's evaluator
(``cselab.evaluate(model, ["stsb"])``): forgetting.

**The selection study.** For the ``cselab-*`` runs an observer (``run_adapt(observe=...)``, which never selects)
records at the evaluated steps (step 0, every ``--observe-every`` evaluation of ``cselab adapt`` and the last
step) each candidate criterion without labels: agreement with the teacher on held-out pairs (for
``cselab-adapt`` the very numbers it selects by), STS-B dev, and the held-out text's InfoNCE, alignment and
uniformity (``cselab.adaptation.selection``), and the domain's main score on the test items, for the study only.
From that curve the record stores each criterion's regret and Spearman (``lab.domain_study.study``). The time
spent observing is left out of ``wall_s`` (it is ``observe_s``).

Resumable: a (domain, configuration, seed) already in the results file is skipped; a ``cselab adapt`` run cut
short is resumed where it stopped, its teacher passes included (the record says ``"resumed": true``, and its
``wall_s`` and ``teacher_s`` leave out the part made before), any other run started again from scratch. One
training at a time, ``--threads`` torch threads for every configuration.

    python -m lab.domain_study.run_domains --domains linux-man,stsb,bbc-news,tweets --seeds 1
    python -m lab.domain_study.run_domains --domains linux-man --steps 100 --budget-note "..."   # a reduced budget
    python -m lab.domain_study.run_domains --domains bbc-news --configurations cselab-simcse --text FILE  # another text
    python -m lab.render   # the study's tables into the docs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from lab.domain_study.domain_peers import RECIPES, saved_model, train_peer
from lab.domain_study.run_trace import run_trace
from lab.domain_study.scoring import study_scores
from lab.domain_study.study import GENERAL_FILE
from lab.record import RESULTS_DIR, RUNS_DIR, append_record

RESULTS = RESULTS_DIR / "domains.jsonl"
RUNS = RUNS_DIR / "domains"
STUDENT = "all-MiniLM-L6-v2"
PEER_BATCH_SIZE = 64  # the sentence-transformers recipes' examples per step, as their examples set it


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from lab.domain_study.study import CONFIGURATIONS, LARGER_MODEL

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", default="linux-man,stsb,bbc-news,tweets",
                        help="comma-separated, run in this order")
    parser.add_argument("--configurations", default=",".join(c.key for c in CONFIGURATIONS))
    parser.add_argument("--seeds", default="1", help="comma-separated")
    parser.add_argument("--steps", type=int, help="the budget of every configuration (default: cselab adapt's)")
    parser.add_argument("--budget-note", default="", help="why the budget is not cselab adapt's default (recorded)")
    parser.add_argument("--text", type=Path, help="train the cselab-* configurations on this file instead of the "
                        "domain's train.txt (recorded; e.g. whole documents instead of sentences)")
    parser.add_argument("--batch-size", type=int, help="examples per step (default: cselab adapt's recipe's; the "
                        "sentence-transformers recipes: 64)")
    parser.add_argument("--max-length", type=int, help="tokens of a training example "
                        "(default: cselab adapt's recipe's; the sentence-transformers recipes: 64)")
    parser.add_argument("--eval-max-length", type=int, default=256,
                        help="tokens per text when a MiniLM-based model is scored (the checkpoint's own)")
    parser.add_argument("--observe-every", type=int, default=2,
                        help="observe the criteria every N-th evaluation of cselab adapt (1: every one; 0: never, "
                        "no selection study for these runs)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads for every configuration (0: torch's)")
    parser.add_argument("--model", default=STUDENT,
                        help="the start checkpoint (a name in $CSELAB_HOME/models or a dir)")
    parser.add_argument("--teacher", default=LARGER_MODEL, help="cselab adapt's teacher and the `mpnet` row")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--runs", type=Path, default=RUNS, help="run directories")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def recorded_runs(path: Path) -> set[tuple[str, str, int]]:
    """The (domain, configuration, seed) already in the results file (none when there is no file yet)."""
    from lab.domain_study.study import read_domain_records

    if not path.is_file():
        return set()
    return {(str(r["domain"]), str(r["configuration"]), int(r["seed"])) for r in read_domain_records(path)}


def model_path(name: str) -> str:
    """A fetched model's directory (``$CSELAB_HOME/models/NAME``) or the path as given."""
    from cselab.paths import cselab_home

    fetched = cselab_home() / "models" / name
    return str(fetched) if fetched.is_dir() else name


def teacher_of(spec: Any, domain: str, seed: int, args: argparse.Namespace) -> str:
    """The teacher of configuration ``spec`` on ``domain`` at ``seed``: the model handed back by its ``teacher_run``'s
    run of the same domain and seed (which must have run first; what its ``adapt.json`` says), else the study's
    teacher (``--teacher``)."""
    if spec.teacher_run is None:
        return model_path(args.teacher)
    kept = saved_model(args.runs / domain / f"{spec.teacher_run}-s{seed}", spec.teacher_run, handed_back=True)
    if not (kept / "config.json").is_file():
        raise SystemExit(f"{spec.key} is taught by {spec.teacher_run}'s run on {domain} at seed {seed}, and {kept} "
                         f"holds no model: run --configurations {spec.teacher_run} --domains {domain} --seeds {seed} "
                         "first")
    return str(kept)


class Clock:
    """Seconds spent inside the observer (left out of a run's wall time)."""

    def __init__(self) -> None:
        self.seconds = 0.0


def make_observer(inputs: Any, main_task: str, held_out: list[str], teacher_held: Any, eval_max_length: int,
                  clock: Clock, echo: Any, passages: tuple[list[str], Any] | None = None) -> Any:
    """``observe(model, step)``: the candidate criteria and the domain's main score (the study only).
    ``teacher_held``: the teacher's vectors of the held-out sentences (from its pass over the text); ``passages``:
    the held-out lines as passages of up to ``GUARD_MAX_LENGTH`` tokens and the teacher's vectors of them (the
    guarded selection's second view), whose distillation loss and neighbourhoods are then observed too."""
    from cselab.adaptation.selection import (
        GUARD_MAX_LENGTH,
        HeldOutDistillationLoss,
        HeldOutScores,
        teacher_agreement_task_from_vectors,
    )
    from cselab.evaluation.domain import score_inputs
    from cselab.evaluation.sts_evaluator import StsEvaluator
    from cselab.models.encoder import encoding_length
    from lab.domain_study.neighbourhoods import TeacherNeighbourhoods

    dev = StsEvaluator.from_names(["stsb"], splits=("dev",), primary="stsb/dev")
    agreement = StsEvaluator([teacher_agreement_task_from_vectors(held_out, teacher_held)],
                             primary="teacher-agreement/dev")
    # each view's held-out loss and the teacher's neighbourhoods in it, read off one encoding of the view
    views = {"": (HeldOutDistillationLoss(held_out, teacher_held), TeacherNeighbourhoods(teacher_held))}
    if passages is not None:
        views["_passages"] = (HeldOutDistillationLoss(*passages, max_length=GUARD_MAX_LENGTH),
                              TeacherNeighbourhoods(passages[1]))
    held = HeldOutScores(held_out)

    def observe(model: Any, step: int) -> dict[str, float]:
        start = time.perf_counter()
        values: dict[str, float] = {}
        values["teacher_agreement"] = agreement.primary_score(agreement(model))
        for suffix, (loss, neighbourhoods) in views.items():
            student = loss.encode(model)
            scores = {**loss.of_vectors(student), **neighbourhoods.of_vectors(student.numpy())}
            values.update({f"{key}{suffix}": value for key, value in scores.items()})
        values["stsb_dev"] = dev.primary_score(dev(model))
        values.update(held(model))
        with encoding_length(model, eval_max_length):
            values["domain"] = score_inputs(model, inputs, tasks=[main_task])[main_task]
        clock.seconds += time.perf_counter() - start
        echo(f"  observed step {step}: " + ", ".join(f"{k} {v:.4g}" for k, v in values.items())
             + f" ({time.perf_counter() - start:.0f} s)")
        return values

    return observe


def read_curve(run_dir: Path) -> list[dict[str, Any]]:
    """The observed points of ``metrics.jsonl`` (a step observed twice, by a resumed run: the last)."""
    from cselab.data.stores.jsonl import read_log

    observed: dict[int, dict[str, Any]] = {}
    for record in read_log(run_dir / "metrics.jsonl"):
        if "observed" in record:
            observed[int(record["step"])] = {"step": int(record["step"]), **record["observed"]}
    return [observed[step] for step in sorted(observed)]


def default_plan(text: Path, run_dir: Path, args: argparse.Namespace, *, seed: int, model: str,
                 general: Path | None, steps: int | None = None) -> Any:
    """What ``cselab adapt`` plans for ``text`` when no option says otherwise (but ``steps``, ``args.batch_size`` and
    ``args.max_length`` when given), its general sentences (when its recipe trains on them) drawn from ``general``
    where that file exists (the study's general text: which general sentences, like which text, is the study's
    data); ``None`` where the default cannot be planned here."""
    from cselab.adaptation import plan_adapt, recipe_for
    from cselab.adaptation.plan import resolve_teacher
    from cselab.errors import CselabError
    from lab.domain_study.recipes import with_arms

    default = recipe_for(teacher=resolve_teacher(None, False) is not None)
    use = general if general is not None and general.is_file() and default.general else None
    try:
        recipe = with_arms(default, batch_size=args.batch_size, max_length=args.max_length, general=use,
                           examples=default.examples)
        return plan_adapt(text, run_dir, recipe=recipe, model=model, steps=steps, seed=seed)
    except CselabError:  # e.g. the default's general sentences are neither fetched nor built for the study
        return None


def configuration_plan(spec: Any, text: str | Path, run_dir: Path, args: argparse.Namespace, *, seed: int, model: str,
                       teacher: str, general: Path | None, runtime: list[str]) -> Any:
    """The ``cselab adapt`` plan of the configuration ``spec`` (:class:`lab.domain_study.study.Configuration`) on
    ``text``: its recipe with its arms (:func:`lab.domain_study.recipes.configuration_recipe`), the budget of
    ``--steps`` when given, ``runtime`` overrides last."""
    from cselab.adaptation import plan_adapt
    from lab.domain_study.recipes import configuration_recipe, split_runtime

    kept, device = split_runtime(runtime)
    recipe = configuration_recipe(spec, batch_size=args.batch_size, max_length=args.max_length, general=general,
                                  runtime=kept)
    return plan_adapt(text, run_dir, recipe=recipe, model=model, teacher=teacher if spec.teacher else None,
                      no_teacher=not spec.teacher, steps=args.steps or spec.steps, seed=seed, device=device)


def is_default(plan: Any, text: Path, args: argparse.Namespace, default: Any = None) -> bool:
    """Whether ``plan`` runs what ``cselab adapt`` runs on ``text`` when no option says otherwise (the study's own
    runtime settings aside: threads, device, the run directory and the budget given by --steps; its general
    sentences drawn from the plan's own file). ``default``: that default's plan when the caller made it already
    (:func:`default_plan` with the plan's general file and the budget of --steps), else it is made here."""
    from cselab.config.run_config import RUNTIME_KEYS, flatten_config
    from cselab.paths import resolve_model_path

    if default is None:
        default = default_plan(text, plan.output_dir, args, seed=plan.config.train.seed, model=plan.model,
                               general=Path(plan.general) if plan.general else None, steps=args.steps)
    if default is None:
        return False
    ignore = set(RUNTIME_KEYS)

    def where(model: str | None) -> str | None:  # a fetched model's name and its directory are one teacher
        return None if model is None else str(Path(resolve_model_path(model)).resolve())

    def settings(config: Any) -> dict[str, Any]:
        flat = flatten_config(config.model_dump(mode="json"))
        if "method_options.teacher" in flat:
            flat["method_options.teacher"] = where(flat["method_options.teacher"])
        return {k: v for k, v in flat.items() if k not in ignore}

    return (where(default.teacher), default.selection, default.recipe.name, default.units, default.passages,
            default.general_units, default.mix) == (
        where(plan.teacher), plan.selection, plan.recipe.name, plan.units, plan.passages, plan.general_units,
        plan.mix) and settings(
        default.config) == settings(plan.config)


def resumable(plan: Any) -> bool:
    """Whether ``plan.output_dir`` holds this very adaptation (the same text and options), cut short or finished
    without a record: it is then resumed, its teacher passes and training going on where they stopped (a pass over
    tweets' passages takes about an hour on 2 cores), rather than started again."""
    from cselab.adaptation.run import check_output
    from cselab.errors import CselabError

    if not plan.output_dir.is_dir():
        return False
    try:
        return check_output(plan, resume=True) in ("resume", "finished")
    except CselabError:  # not an adaptation, another one, or none begun
        return False


def run_one(domain: str, configuration: str, seed: int, args: argparse.Namespace, echo: Any) -> dict[str, Any]:
    import torch

    from cselab.adaptation import plan_adapt, run_adapt
    from cselab.adaptation.examples import training_units
    from cselab.adaptation.plan import evaluation_every
    from cselab.adaptation.run import held_out_teacher_vectors
    from cselab.adaptation.selection import GUARD_MAX_LENGTH, teacher_vectors_by_view
    from cselab.config.run_config import RunConfig
    from cselab.data.evalsets.domains import get_domain, train_text
    from cselab.data.text.corpus import read_corpus
    from cselab.evaluation.domain import load_inputs
    from cselab.models.sentence_model import load_model
    from cselab.runtime.precision import resolve_precision, training_shape
    from lab.domain_study.recipes import split_runtime, study_recipe, with_arms
    from lab.domain_study.study import CONFIGURATION, selection_agreement

    spec = get_domain(domain)
    text = train_text(domain, transductive=CONFIGURATION[configuration].transductive)
    if args.text is not None:
        if not configuration.startswith("cselab-") or CONFIGURATION[configuration].transductive:
            raise SystemExit(f"--text trains the cselab-* configurations on another text, not {configuration}")
        text = args.text
    inputs = load_inputs(domain=domain)
    run_dir = args.runs / domain / f"{configuration}-s{seed}"
    spec_c = CONFIGURATION[configuration]
    student_name = spec_c.model or args.model
    student, teacher = model_path(student_name), teacher_of(spec_c, domain, seed, args)
    runtime = [f"train.threads={args.threads}"] if args.threads else []
    runtime.append("train.device=cpu" if not torch.cuda.is_available() else "train.device=cuda")
    general = args.runs / GENERAL_FILE if spec_c.general else None
    if general is not None and not general.is_file():
        raise SystemExit(f"{configuration} trains on the study's general text, {general}: build it first "
                         "(python -m lab.domain_study.general_text --help)")
    plan = configuration_plan(spec_c, text, run_dir, args, seed=seed, model=student, teacher=teacher, general=general,
                              runtime=runtime)
    # a sentence-transformers recipe runs the budget of the cosines recipe (distill): cselab adapt's default when the
    # peers' rows were made, so that they stay comparable
    if args.steps is None and spec_c.recipe:
        kept, device = split_runtime(runtime)
        recipe = with_arms(study_recipe("distill"), batch_size=args.batch_size, max_length=args.max_length,
                           overrides=kept)
        plan = plan_adapt(text, run_dir, recipe=recipe, model=student, teacher=teacher, seed=seed, device=device)
    resume = not spec_c.recipe and resumable(plan)
    if run_dir.exists():
        echo(f"  {run_dir} holds an unfinished run: " + ("resuming it" if resume else "starting it again"))
        if not resume:
            shutil.rmtree(run_dir)
    sentences = read_corpus(text).sentences
    trains = configuration not in ("checkpoint", "mpnet")
    # what cselab adapt runs on this text by default; an untouched model has no steps to compare with it
    default_run = default_plan(text, run_dir, args, seed=seed, model=student,
                               general=general or args.runs / GENERAL_FILE) if trains else None
    default = None if default_run is None else default_run.steps
    # the same plan is_default compares with, when this configuration trains on the study's general text at the
    # default budget; otherwise is_default plans its own
    same_default = default_run if args.steps is None and general is not None else None
    record: dict[str, Any] = {
        "domain": domain, "configuration": configuration, "seed": seed, "main_task": spec.main_task,
        "model": student_name, "eval_max_length": args.eval_max_length, "threads": torch.get_num_threads(),
    }
    if general is not None:
        record["general_text"] = {"file": str(general), "sha256": hashlib.sha256(general.read_bytes()).hexdigest(),
                                  "sentences": len(plan.general_units)}
    if trains:
        batch_size = plan.config.train.batch_size if not spec_c.recipe else args.batch_size or PEER_BATCH_SIZE
        record.update({"steps": plan.steps, "default_steps": default, "batch_size": batch_size,
                       "max_length": args.max_length or plan.config.model.max_length})
        if default is not None and plan.steps != default:
            record["budget_note"] = (args.budget_note or "") + f" ({plan.steps} of the default {default} steps)"
    echo(f"{domain} / {configuration} / seed {seed}: "
         + (f"{plan.steps} steps of {record['batch_size']}" if trains else "scoring the untouched model"))
    wall: float | None = None
    if configuration in ("checkpoint", "mpnet"):
        name = args.model if configuration == "checkpoint" else args.teacher
        model = load_model(model_path(name), pooler="mean")
        record["training_text"] = None
        record["model"] = name
        record["config"] = {"pooler": "mean", "max_length": getattr(model, "max_length", None)}
        record["eval_max_length"] = getattr(model, "max_length", None)
    elif recipe := CONFIGURATION[configuration].recipe:
        max_length = args.max_length or RECIPES[recipe].max_length  # None: the model's own max_seq_length
        shape = training_shape(_hf_config(student), record["batch_size"], max_length or 256)
        precision = resolve_precision("auto", torch.device("cpu"), shape).precision
        info = train_peer(recipe, student, text, run_dir, steps=plan.steps, batch_size=record["batch_size"],
                          max_length=max_length, seed=seed, precision=precision, progress=not args.quiet,
                          teacher=teacher if recipe == "distill" else None)
        wall = info["wall_s"]
        record["max_length"] = info["max_length"]
        record["training_text"] = {"file": str(text), "sentences": len(sentences), "trained_on": info["sentences"],
                                   "held_out": 0}
        record["recipe"] = info
        record["config"] = {"trainer": "SentenceTransformerTrainer", **info["recipe"], "precision": precision,
                            "steps": plan.steps, "batch_size": record["batch_size"], "max_length": info["max_length"]}
        record["selection"] = ("the best STS-B dev step (the example's load_best_model_at_end)" if recipe == "distill"
                               else "fixed-budget (last step)")
        if recipe == "distill":
            record["best_step"] = info["best_step"]
        model = load_model(info["model_dir"], max_length=args.eval_max_length)
    else:
        clock = Clock()
        observer = None
        if args.observe_every:
            # the teacher's vectors of the held-out text as the run scores it (lines, or passages of them), from its
            # pass over what the run trains on and scores: kept in the cache, where a run with the teacher reads it
            teacher_held = held_out_teacher_vectors(plan, teacher, None)
            # the guarded selection's views, requested as its run requests them (one pass, kept in the cache)
            views = plan.guard_views or {"lines": plan.held_out, "passages": training_units(
                plan.model, plan.held_out, "passages", GUARD_MAX_LENGTH, plan.passages)}
            on_views = teacher_vectors_by_view(teacher, views, None)
            observer = make_observer(inputs, spec.main_task, plan.held_out_units, teacher_held, args.eval_max_length,
                                     clock, echo, passages=(views["passages"], on_views["passages"]))
        every = max(1, args.observe_every) * evaluation_every(plan.steps)
        start = time.perf_counter()
        result = run_adapt(plan, observe=observer, observe_every=every, resume=resume)
        wall = round(time.perf_counter() - start - clock.seconds, 1)
        summary = json.loads((run_dir / "adapt.json").read_text())
        record["observe_s"] = round(clock.seconds, 1)
        record["teacher_s"] = summary.get("teacher_s")
        if resume:  # the part made before the restart is in neither wall_s nor teacher_s
            record["resumed"] = True
        record["training_text"] = {"file": str(text), "sentences": len(sentences), "trained_on": plan.train_sentences,
                                   "held_out": len(plan.held_out)}
        record["selection"] = plan.selection
        record["best_step"] = result.best_step
        record["teacher"] = plan.teacher
        record["recipe"] = plan.recipe.name
        record["default"] = is_default(plan, Path(text), args, default=same_default)
        config: RunConfig = plan.config
        record["config"] = {"effective": config.model_dump(mode="json"), "precision": _precision_of(run_dir),
                            "overrides": list(spec_c.overrides), "select": spec_c.select}
        record["trace"] = run_trace(run_dir)
        curve = read_curve(run_dir)
        if curve:
            record["curve"] = curve
            record["selection_study"] = selection_agreement(curve)
        model = load_model(result.model_dir, max_length=args.eval_max_length)
    start = time.perf_counter()
    record.update(study_scores(model, inputs, spec.main_task))
    record["eval_s"] = round(time.perf_counter() - start, 1)
    record["wall_s"] = wall
    echo(f"  {domain} / {configuration}: {spec.main_task} {record['main_score']:.2f}, STS-B test "
         f"{record['stsb_test']:.2f}" + (f", {wall:.0f} s" if wall is not None else ""))
    return record


def _hf_config(model_dir: str) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model_dir)


def _precision_of(run_dir: Path) -> Any:
    file = run_dir / "precision.json"
    return json.loads(file.read_text()) if file.is_file() else None


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    import torch

    from cselab.provenance import code_version
    from cselab.reporter import Reporter, reporting

    code_version()  # the study's records name the code it started with

    from lab.domain_study.study import CONFIGURATION, PEERS

    if args.threads:
        torch.set_num_threads(args.threads)
    domains = [d for d in args.domains.split(",") if d]
    configurations = [c for c in args.configurations.split(",") if c]
    unknown = [c for c in configurations if c not in CONFIGURATION]
    if unknown:
        raise SystemExit(f"unknown configuration(s): {', '.join(unknown)}")
    assert set(RECIPES) == {CONFIGURATION[key].recipe for key in PEERS}
    seeds = [int(s) for s in args.seeds.split(",") if s]
    done = recorded_runs(args.results)
    todo = [(d, c, s) for d in domains for c in configurations for s in seeds]
    for i, (domain, configuration, seed) in enumerate(todo, 1):
        prefix = f"[{i}/{len(todo)}]"
        if (domain, configuration, seed) in done:
            print(f"{prefix} {domain} / {configuration} / seed {seed}: recorded, skipped", flush=True)
            continue
        start = time.perf_counter()
        echo = lambda line, p=prefix: print(f"{p} {line}", flush=True)  # noqa: E731
        # what cselab does (the teacher pass, adapt, their bars) is told through this run's line prefix
        with reporting(Reporter(lines=echo, bars=not args.quiet)):
            record = run_one(domain, configuration, seed, args, echo)
        append_record(args.results, record, __file__, argv)
        print(f"{prefix} done in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
