"""``cselab adapt``: a better encoder for the user's own text in one command.

The package: :mod:`.plan` (what will run, decided before any model loads), :mod:`.selection` (choosing the model
without labels, and the held-out scores), :mod:`.estimate` (the time estimate), :mod:`.run` (the whole command) and
:mod:`.report` (the model card's figures, the report and the summary).

The recipes (:data:`cselab.adaptation.plan.RECIPES`):

* **With a teacher** (``--teacher``, or all-mpnet-base-v2 by default once ``cselab data fetch models-mpnet`` has
  fetched it): ``vectors-and-head``, ``distill`` with ``target: vectors`` and ``projection:
  pca-rotation+linear-head``. The teacher's vectors of passages of the user's lines (up to 256 tokens) and of as
  many general sentences (``--general``, by default cselab's corpus, ``cselab data fetch corpus``) are learnt twice
  with a cosine loss, for 200 steps of 64: the student's own vector regresses onto them reduced to its width (PCA)
  and rotated into its frame (orthogonal Procrustes), and a linear head on the student regresses onto them whole.
  The teacher's vectors are computed once and kept in the run directory. The head is dropped at inference. The model
  handed back mixes three quarters of the adapted weights with a quarter of the untouched model's (``weight-mix``
  beside ``best``). ``vectors-general`` (the default before) is the same without the head, a quarter mixed.
* **Without one** (``--no-teacher``, or no teacher fetched): SimCSE with mean pooling at temperature 0.2, lr 1e-5,
  on a fixed budget (the last step is the result).
* **The teacher's cosines** (``--recipe distill``, the default before): ``distill`` with ``target: similarities``.
  Each batch holds lines of the user's text with three of their nearest neighbours by the teacher; the student's
  cosines of every pair in the batch regress onto the teacher's (MSE). The model kept
  (``guarded-distillation-loss``) is the step with the least distillation loss on the held-out text among the steps
  no worse than the untouched model on the held-out lines and on passages of them (256 tokens), the untouched model
  (step 0) included. It gained more on short-text classification and search, and lost on news clustering.
* **The teacher's whole vector, unmixed** (``--recipe vectors``, ``--recipe vectors-passages``): as the default
  without general sentences and without the mix, of each line (of 64 tokens) or each passage (of up to 256); they
  move general similarity more (docs/adapt.md).

``--mix W`` hands back the selected model's weights mixed with the untouched model's (``(1 - W) untouched + W
selected``, in ``weight-mix`` beside ``best``); the recipe sets it when not given (0.75 for the default, 0.25 for
``vectors-general``, 1 otherwise).

A held-out part of the text (5%, 20 to 500 sentences) is never trained on. How the defaults were chosen, and what
they gave on each domain of the suite, is in docs/adapt.md.

Everything ``cselab train`` gives holds: progress, ``--resume`` after a kill, one writer per directory, a
directory holding files that cselab did not write is refused.
"""

from cselab.adaptation.estimate import estimate_seconds
from cselab.adaptation.plan import (
           DEFAULT_MODEL,
           AdaptPlan,
           default_steps,
           evaluation_every,
           plan_adapt,
           read_text,
           split_held_out,
)
from cselab.adaptation.run import AdaptResult, run_adapt, summary_of
from cselab.adaptation.selection import DISTILLATION_LOSS, FIXED_BUDGET, SELECTIONS, TEACHER_AGREEMENT

__all__ = ["DEFAULT_MODEL", "DISTILLATION_LOSS", "FIXED_BUDGET", "SELECTIONS", "TEACHER_AGREEMENT", "AdaptPlan",
           "AdaptResult", "default_steps", "estimate_seconds", "evaluation_every", "plan_adapt", "read_text",
           "run_adapt", "split_held_out", "summary_of"]
