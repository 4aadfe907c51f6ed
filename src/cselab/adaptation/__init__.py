"""``cselab adapt``: a better encoder for the user's own text in one command (``cselab.adapt()`` in Python).

The flow walks once: :func:`~cselab.adaptation.plan.plan_adapt` reads the text, checks the models and the recipe and
builds the run configuration (nothing written, no model loaded); :func:`~cselab.adaptation.run.run_adapt` checks
the output under its lock, estimates the time, runs the teacher's pass, trains, and hands back one model,
``OUTPUT/model``; :func:`~cselab.adaptation.run.adapt` is both, with the scoring files checked before training.

The modules: :mod:`.recipe` (how it trains, as data: the recipes in ``recipes/`` are the ones the defaults and
``--task`` choose; ``--recipe FILE`` takes another), :mod:`.examples` (the text into training examples, as many as the
budget trains on), :mod:`.plan`, :mod:`.selection` (choosing a step without labels, and the held-out scores),
:mod:`.estimate` (the time estimate), :mod:`.run` and :mod:`.report` (the model card's figures, the report and the
summary).

With a teacher (all-mpnet-base-v2 once fetched, or ``--teacher``) the default recipe distils the teacher's whole vector
of passages of the user's lines and of as many general sentences into the student (its PCA rotated into the student's
frame, and through a linear head dropped at inference; cosine loss; 200 steps of 64) and hands back three quarters of
the change, mixed with the untouched weights. Without one it trains SimCSE. A held-out part of the text (5%, 20 to
500 sentences) is never trained on. Everything ``cselab train`` gives holds: progress, ``--resume`` after a kill, one
writer per directory, a directory holding files that cselab did not write is refused.
"""

from cselab.adaptation.plan import DEFAULT_MODEL, MODEL_DIR, AdaptPlan, plan_adapt
from cselab.adaptation.recipe import Recipe, load_recipe, recipe_for
from cselab.adaptation.run import AdaptResult, adapt, run_adapt, summary_of

__all__ = ["DEFAULT_MODEL", "MODEL_DIR", "AdaptPlan", "AdaptResult", "Recipe", "adapt", "load_recipe", "plan_adapt",
           "recipe_for", "run_adapt", "summary_of"]
