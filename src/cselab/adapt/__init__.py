"""``cselab adapt``: a better encoder for the user's own text in one command.

The package: :mod:`.plan` (what will run, decided before any model loads), :mod:`.selection` (choosing the model
without labels, and the held-out scores), :mod:`.estimate` (the time estimate), :mod:`.run` (the whole command) and
:mod:`.report` (the model card's figures, the report and the summary).

The recipe (what :func:`plan_adapt` builds):

* **By default**: SimCSE with the model's own mean pooling at temperature 0.2, lr 1e-5, on a fixed budget (the
  last step is the result). Why this default: on the domain suite (docs/adapt.md, "Your own domain") it had the
  larger mean gain of the two recipes over the domains where both ran, it needs no second model and it trains
  several times faster than the teacher recipe; on its runs the fixed budget picked the same steps as the best
  label-free criteria (STS-B dev, held-out InfoNCE and uniformity) and better ones than the teacher agreement,
  without evaluating anything. Neither recipe gains on every domain (both lost on news clustering), which is why
  the user is asked to check the result on a few labelled examples (``--labels`` and the like).
* **With a teacher** (``--teacher DIR``, e.g. all-mpnet-base-v2 after ``cselab data fetch models-mpnet``): the
  teacher's cosines of pairs of the user's sentences are distilled into the user's model (``distill`` with
  ``target: pairs``): each sentence with one of its nearest neighbours by the teacher and with a random
  sentence, the student's cosines regressing onto the teacher's. The teacher is untouched.

**Selection without labels.** A held-out part of the user's text (5%, at most 500 sentences) is never trained
on. With a teacher, every ``eval_every`` steps the student is scored by its agreement with the teacher on
held-out pairs (Spearman x 100 between the student's and the teacher's cosines of each held-out sentence with
its nearest held-out neighbour and with a random one); the best step is kept, and the untouched model (step 0)
is always a candidate. Without a teacher there is nothing to agree with, so the budget is fixed and the last
step is kept. The budget is set from the text's size (:func:`default_steps`: three passes, 100 to 450 steps).

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
