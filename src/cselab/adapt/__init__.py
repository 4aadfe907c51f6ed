"""``cselab adapt``: a better encoder for the user's own text in one command.

The package: :mod:`.plan` (what will run, decided before any model loads), :mod:`.selection` (choosing the model
without labels, and the held-out scores), :mod:`.estimate` (the time estimate), :mod:`.run` (the whole command) and
:mod:`.report` (the model card's figures, the report and the summary).

The recipes (:data:`cselab.adapt.plan.RECIPES`):

* **With a teacher** (``--teacher``, or all-mpnet-base-v2 by default once ``cselab data fetch models-mpnet`` has
  fetched it): ``distill`` with ``target: similarities``. Each batch holds lines of the user's text with three
  of their nearest neighbours by the teacher; the student's cosines of every pair in the batch regress onto the
  teacher's (MSE). Width-free, no module added at inference. The teacher's vectors of the text are computed once and
  kept in the run directory. The model kept (``guarded-distillation-loss``) is the step with the least distillation
  loss on the held-out text among the steps no worse than the untouched model on the held-out lines and on
  passages of them (256 tokens), the untouched model (step 0) included, so a run that only moves away from the
  teacher hands back the model it began with.
* **Without one** (``--no-teacher``, or no teacher fetched): SimCSE with mean pooling at temperature 0.2, lr 1e-5,
  on a fixed budget (the last step is the result).
* **The teacher's whole vector** (``--recipe vectors``, ``--recipe vectors-passages``): ``distill`` with
  ``target: vectors``. The teacher's vectors of the text are reduced to the student's width (PCA) and rotated into
  its frame (orthogonal Procrustes), and the student's vector of each line (of 64 tokens) or each passage (of up to
  256) regresses onto them with a cosine loss, on a fixed budget. Nothing is added at inference. It moves general
  similarity more than the default does, which is why it is an option and not the default (docs/adapt.md).

* **The teacher's whole vector with general sentences, a quarter kept** (``--recipe vectors-general``): as
  ``vectors-passages`` with as many general sentences beside the passages (``--general``, by default cselab's corpus,
  ``cselab data fetch corpus``), 200 steps of 64, and the adapted weights mixed a quarter with three quarters of the
  untouched model's (``weight-mix`` beside ``best``): the domain study's quarter mix, which gained less than the
  other recipes and scored below the untouched model on no seed it was scored on (docs/adapt.md).

``--mix W`` hands back the selected model's weights mixed with the untouched model's (``(1 - W) untouched + W
selected``, in ``weight-mix`` beside ``best``); the recipe sets it when not given (0.25 for ``vectors-general``, 1
otherwise).

A held-out part of the text (5%, 20 to 500 sentences) is never trained on. How the defaults were chosen, and what
they gave on each domain of the suite, is in docs/adapt.md.

Everything ``cselab train`` gives holds: progress, ``--resume`` after a kill, one writer per directory, a
directory holding files that cselab did not write is refused.
"""

from cselab.adapt.estimate import estimate_seconds
from cselab.adapt.plan import (
           DEFAULT_MODEL,
           AdaptPlan,
           default_steps,
           evaluation_every,
           plan_adapt,
           read_text,
           split_held_out,
)
from cselab.adapt.run import AdaptResult, run_adapt, summary_of
from cselab.adapt.selection import DISTILLATION_LOSS, FIXED_BUDGET, SELECTIONS, TEACHER_AGREEMENT

__all__ = ["DEFAULT_MODEL", "DISTILLATION_LOSS", "FIXED_BUDGET", "SELECTIONS", "TEACHER_AGREEMENT", "AdaptPlan",
           "AdaptResult", "default_steps", "estimate_seconds", "evaluation_every", "plan_adapt", "read_text",
           "run_adapt", "split_held_out", "summary_of"]
