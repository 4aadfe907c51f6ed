"""The domain study's tables (lab/books/domain_study.md), rendered from ``lab/results/domains.jsonl``.

One record per (domain, configuration, seed), written by ``lab/domain_study/run_domains.py``. Two tables:

* :func:`domains_table`: rows domain x configuration; each cell the mean over the recorded seeds (their number
  is shown) of the domain's main score, its difference to the untouched checkpoint, STS-B test (forgetting)
  and the wall time of the adaptation on the recording machine.
* :func:`goals_table`: per domain, the default recipe's seed mean against what it must reach (:class:`Goals`):
  over the checkpoint, over the best sentence-transformers recipe, against the untouched larger model, and the
  STS-B test it may lose; each difference says "met" or by how much it is missed. :func:`brief_goals_table` is
  the README's shorter view of the same margins (:func:`goal_margins`).
* :func:`selection_table`: for the runs that recorded a curve (the score of each candidate selection criterion
  and the domain's main score at the same evaluated steps), each criterion's **regret** (the domain score at the
  step the criterion selects minus the best step's; 0 is perfect, always <= 0) and the **Spearman** correlation
  over the steps between the criterion (oriented so that higher is better) and the domain score.

The domain score of a curve is measured for this study only; no run selects by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cselab.data.evalsets.domains import ALL_DOMAINS, DOMAINS
from cselab.data.stores.jsonl import Schema, flag, number, read_jsonl, text, whole
from cselab.research.reporting.markdown import fmt, markdown_table, short_commit


@dataclass(frozen=True)
class Configuration:
    """One row of the study: an untouched model, a sentence-transformers recipe (``recipe``), or ``cselab adapt``
    with or without the teacher, a ``--select`` and ``KEY=VALUE`` overrides (each configuration names every setting
    that tells it apart, so a row keeps its meaning when the default changes)."""

    key: str
    label: str
    trains: bool = True
    # a sentence-transformers recipe (lab/domain_study/domain_peers.py), None for cselab's runs
    recipe: str | None = None
    teacher: bool = False  # cselab adapt with the study's teacher, else --no-teacher
    # cselab adapt --recipe with the teacher: the cosines recipe (distill), the default when these rows were made
    adapt_recipe: str = "distill"
    select: str | None = None  # cselab adapt --select (None: its default)
    overrides: tuple[str, ...] = ()  # cselab adapt KEY=VALUE overrides
    units: str | None = None  # cselab adapt --units (None: the recipe's)
    passages: str | None = None  # cselab adapt --passages (None: the recipe's)
    max_length: int | None = None  # cselab adapt --max-length (None: the recipe's)
    steps: int | None = None  # cselab adapt --steps (None: the recipe's budget for the text)
    transductive: bool = False  # trained on the text WITH the test items' text
    # trained with as many sentences of the study's general text (lab/domain_study/general_text.py) beside the
    # domain's text (cselab adapt --general)
    general: bool = False
    # cselab adapt --mix: the adapted model's share of the weights mixed with the untouched model's (None: the recipe's)
    mix: float | None = None
    model: str | None = None  # cselab adapt --model: the model adapted (None: the study's, run_domains --model)
    # the teacher: the model kept by this configuration's run of the same domain and seed (None: the study's teacher,
    # run_domains --teacher)
    teacher_run: str | None = None


LARGER_MODEL = "all-mpnet-base-v2"
GENERAL_FILE = "general.txt"  # the study's general text (general_text.py), beside its run directories
# what the configurations made before the recipe trained on lines and passages together ran with (the recipe's
# options are their defaults, so the options it gained since are set back here)
_BEFORE_MIXED = ("method_options.length_groups=1",)
_DISTILL = ("method_options.target=vectors", *_BEFORE_MIXED)
# the default's overrides (the mixed recipe), and the screens made from it
_MIXED = ("method_options.target=similarities", "method_options.projection=none", "method_options.vector_loss=mse",
          "method_options.neighbours=3", "train.batch_size=16", "train.lr=1e-4", "method_options.length_groups=4")


def _changed(overrides: tuple[str, ...], *changes: str) -> tuple[str, ...]:
    """``overrides`` with each KEY=VALUE of ``changes`` in place of the one of the same KEY (the order kept)."""
    new = dict(change.split("=", 1) for change in changes)
    if not new.keys() <= {o.split("=", 1)[0] for o in overrides}:
        raise ValueError(f"no override to change for {sorted(new)}")
    return tuple(f"{key}={new.get(key, value)}" for key, value in (o.split("=", 1) for o in overrides))


# the mixed recipe with the PCA-rotated vector term beside the cosines (target similarities_and_vectors)
_SIMVEC = _changed(_MIXED, "method_options.target=similarities_and_vectors", "method_options.projection=pca-rotation",
                   "method_options.vector_loss=cosine")


def _simvec_weighed(weight: str) -> Configuration:
    """The composition with the vector term weighed ``weight`` to the cosines' 1."""
    return Configuration(f"cselab-distill-simvec{weight}-nb3-guarded-mixed", "`cselab adapt`: the 3-neighbour mixed "
                         "recipe with the teacher's PCA rotated into the student (cosine loss) as a second term beside "
                         f"the cosines (MSE), weighed {weight} to 1", teacher=True, select="guarded-distillation-loss",
                         units="mixed", max_length=256,
                         overrides=(*_SIMVEC, f"method_options.loss_weights={{distillation_cosine: {weight}}}"))


# pinned to what it ran with on stsb (passages of up to 256 tokens, batches of 64, 100 steps, no neighbours, the last
# step kept), as cselab-distill-pca-cos-lines is
_PCA_COS = Configuration("cselab-distill-pca-cos", "`cselab adapt`: the teacher's PCA rotated into the student, cosine "
                         "loss", teacher=True, units="passages", select="fixed-budget", steps=100, max_length=256,
                         overrides=(*_DISTILL, "method_options.projection=pca-rotation",
                                    "method_options.vector_loss=cosine", "method_options.neighbours=0",
                                    "train.batch_size=64"))
# the rotation and the head as two terms (cselab adapt's default training since the composition's study)
_PCA_HEAD_OVERRIDES = _changed(_PCA_COS.overrides, "method_options.projection=pca-rotation+linear-head")
# SimCSE's term beside the distillation, at cselab adapt's SimCSE temperature (mean pooling)
_SIMCSE_BESIDE = ("method_options.contrastive=true", "method_options.temperature=0.2")


def _with_simcse(suffix: str, how: str, *overrides: str) -> Configuration:
    """The default's training (the rotation and the head) with SimCSE's term beside its two, ``how`` said in the
    label and set by ``overrides``."""
    return replace(_PCA_COS, key=f"cselab-distill-pcahead-cos-general-simcse{suffix}", label="`cselab adapt`: the "
                   "teacher's PCA rotated into the student and a linear head onto its whole vector (dropped at "
                   f"inference), two cosine terms, and SimCSE's term between two dropout views{how}, on passages and "
                   "as many general sentences", steps=200, general=True,
                   overrides=(*_PCA_HEAD_OVERRIDES, *_SIMCSE_BESIDE, *overrides))


# the default with as many general sentences (the study's general text) beside the user's lines and passages; its
# budget, one pass over all of them, meets the same 450-step cap
_DEFAULT_GENERAL = Configuration("cselab-distill-sim-nb3-guarded-mixed-general", "`cselab adapt`'s default recipe "
                                 "with as many general sentences beside the text", teacher=True,
                                 select="guarded-distillation-loss", units="mixed", max_length=256, general=True,
                                 overrides=_MIXED)


# the default's training: the rotation and the head (its runs, mixed, are the default's records)
_PCA_HEAD_GENERAL = replace(_PCA_COS, key="cselab-distill-pcahead-cos-general", label="`cselab adapt`: the teacher's "
                            "PCA rotated into the student and a linear head onto its whole vector (dropped at "
                            "inference), two cosine terms, on passages and as many general sentences", steps=200,
                            general=True, overrides=_PCA_HEAD_OVERRIDES)
# the teacher adapted first: all-mpnet-base-v2 trained with cselab adapt's SimCSE on the domain's text, at the study's
# SimCSE budget
_TEACHER_SIMCSE_STEPS = 100
_TEACHER_SIMCSE = Configuration("mpnet-simcse", f"{LARGER_MODEL} adapted with `cselab adapt --no-teacher` (SimCSE, "
                                f"{_TEACHER_SIMCSE_STEPS} steps)", model=LARGER_MODEL, steps=_TEACHER_SIMCSE_STEPS)


def _vectors_and_head(key: str, mix: float, kept: str) -> Configuration:
    """The default's recipe (vectors-and-head) handing back ``mix`` of the adapted weights, ``kept`` saying so."""
    return Configuration(key, "`cselab adapt`: the teacher's whole vector of passages and of as many general "
                         "sentences, through its PCA rotated into the student and a linear head (cosine loss, 200 "
                         f"steps), {kept}", teacher=True, adapt_recipe="vectors-and-head", general=True, mix=mix)


_DEFAULT_MIX075 = _vectors_and_head("cselab-vectors-and-head-mix075", 0.75, "three quarters of the adapted weights "
                                    "mixed with a quarter of the untouched model's")
CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("checkpoint", "all-MiniLM-L6-v2 untouched (mean pooling)", trains=False),
    Configuration("mpnet", f"{LARGER_MODEL} untouched (5x larger)", trains=False),
    Configuration("st-tsdae", "sentence-transformers TSDAE", recipe="tsdae"),
    Configuration("st-ct", "sentence-transformers CT (in-batch negatives)", recipe="ct"),
    Configuration("st-mnrl", "sentence-transformers SimCSE (MNRL)", recipe="mnrl"),
    Configuration("st-distill", "sentence-transformers distillation (MSE onto the teacher's PCA)", recipe="distill"),
    Configuration("cselab-simcse", "`cselab adapt --no-teacher` (SimCSE)"),
    Configuration("cselab-adapt", f"`cselab adapt` distilling {LARGER_MODEL}'s cosines of neighbour pairs "
                  "(the teacher recipe until the distillation study)", teacher=True, select="teacher-agreement",
                  units="lines", max_length=64,
                  overrides=("method_options.target=pairs", "method_options.neighbours=30",
                             "method_options.random_pairs=1", "method_options.projection=none",
                             "method_options.vector_loss=mse", "model.dropout=0.0", "train.batch_size=64",
                             *_BEFORE_MIXED)),
    # pinned to what it ran with on stsb (batches of 64, 448 steps, no neighbours, the last step kept): the recipe
    # gained neighbours, batches of 16 and the guard after that run
    Configuration("cselab-distill-pca-cos-lines", "`cselab adapt`: the teacher's PCA rotated into the student, "
                  "cosine loss, on lines", teacher=True, units="lines", select="fixed-budget", steps=448,
                  overrides=(*_DISTILL, "method_options.projection=pca-rotation", "method_options.vector_loss=cosine",
                             "model.max_length=64", "method_options.neighbours=0", "train.batch_size=64")),
    _PCA_COS,
    # the same with as many general sentences (no Brown, no STS-B) beside the passages, at twice its steps so that each
    # passage is seen as often
    replace(_PCA_COS, key="cselab-distill-pca-cos-general", label="`cselab adapt`: the teacher's PCA rotated into the "
            "student, cosine loss, on passages and as many general sentences", steps=200, general=True),
    # the same, its weights mixed half and half with the untouched model's by cselab adapt itself (--mix 0.5): the
    # clustering advice as one command
    replace(_PCA_COS, key="cselab-distill-pca-cos-general-mix", label="`cselab adapt`: the teacher's PCA rotated into "
            "the student, cosine loss, on passages and as many general sentences, mixed half-way with the untouched "
            "model (--mix 0.5)", steps=200, general=True, mix=0.5),
    # the same with a linear head onto the teacher's whole vector (LEAF; dropped at inference) in place of its PCA
    # rotated into the student
    replace(_PCA_COS, key="cselab-distill-head-cos-general", label="`cselab adapt`: a linear head onto the teacher's "
            "whole vector (dropped at inference), cosine loss, on passages and as many general sentences", steps=200,
            general=True, overrides=_changed(_PCA_COS.overrides, "method_options.projection=linear-head")),
    # the same with both: the student onto the rotated PCA and a head (dropped at inference) onto the whole vector,
    # two cosine terms weighed 1 to 1
    _PCA_HEAD_GENERAL,
    # the same at twice the default's budget: the student ends far from its target at 200 steps (a cosine near 0.74)
    replace(_PCA_HEAD_GENERAL, key="cselab-distill-pcahead-cos-general-400", label=f"{_PCA_HEAD_GENERAL.label}, "
            "400 steps (twice the default's)", steps=400),
    # the same with the rotation's term at half the head's weight (the head alone gained man-page search and lost news)
    replace(_PCA_COS, key="cselab-distill-pcahead-cos-general-head2", label="`cselab adapt`: the teacher's PCA rotated "
            "into the student and a linear head onto its whole vector (dropped at inference), two cosine terms weighed "
            "1 to 2, on passages and as many general sentences", steps=200, general=True,
            overrides=(*_PCA_HEAD_OVERRIDES, "method_options.loss_weights.distillation_cosine=0.5")),
    # the same with SimCSE's term beside the two distillation terms (two dropout views of each batch, at cselab adapt's
    # SimCSE temperature), weighed 1 to 1 to 1: SimCSE alone gains man-page search and STS where the default gains least
    _with_simcse("", ""),
    # the same with SimCSE's term at a fifth of the distillation terms' weight
    _with_simcse("02", " at a fifth of their weight", "method_options.loss_weights.info_nce=0.2"),
    # the same with the teacher's related sentences (cosine at least 0.3) left out of SimCSE's negatives
    _with_simcse("02-related", " at a fifth of their weight, without the teacher's related sentences as negatives",
                 "method_options.loss_weights.info_nce=0.2", "method_options.related_cosine=0.3"),
    # the same with the MSE loss (direction and length) in place of the cosine loss (direction only)
    replace(_PCA_COS, key="cselab-distill-pca-mse-general", label="`cselab adapt`: the teacher's PCA rotated into the "
            "student, MSE, on passages and as many general sentences", steps=200, general=True,
            overrides=_changed(_PCA_COS.overrides, "method_options.vector_loss=mse")),
    # the same training with bf16 autocast pinned (`precision: auto` chose bf16 or fp32 by each machine's probe)
    replace(_PCA_COS, key="cselab-distill-pca-cos-general-bf16", label="`cselab adapt`: the teacher's PCA rotated "
            "into the student, cosine loss, on passages and as many general sentences, trained in bf16", steps=200,
            general=True, overrides=(*_PCA_COS.overrides, "train.precision=bf16")),
    # the same at a quarter of its weights, as its own recipe (vectors-general): cselab adapt's default from the
    # quarter mix's study to the composition's; its records are the runs above mixed at 0.25
    # (lab/domain_study/default_records.py)
    Configuration("cselab-vectors-general", "`cselab adapt`: the teacher's whole vector of passages and of as many "
                  "general sentences (cosine loss, 200 steps), a quarter of the adapted weights mixed with the "
                  "untouched model's", teacher=True, adapt_recipe="vectors-general", general=True),
    # the rotation and the head together at half of its weights, as its own recipe (vectors-and-head): cselab adapt's
    # default from the composition's study to the three-quarter mix's; its records are
    # cselab-distill-pcahead-cos-general's runs mixed at 0.5
    _vectors_and_head("cselab-vectors-and-head", 0.5, "half of the adapted weights mixed with the untouched model's"),
    # the same at three quarters of its weights: cselab adapt's default since the three-quarter mix's study; its
    # records are the same runs mixed at 0.75
    _DEFAULT_MIX075,
    _TEACHER_SIMCSE,
    # the default's training with that adapted teacher in place of the untouched one
    replace(_PCA_HEAD_GENERAL, key="cselab-distill-pcahead-cos-general-tsimcse", label=f"{_PCA_HEAD_GENERAL.label}, "
            f"the teacher {LARGER_MODEL} adapted first with SimCSE on the text", teacher_run=_TEACHER_SIMCSE.key),
    # the teacher adapted half-way (its SimCSE weights mixed half and half with the untouched model's), and the
    # default's training taught by it
    replace(_TEACHER_SIMCSE, key="mpnet-simcse-mix05", label=f"{_TEACHER_SIMCSE.label}, half of the adapted weights "
            "mixed with the untouched model's", mix=0.5),
    replace(_PCA_HEAD_GENERAL, key="cselab-distill-pcahead-cos-general-tsimcse05", label=f"{_PCA_HEAD_GENERAL.label}, "
            f"the teacher {LARGER_MODEL} adapted half-way first (SimCSE, half of its weights mixed)",
            teacher_run="mpnet-simcse-mix05"),
    # mpnet-simcse and the default's training taught by it as one command (cselab adapt --adapt-teacher): its records
    # are cselab-distill-pcahead-cos-general-tsimcse's runs mixed at 0.75, mpnet-simcse's wall time added
    # (lab/domain_study/default_records.py)
    replace(_DEFAULT_MIX075, key="cselab-adapt-teacher", teacher_run=_TEACHER_SIMCSE.key,
            label=f"`cselab adapt --adapt-teacher`: the default's recipe taught by {LARGER_MODEL} adapted first with "
            f"SimCSE on the text ({_TEACHER_SIMCSE_STEPS} steps)"),
    Configuration("cselab-distill-pca-mse", "`cselab adapt`: the teacher's PCA rotated into the student, MSE",
                  teacher=True, units="passages", overrides=(*_DISTILL, "method_options.projection=pca-rotation",
                                                             "method_options.vector_loss=mse")),
    Configuration("cselab-distill-head-cos", "`cselab adapt`: a linear head onto the teacher (LEAF), cosine loss",
                  teacher=True, units="passages", overrides=(*_DISTILL, "method_options.projection=linear-head",
                                                             "method_options.vector_loss=cosine")),
    Configuration("cselab-distill-head-mse", "`cselab adapt`: a linear head onto the teacher (LEAF), MSE",
                  teacher=True, units="passages", overrides=(*_DISTILL, "method_options.projection=linear-head",
                                                             "method_options.vector_loss=mse")),
    Configuration("cselab-distill-sim", "`cselab adapt`: the teacher's in-batch cosine matrix (MSE)", teacher=True,
                  units="passages", overrides=("method_options.target=similarities", "method_options.projection=none",
                                               "method_options.vector_loss=mse", *_BEFORE_MIXED)),
    Configuration("cselab-distill-sim-nb3", "`cselab adapt`: the teacher's cosines of each batch (MSE), each "
                  "sentence with 3 neighbours, the least held-out distillation loss kept", teacher=True,
                  select="distillation-loss", units="lines",
                  overrides=("method_options.target=similarities", "method_options.projection=none",
                             "method_options.vector_loss=mse", "method_options.neighbours=3", "train.batch_size=16",
                             "train.lr=1e-4", "model.max_length=64", *_BEFORE_MIXED)),
    Configuration("cselab-distill-sim-nb3-passages", "`cselab adapt`: the teacher's cosines of each batch (MSE), "
                  "each passage of up to 256 tokens with 3 neighbours, the least held-out distillation loss on "
                  "passages kept", teacher=True, select="distillation-loss", units="passages", max_length=256,
                  steps=100,
                  overrides=("method_options.target=similarities", "method_options.projection=none",
                             "method_options.vector_loss=mse", "method_options.neighbours=3", "train.batch_size=16",
                             "train.lr=1e-4", *_BEFORE_MIXED)),
    Configuration("cselab-distill-sim-nb3-guarded", "`cselab adapt`: the teacher's cosines of each batch (MSE), "
                  "each sentence with 3 neighbours, the least held-out distillation loss kept among the steps no "
                  "worse than the untouched model on held-out lines and passages", teacher=True,
                  select="guarded-distillation-loss", units="lines",
                  overrides=("method_options.target=similarities", "method_options.projection=none",
                             "method_options.vector_loss=mse", "method_options.neighbours=3", "train.batch_size=16",
                             "train.lr=1e-4", "model.max_length=64", *_BEFORE_MIXED)),
    Configuration("cselab-distill-sim-nb3-guarded-mixed", "`cselab adapt`: the teacher's cosines of each batch (MSE), "
                  "each line and each passage of up to 256 tokens with 3 neighbours, the guarded selection",
                  teacher=True, select="guarded-distillation-loss", units="mixed", max_length=256,
                  overrides=_MIXED),
    Configuration("cselab-distill-kl-nb3-guarded-mixed", "`cselab adapt`: the 3-neighbour mixed recipe with the "
                  "teacher's ranking of each sentence's batch-mates (KL of the softmaxes at temperature 0.05) in place "
                  "of every cosine (MSE); the guard, which reads the cosines' MSE, kept the untouched model",
                  teacher=True, select="guarded-distillation-loss", units="mixed", max_length=256,
                  overrides=_changed(_MIXED, "method_options.target=similarity_distributions")),
    Configuration("cselab-distill-sim-nb3-guarded-mixed-lr3e-5", "`cselab adapt`: the 3-neighbour mixed recipe at a "
                  "third of its learning rate (3e-5)", teacher=True, select="guarded-distillation-loss", units="mixed",
                  max_length=256, overrides=_changed(_MIXED, "train.lr=3e-5")),
    Configuration("cselab-distill-sim-nb3-guarded-mixed-similar", "`cselab adapt`: the 3-neighbour mixed recipe with "
                  "each passage a line and the lines most like it in words (TF-IDF) in place of lines drawn at random",
                  teacher=True, select="guarded-distillation-loss", units="mixed", passages="similar",
                  max_length=256, overrides=_MIXED),
    Configuration("cselab-distill-sim-nb0-guarded-mixed", "`cselab adapt`: the 3-neighbour mixed recipe with "
                  "batches of 64 examples drawn without their neighbours in place of 16 examples with 3 neighbours "
                  "each",
                  teacher=True, select="guarded-distillation-loss", units="mixed", max_length=256,
                  overrides=_changed(_MIXED, "method_options.neighbours=0", "train.batch_size=64")),
    Configuration("cselab-distill-sim-nb7-guarded-mixed", "`cselab adapt`: the teacher's cosines of each batch (MSE), "
                  "each line and each passage of up to 256 tokens, 8 a step with 7 neighbours each, the guarded "
                  "selection",
                  teacher=True, select="guarded-distillation-loss", units="mixed", max_length=256,
                  overrides=_changed(_MIXED, "method_options.neighbours=7", "train.batch_size=8")),
    Configuration("cselab-distill-simvec-nb3-guarded-mixed", "`cselab adapt`: the 3-neighbour mixed recipe with the "
                  "teacher's PCA rotated into the student (cosine loss) as a second term beside the cosines (MSE), "
                  "weighed 1 to 1", teacher=True, select="guarded-distillation-loss", units="mixed", max_length=256,
                  overrides=_SIMVEC),
    *(_simvec_weighed(weight) for weight in ("0.1", "0.03")),
    _DEFAULT_GENERAL,
    # the same at twice the cap, so that the domain's text is seen as often as by the default alone
    replace(_DEFAULT_GENERAL, key="cselab-distill-sim-nb3-guarded-mixed-general-900",
            label=f"{_DEFAULT_GENERAL.label}, at 900 steps", steps=900),
    # the SimCSE recipe on the text WITH the test items' text: what a user who clusters or searches their own text
    # would run; reported apart (the goals table's last column), never in place of the held-out rows
    Configuration("cselab-simcse-transductive", "`cselab adapt --no-teacher` (SimCSE) on the text with the test items",
                  transductive=True),
)
CONFIGURATION = {c.key: c for c in CONFIGURATIONS}
REFERENCE = "checkpoint"
LARGER = "mpnet"
PEERS = tuple(c.key for c in CONFIGURATIONS if c.recipe)
# the recipe `cselab adapt` ran by default before the distillation study (its rows carry no "default" flag)
FORMER_DEFAULT = "cselab-simcse"
TRANSDUCTIVE = "cselab-simcse-transductive"


# the configuration that runs `cselab adapt`'s default recipe (lab/tests/test_domain_study.py checks it against
# cselab's own plan). Declared rather than read from the records' "default" flags: a flag says what the default was
# when its run was made, and the passages recipe was the default for the runs made while it was being checked
DEFAULT_CONFIGURATION = "cselab-vectors-and-head-mix075"
# the configuration that runs `cselab adapt --adapt-teacher` (what --task similarity and --task search run)
ADAPTED_TEACHER_STUDENT = "cselab-adapt-teacher"


def default_configuration(records: Sequence[dict[str, Any]]) -> str:
    """:data:`DEFAULT_CONFIGURATION` when ``records`` hold a run of it, else :data:`FORMER_DEFAULT`."""
    return DEFAULT_CONFIGURATION if any(r.get("configuration") == DEFAULT_CONFIGURATION for r in records) \
        else FORMER_DEFAULT


@dataclass(frozen=True)
class Goals:
    """What the default recipe must reach on every domain (seed means unless said): over the untouched checkpoint,
    no seed below it, a share of the larger model's lead over the checkpoint recovered, over the best
    sentence-transformers recipe, and at most this much STS-B test lost by any seed."""

    over_checkpoint: float = 1.0
    teacher_lead_share: float = 0.5
    over_best_peer: float = 0.5
    stsb_loss: float = 0.3


GOALS = Goals()


GUARDED_KEY = "guarded_distillation_loss"  # derived from the curve's two held-out losses (with_guarded_score)


@dataclass(frozen=True)
class Criterion:
    """A candidate selection criterion: the curve key it reads, and whether a higher value is better
    (``None``: a fixed budget, which selects the last step)."""

    key: str
    label: str
    higher_is_better: bool | None


CRITERIA: tuple[Criterion, ...] = (
    Criterion("distillation_loss", "held-out distillation loss", False),
    Criterion("teacher_agreement", "teacher agreement", True),
    Criterion("stsb_dev", "STS-B dev", True),
    Criterion("infonce", "held-out InfoNCE", False),
    Criterion("alignment", "held-out alignment", False),
    Criterion("uniformity", "held-out uniformity", False),
    Criterion("distillation_loss_passages", "held-out distillation loss on passages", False),
    Criterion(GUARDED_KEY, "guarded held-out distillation loss (lines and passages)", True),
    Criterion("neighbour_overlap", "neighbour overlap with the teacher", True),
    Criterion("neighbour_overlap_passages", "neighbour overlap with the teacher on passages", True),
    Criterion("partition_agreement", "k-means partitions' agreement with the teacher", True),
    Criterion("partition_agreement_passages", "k-means partitions' agreement with the teacher on passages", True),
    Criterion("fixed_budget", "fixed budget", None),
)
DOMAIN_KEY = "domain"  # the curve's key of the domain's main score


def with_guarded_score(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points with the guarded selection's score (``cselab.adaptation.selection.guarded_score``, against step 0's
    losses on lines and passages) where the curve has both losses at every step, step 0 included."""
    from cselab.adaptation.selection import guarded_score

    keys = {"lines": "distillation_loss", "passages": "distillation_loss_passages"}
    if not points or int(points[0]["step"]) != 0 or not all(
            isinstance(p.get(k), (int, float)) for p in points for k in keys.values()):
        return list(points)
    reference = {view: float(points[0][key]) for view, key in keys.items()}
    return [{**p, GUARDED_KEY: guarded_score({view: float(p[key]) for view, key in keys.items()}, reference)}
            for p in points]


# -- the selection study ------------------------------------------------------------------------------------------
def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    value = float(spearmanr(x, y).statistic)
    return None if math.isnan(value) else value


def selection_agreement(curve: Sequence[dict[str, Any]], criteria: Sequence[Criterion] = CRITERIA
                        ) -> dict[str, Any]:
    """What each criterion selects on ``curve`` (points ``{"step": int, "domain": score, <criterion key>: value}``)
    and how well it agrees with the domain score.

    Returns ``{"steps": [...], "best_step", "best_score", "criteria": {key: {"selected_step", "score",
    "regret", "spearman"}}}``. A criterion selects the earliest step of its best value (as the trainer does: a
    later step must be strictly better); the fixed budget selects the last step and its Spearman is the one of
    the step number. A criterion missing from some point is left out."""
    by_step: dict[int, dict[str, Any]] = {}
    for point in curve:
        by_step[int(point["step"])] = point  # a step observed twice (a resumed run): the last one
    points = with_guarded_score([by_step[s] for s in sorted(by_step)])
    if not points:
        raise ValueError("an empty curve")
    domain = [float(p[DOMAIN_KEY]) for p in points]
    best = max(range(len(points)), key=lambda i: (domain[i], -i))
    out: dict[str, Any] = {"steps": [int(p["step"]) for p in points], "best_step": int(points[best]["step"]),
                           "best_score": domain[best], "criteria": {}}
    for criterion in criteria:
        if criterion.higher_is_better is None:
            values = [float(p["step"]) for p in points]
            chosen = len(points) - 1
        else:
            if not all(isinstance(p.get(criterion.key), (int, float)) for p in points):
                continue
            sign = 1.0 if criterion.higher_is_better else -1.0
            values = [sign * float(p[criterion.key]) for p in points]
            chosen = max(range(len(points)), key=lambda i: (values[i], -i))
        rho = _spearman(values, domain)
        out["criteria"][criterion.key] = {
            "selected_step": int(points[chosen]["step"]), "score": domain[chosen],
            "regret": round(domain[chosen] - domain[best], 4), "spearman": None if rho is None else round(rho, 4)}
    return out


# -- records ----------------------------------------------------------------------------------------------------
DOMAIN_RECORD = Schema("domain", {"domain": text(empty=False), "configuration": text(empty=False), "seed": whole(0),
                                   "main_score": number(), "stsb_test": number(), "wall_s": number(minimum=0),
                                   "default": flag()}, required=("domain", "configuration", "seed", "main_score"))


def read_domain_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``domains.jsonl`` (cselab's one reader of records, :func:`cselab.data.stores.jsonl.read_jsonl`);
    a bad line is refused naming the file, the line and the field."""
    return read_jsonl(path, DOMAIN_RECORD, what="domain results file")


# the suite's runs, then the kept-aside domain's, then the default's records made from kept runs (default_records.py)
SUITE_AND_CHECK_FILES = ("domains.jsonl", "domains_check.jsonl", "domains_default.jsonl")


def read_suite_and_check_records(results: Path) -> list[dict[str, Any]]:
    """The records of the suite and of the domain kept outside it (:data:`SUITE_AND_CHECK_FILES` in ``results``; a
    file not made yet holds none), as the recipe table sets them side by side."""
    return [r for name in SUITE_AND_CHECK_FILES if (results / name).exists()
            for r in read_domain_records(results / name)]


def read_suite_records(results: Path) -> list[dict[str, Any]]:
    """The records of the suite's domains only (:func:`read_suite_and_check_records` without the domain kept outside
    it): what the goals are held to."""
    return [r for r in read_suite_and_check_records(results) if r["domain"] in DOMAINS]


def _domain_order(name: str) -> tuple[int, str]:
    names = list(DOMAINS)
    return (names.index(name) if name in names else len(names), name)


def _configuration_order(key: str) -> tuple[int, str]:
    keys = [c.key for c in CONFIGURATIONS]
    return (keys.index(key) if key in keys else len(keys), key)


def group_runs(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(domain, configuration) -> its records, one per seed (a seed recorded twice: the last record), in the
    suite's domain order and the table's configuration order."""
    groups: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((str(record["domain"]), str(record["configuration"])), {})[int(record["seed"])] = record
    keys = sorted(groups, key=lambda k: (_domain_order(k[0]), _configuration_order(k[1])))
    return {k: [groups[k][s] for s in sorted(groups[k])] for k in keys}


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) / len(numbers) if numbers else None


def _seeds(records: Sequence[dict[str, Any]]) -> str:
    seeds = [int(r["seed"]) for r in records]
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def _trained_on(record: dict[str, Any]) -> str:
    text = record.get("training_text")
    if not text:
        return "-"
    where = Path(str(text.get("file", "?"))).name
    trained = text.get("trained_on")
    held = text.get("held_out")
    out = f"{where}: {trained:,}" if isinstance(trained, int) else where
    return out + (f" (+{held:,} held out)" if held else "")


def _budget(record: dict[str, Any]) -> str:
    steps, batch = record.get("steps"), record.get("batch_size")
    if not steps:
        return "-"
    out = f"{steps} x {batch}"
    return out + " (reduced)" if record.get("budget_note") else out


def _cpu(record: dict[str, Any]) -> str:
    cpu = str(record.get("provenance", {}).get("machine", {}).get("cpu", "?"))
    return " ".join(cpu.replace("(R)", "").replace("(TM)", "").replace(" Processor", "").split())


def _wall(runs: Sequence[dict[str, Any]]) -> str:
    """The mean wall time, with the torch threads it ran on; where the seeds ran on different CPUs, one mean per
    CPU, named (times are comparable only on one machine at equal threads)."""
    by_cpu: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_cpu.setdefault(_cpu(r), []).append(r)
    cells = []
    for cpu, group in by_cpu.items():
        wall = _mean([r["wall_s"] for r in group])
        threads = sorted({int(r["threads"]) for r in group if isinstance(r.get("threads"), int)})
        where = [f"{'/'.join(map(str, threads))} thr."] if threads else []
        where += [cpu] if len(by_cpu) > 1 else []
        cells.append(f"{fmt(wall, 0)} ({', '.join(where)})" if where and wall is not None else fmt(wall, 0))
    return "; ".join(cells)


def domains_table(records: Sequence[dict[str, Any]]) -> str:
    """Rows domain x configuration: the seed means of the main score, its difference to the checkpoint, STS-B
    test and the wall time (seconds of adaptation: model load, teacher pass, training, selection)."""
    groups = group_runs(records)
    reference = {domain: _mean([r["main_score"] for r in runs]) for (domain, config), runs in groups.items()
                 if config == REFERENCE}
    header = ["domain (main score)", "configuration", "trained on (sentences)", "steps x batch", "seeds",
              "main score", "vs checkpoint", "STS-B test", "wall s", "commit"]
    rows = []
    for (domain, config), runs in groups.items():
        main = _mean([r["main_score"] for r in runs])
        ref = reference.get(domain)
        delta = f"{main - ref:+.2f}" if main is not None and ref is not None and config != REFERENCE else "-"
        task = runs[-1].get("main_task", "?")
        label = CONFIGURATION[config].label if config in CONFIGURATION else config
        commits = sorted({short_commit(str(r.get("provenance", {}).get("git", "?"))) for r in runs})
        rows.append([f"{domain} ({task})", label, _trained_on(runs[-1]), _budget(runs[-1]), _seeds(runs),
                     fmt(main), delta, fmt(_mean([r["stsb_test"] for r in runs])),
                     _wall(runs), ", ".join(commits)])
    notes = sorted({f"{r['domain']}: {r['budget_note']}" for r in records if r.get("budget_note")})
    lines = markdown_table(header, rows)
    if notes:
        lines += ["", *(f"- reduced budget, {note}" for note in notes)]
    return "\n".join(lines)


def recipes_table(records: Sequence[dict[str, Any]], default: str | None = None) -> str:
    """The user's guide's one table of results (the ``<!-- cselab:domain-recipes -->`` block): a row per
    configuration, a column per domain; each cell the seed mean of the domain's main score, its difference to the
    untouched checkpoint, and how many seeds at how many steps (``-``: not run). The last column is the rule that
    chose the default: the mean of those differences over the suite's domains, and the worst of them (``-`` unless
    the configuration ran on every suite domain). ``cselab adapt``'s default row is marked: ``default``, or when None
    :func:`default_configuration` of ``records`` (a caller showing some configurations only names it from all)."""
    groups = group_runs(records)
    domains = sorted({d for d, _ in groups}, key=_domain_order)
    configurations = sorted({c for _, c in groups}, key=_configuration_order)
    default = default_configuration(records) if default is None else default
    reference = {d: _mean([r["main_score"] for r in runs]) for (d, c), runs in groups.items() if c == REFERENCE}
    header = ["configuration", *(f"{d} ({ALL_DOMAINS[d].main_task})" if d in ALL_DOMAINS else d for d in domains),
              "suite: mean change, worst"]
    rows = []
    for config in configurations:
        label = CONFIGURATION[config].label if config in CONFIGURATION else config
        row = [f"**{label}** (the default)" if config == default else label]
        changes = {}
        for domain in domains:
            runs = groups.get((domain, config))
            if not runs:
                row.append("-")
                continue
            main = _mean([r["main_score"] for r in runs])
            ref = reference.get(domain)
            cell = fmt(main)
            if ref is not None and config != REFERENCE and main is not None:
                cell += f" ({main - ref:+.2f})"
                changes[domain] = main - ref
            steps = sorted({r["steps"] for r in runs if isinstance(r.get("steps"), int)})
            if steps:
                cell += f"; {len(runs)}x{'/'.join(map(str, steps))} steps"
            row.append(cell)
        row.append(_suite_change(changes))
        rows.append(row)
    return "\n".join(markdown_table(header, rows))


def seeds_table(records: Sequence[dict[str, Any]]) -> str:
    """A row per record of a trained configuration (domain, configuration, seed, in the recipe table's order): the
    main score and its difference to the untouched checkpoint's mean, the STS-B test score, the step kept and the
    wall time. What the recipe table averages, seed by seed; configurations by name (the labels are long)."""
    groups = group_runs(records)
    reference = {d: _mean([r["main_score"] for r in runs]) for (d, c), runs in groups.items() if c == REFERENCE}
    keys = sorted((k for k in groups if k[1] != REFERENCE),
                  key=lambda k: (_domain_order(k[0]), _configuration_order(k[1])))
    rows = []
    for domain, config in keys:
        ref = reference.get(domain)
        for r in sorted(groups[(domain, config)], key=lambda r: int(r["seed"])):
            change = f" ({r['main_score'] - ref:+.2f})" if ref is not None else ""
            kept = r.get("best_step")
            rows.append([domain, config, str(r["seed"]), fmt(r["main_score"]) + change, fmt(r["stsb_test"]),
                         "-" if kept is None else str(kept), _wall([r])])
    return "\n".join(markdown_table(["domain", "configuration", "seed", "main score (change)", "STS-B test",
                                      "step kept", "wall"], rows))


def _suite_change(changes: dict[str, float]) -> str:
    """The mean of ``changes`` (domain -> difference to the checkpoint) over the suite's domains and the worst of
    them, or ``-`` when a suite domain is missing."""
    if not all(domain in changes for domain in DOMAINS):
        return "-"
    suite = {domain: changes[domain] for domain in DOMAINS}
    worst = min(suite, key=suite.__getitem__)
    return f"{sum(suite.values()) / len(suite):+.2f}, worst {suite[worst]:+.2f} ({worst})"


def selection_table(records: Sequence[dict[str, Any]]) -> str:
    """Per run with a curve: each criterion's regret and Spearman (the criteria some run recorded); the last rows
    their means over the held-out runs and how often each criterion selected the best step. The transductive runs
    are listed but kept out of the means: they answer another question (the text includes the test items)."""
    runs = [r for runs in group_runs(records).values() for r in runs if r.get("selection_study")]
    if not runs:
        return "_No run recorded a selection curve yet._"
    shown = [c for c in CRITERIA if any(c.key in r["selection_study"]["criteria"] for r in runs)]
    header = ["domain", "configuration", "seed", "steps scored", "best step (score)",
              *(f"{c.label}: regret / ρ" for c in shown)]
    rows = []
    regrets: dict[str, list[float]] = {c.key: [] for c in shown}
    rhos: dict[str, list[float]] = {c.key: [] for c in shown}
    hits: dict[str, int] = {c.key: 0 for c in shown}
    for record in runs:
        study = record["selection_study"]
        counted = record["configuration"] != TRANSDUCTIVE
        cells = []
        for c in shown:
            result = study["criteria"].get(c.key)
            if result is None:
                cells.append("-")
                continue
            if counted:
                regrets[c.key].append(float(result["regret"]))
                hits[c.key] += int(result["regret"] == 0)
                if result["spearman"] is not None:
                    rhos[c.key].append(float(result["spearman"]))
            rho = fmt(result["spearman"])
            cells.append(f"{result['regret']:+.2f} / {rho} (step {result['selected_step']})")
        config = record["configuration"]
        rows.append([record["domain"], CONFIGURATION[config].label if config in CONFIGURATION else config,
                     str(record["seed"]), str(len(study["steps"])),
                     f"{study['best_step']} ({study['best_score']:.2f})", *cells])
    mean_cells = [f"**{_mean(regrets[c.key]):+.2f} / {fmt(_mean(rhos[c.key]))}**" if regrets[c.key] else "-"
                  for c in shown]
    rows.append(["**mean over the held-out runs**", "", "", "", "", *mean_cells])
    rows.append(["**best step selected**", "", "", "", "",
                 *(f"{hits[c.key]} of {len(regrets[c.key])}" if regrets[c.key] else "-" for c in shown)])
    return "\n".join(markdown_table(header, rows))


def _met(value: float, goal: float) -> bool:
    return value >= goal - 1e-9  # a margin printed as equal to its goal meets it


def _verdict(value: float, goal: float) -> str:
    return f"{value:+.2f} (met)" if _met(value, goal) else f"{value:+.2f} (missed by {goal - value:.2f})"


def _transductive(runs: Sequence[dict[str, Any]] | None, reference: float | None) -> str:
    if not runs:
        return "-"
    main = _mean([r["main_score"] for r in runs])
    delta = f"{main - reference:+.2f} " if reference is not None and main is not None else ""
    return f"{delta}({fmt(main)}, {len(runs)} seed{'s' if len(runs) > 1 else ''})"


@dataclass(frozen=True)
class GoalMargins:
    """One domain's seed means that the goals compare (None where that side is not recorded)."""

    domain: str
    runs: list[dict[str, Any]]
    main: float
    reference: float | None
    best_peer: tuple[float, str] | None  # (mean, configuration key)
    larger: float | None
    stsb: float | None
    stsb_reference: float | None
    transductive: list[dict[str, Any]] | None

    @property
    def lowest_seed(self) -> float:
        return min(float(r["main_score"]) for r in self.runs)

    @property
    def lowest_stsb(self) -> float | None:
        values = [float(r["stsb_test"]) for r in self.runs if isinstance(r.get("stsb_test"), (int, float))]
        return min(values) if values else None

    @property
    def lead_share(self) -> float | None:
        """The share of the larger model's lead over the checkpoint that the recipe recovers."""
        if self.reference is None or self.larger is None or self.larger <= self.reference:
            return None
        return (self.main - self.reference) / (self.larger - self.reference)


# a domain's main task as `cselab adapt --task` names that kind of task
ADAPT_TASK_OF_MAIN_TASK = {"sts": "similarity", "retrieval": "search", "clustering": "clustering",
                           "classification": "classification"}


def task_configuration(domain: str, default: str = DEFAULT_CONFIGURATION) -> str:
    """The configuration that runs what ``cselab adapt --task T`` runs on ``domain``, T its kind of task: the teacher
    adapted first where the recipe ``--task`` chooses adapts it (:func:`cselab.adaptation.recipe_for`), else
    ``default``."""
    from cselab.adaptation import recipe_for

    task = ADAPT_TASK_OF_MAIN_TASK[ALL_DOMAINS[domain].main_task]
    return ADAPTED_TEACHER_STUDENT if recipe_for(teacher=True, task=task).adapt_teacher else default


def goal_margins(records: Sequence[dict[str, Any]], configuration: str | None = None, *,
                 by_task: bool = False) -> list[GoalMargins]:
    """Per domain with a ``configuration`` record (default: :func:`default_configuration`), in the suite's order,
    the means its goals compare. With ``by_task`` each domain's configuration is :func:`task_configuration`'s,
    ``configuration`` standing for the default."""
    configuration = configuration or default_configuration(records)
    groups = group_runs(records)
    means = {key: _mean([r["main_score"] for r in runs]) for key, runs in groups.items()}
    stsb = {key: _mean([r["stsb_test"] for r in runs]) for key, runs in groups.items()}
    out = []
    for (domain, config), runs in groups.items():
        wanted = task_configuration(domain, configuration) if by_task else configuration
        if config != wanted:
            continue
        peers = [(means[(domain, p)], p) for p in PEERS if (domain, p) in means]
        out.append(GoalMargins(domain, runs, means[(domain, config)], means.get((domain, REFERENCE)),
                               max(peers) if peers else None, means.get((domain, LARGER)), stsb[(domain, config)],
                               stsb.get((domain, REFERENCE)), groups.get((domain, TRANSDUCTIVE))))
    return out


def goals_table(records: Sequence[dict[str, Any]], configuration: str | None = None, goals: Goals = GOALS) -> str:
    """Per domain with a ``configuration`` record: its seed-mean main score against the goals (:class:`Goals`),
    each difference with "met" or "missed by". A comparison whose other side is not recorded is "-". The last
    column, held to no goal, is the transductive run (the text with the test items) against the checkpoint."""
    configuration = configuration or default_configuration(records)
    header = ["domain", "seeds", "main score", f"vs checkpoint (goal >= +{goals.over_checkpoint:.1f})",
              "lowest seed vs checkpoint (goal >= 0)",
              f"share of {LARGER_MODEL}'s lead (goal >= {goals.teacher_lead_share:.1f})",
              f"vs best sentence-transformers recipe (goal >= +{goals.over_best_peer:.1f})",
              f"STS-B test, lowest seed (goal >= checkpoint - {goals.stsb_loss:.1f})",
              "transductive: vs checkpoint (no goal)"]
    rows = []
    for m in goal_margins(records, configuration):
        rows.append([
            m.domain, _seeds(m.runs), fmt(m.main),
            _verdict(m.main - m.reference, goals.over_checkpoint) if m.reference is not None else "-",
            _verdict(m.lowest_seed - m.reference, 0.0) if m.reference is not None else "-",
            (_verdict(m.lead_share, goals.teacher_lead_share) + f" ({LARGER_MODEL} {m.larger:.2f})")
            if m.lead_share is not None else "-",
            (_verdict(m.main - m.best_peer[0], goals.over_best_peer) + f" ({m.best_peer[1]} {m.best_peer[0]:.2f})")
            if m.best_peer is not None else "-",
            (f"{m.lowest_stsb:.2f}: " + _verdict(m.lowest_stsb - m.stsb_reference, -goals.stsb_loss))
            if m.stsb_reference is not None and m.lowest_stsb is not None else fmt(m.stsb),
            _transductive(m.transductive, m.reference),
        ])
    if not rows:
        return f"_No `{configuration}` run recorded yet._"
    return "\n".join(markdown_table(header, rows))


SEEDS_ASKED = 3  # a study cell is the mean of seeds 1-3; a cell with fewer says so


def peers_table(records: Sequence[dict[str, Any]], configuration: str | None = None) -> str:
    """Rows domain; columns the sentence-transformers recipes and ``configuration``: each cell the seed-mean main
    score minus the checkpoint's, STS-B test in brackets, the row's best in bold (the docs' "recipes side by
    side", the ``<!-- cselab:domain-peers -->`` block)."""
    configuration = configuration or default_configuration(records)
    groups = group_runs(records)
    columns = [*PEERS, configuration]
    header = ["domain", *(CONFIGURATION[c].label.removeprefix("sentence-transformers ") for c in columns)]
    rows = []
    for domain in sorted({d for d, _ in groups}, key=_domain_order):
        reference = groups.get((domain, REFERENCE))
        if not reference:
            continue
        ref = _mean([r["main_score"] for r in reference])
        deltas = {c: _mean([r["main_score"] for r in groups[(domain, c)]]) - ref
                  for c in columns if (domain, c) in groups}
        best = max(deltas.values(), default=None)
        cells = []
        for c in columns:
            if c not in deltas:
                cells.append("not run")
                continue
            runs = groups[(domain, c)]
            delta = f"**{deltas[c]:+.2f}**" if deltas[c] == best else f"{deltas[c]:+.2f}"
            seeds = "" if len(runs) >= SEEDS_ASKED else f", {len(runs)} seed{'s' if len(runs) > 1 else ''}"
            cells.append(f"{delta} ({fmt(_mean([r['stsb_test'] for r in runs]))}){seeds}")
        rows.append([domain, *cells])
    return "\n".join(markdown_table(header, rows))


MAIN_SCORE_NAMES = {"v_measure": "V-measure", "accuracy": "accuracy", "cosine_spearman": "Spearman",
                    "ndcg_at_10": "nDCG@10"}


def _brief(value: float, goal: float) -> str:
    return f"**{value:+.2f}**" if _met(value, goal) else f"{value:+.2f}, missed by {goal - value:.2f}"


def brief_goals_table(records: Sequence[dict[str, Any]], configuration: str | None = None,
                      goals: Goals = GOALS, *, by_task: bool = False) -> str:
    """The user's guide's view of :func:`goals_table` (the ``<!-- cselab:domain-goals -->`` block): per domain, its
    main score's name, the untouched checkpoint and larger model, the recipe's seed mean, and each margin, bold where
    its goal is met, else with the amount it is missed by. With ``by_task`` (the ``domain-goals-by-task`` block)
    each domain's recipe is the one ``cselab adapt --task`` runs for its kind of task (:func:`task_configuration`),
    named in its cell, and a domain kept outside the suite says so."""
    configuration = configuration or default_configuration(records)
    recipe_column = "`cselab adapt --task T`" if by_task else CONFIGURATION[configuration].label
    header = ["domain (main score)", "untouched", LARGER_MODEL, recipe_column, "seeds",
              f"vs untouched (goal +{goals.over_checkpoint:.1f}; lowest seed)",
              f"share of {LARGER_MODEL}'s lead (goal {goals.teacher_lead_share:.1f})",
              f"vs best sentence-transformers recipe (goal +{goals.over_best_peer:.1f})",
              f"STS-B test, lowest seed (goal: untouched - {goals.stsb_loss:.1f})"]
    rows = []
    for m in goal_margins(records, configuration, by_task=by_task):
        domain = ALL_DOMAINS.get(m.domain)
        name = f"{m.domain} ({domain.main_task}, {MAIN_SCORE_NAMES[domain.main_metric]})" if domain else m.domain
        main = fmt(m.main)
        if by_task:
            name += "" if m.domain in DOMAINS else ", kept outside the suite"
            task = ADAPT_TASK_OF_MAIN_TASK[domain.main_task]
            first = " (the teacher adapted first)" if m.runs[0]["configuration"] == ADAPTED_TEACHER_STUDENT else ""
            main = f"`--task {task}`{first}: {main}"
        rows.append([
            name, fmt(m.reference), fmt(m.larger), main, ", ".join(str(r["seed"]) for r in m.runs),
            (f"{_brief(m.main - m.reference, goals.over_checkpoint)}; {m.lowest_seed - m.reference:+.2f}"
             if m.reference is not None else "-"),
            _brief(m.lead_share, goals.teacher_lead_share) if m.lead_share is not None else "-",
            f"{_brief(m.main - m.best_peer[0], goals.over_best_peer)} (`{m.best_peer[1]}`)"
            if m.best_peer is not None else "-",
            f"{fmt(m.lowest_stsb)}: {_brief(m.lowest_stsb - m.stsb_reference, -goals.stsb_loss)}"
            if m.stsb_reference is not None and m.lowest_stsb is not None else fmt(m.stsb),
        ])
    if not rows:
        return f"_No `{configuration}` run recorded yet._"
    return "\n".join(markdown_table(header, rows))


def domains_report(records: Sequence[dict[str, Any]]) -> str:
    """Both tables, as the ``<!-- cselab:domains -->`` block of the lab book holds them."""
    return "\n".join([
        "**The domain suite** (`lab/domain_study/run_domains.py`; each cell the mean over the seeds shown)", "",
        domains_table(records), "",
        f"**The goals**, for {CONFIGURATION[default_configuration(records)].label}: "
        "each difference of seed means, with the goal it is held to", "",
        goals_table(records), "",
        "**Selection without labels**: regret = the domain's main score at the step a criterion selects minus the "
        "best evaluated step's (0 is perfect); ρ = Spearman over the evaluated steps between the criterion "
        "(oriented so that higher is better; for the fixed budget, the step number) and the domain's main score. "
        "The domain score at every step is measured for this table only; no run selects by it.", "",
        selection_table(records),
    ])
