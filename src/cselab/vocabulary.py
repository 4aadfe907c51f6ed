"""The words cselab's options take, each vocabulary named once here for the library and the command line.

It imports nothing: the CLI offers these choices before torch loads, and the configuration reads them without
the models. The code that gives each word its meaning is named beside it.
"""

from __future__ import annotations

# how a sentence vector is read off an encoder (cselab.models.poolers; model.pooler, --pooler)
POOLERS: tuple[str, ...] = ("cls", "cls_before_pooler", "mean", "first_last_avg", "pooler", "mask")
# the splits of an STS set (STS-B and SICK-R have all three, the other sets test only; `cselab eval --splits`)
SPLITS: tuple[str, ...] = ("train", "dev", "test")
# what `cselab export --format` writes (cselab.export), and what runs a model (--backend, load_model(backend=))
FORMATS: tuple[str, ...] = ("onnx", "openvino")
BACKENDS: tuple[str, ...] = ("torch", *FORMATS)
# `cselab export --quantize`
QUANTIZATIONS: tuple[str, ...] = ("int8",)
# how an ensemble combines its members (cselab.models.sentence_model.EnsembleModel; `cselab ensemble --combine`)
COMBINE_MODES: tuple[str, ...] = ("sum", "concat")
# `cselab ensemble --combine`: those, or one model of the two models' weights mixed (cselab.models.weight_mix)
ENSEMBLE_COMBINES: tuple[str, ...] = (*COMBINE_MODES, "weights")
# how `cselab adapt` keeps its model (cselab.adaptation.selection; a recipe's `select`)
ADAPT_SELECTIONS: tuple[str, ...] = ("fixed-budget", "distillation-loss", "teacher-agreement",
                                     "guarded-distillation-loss")
# the recipes `cselab adapt` ships, by name (cselab/adaptation/recipes/*.yaml; `cselab adapt --recipe NAME`)
ADAPT_RECIPES: tuple[str, ...] = ("simcse", "vectors-and-head", "vectors-and-head-teacher-first")
# what the user's model is for (cselab.adaptation.recipe.TASK_RECIPES; `cselab adapt --task`)
ADAPT_TASKS: tuple[str, ...] = ("similarity", "search", "clustering", "classification")
# what a training example of `cselab adapt` is (cselab.adaptation.examples; a recipe's `units`)
ADAPT_UNITS: tuple[str, ...] = ("lines", "passages", "mixed")
# which lines a passage of `cselab adapt` groups (cselab.adaptation.examples.make_passages; a recipe's `passages`)
PASSAGE_GROUPINGS: tuple[str, ...] = ("shuffled", "similar")
