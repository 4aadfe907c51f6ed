"""Mixing the weights of two models of one architecture (WiSE-FT, Wortsman et al. 2022): ``cselab adapt``'s ``mix``
and the ensembles' ``combine="weights"``."""

from __future__ import annotations

from torch import Tensor

from cselab.errors import CselabError


def mixed_weights(state_a: dict[str, Tensor], state_b: dict[str, Tensor], weight: float) -> dict[str, Tensor]:
    """``(1 - weight) * a + weight * b`` for every floating-point tensor of two state dicts of one architecture; any
    other tensor (an index buffer) is b's. Refused in one line when the two hold other names or shapes."""
    if state_a.keys() != state_b.keys():
        raise CselabError("the two models hold different weights: mix the weights of a model and the one it was "
                          "adapted from (the same architecture), or use --combine sum or concat")
    mixed = {}
    for name, theirs in state_b.items():
        ours = state_a[name]
        if ours.shape != theirs.shape:
            raise CselabError(f"the two models' {name} have shapes {tuple(ours.shape)} and {tuple(theirs.shape)}: "
                              "mix the weights of one architecture, or use --combine concat")
        mixed[name] = ours.lerp(theirs, weight) if theirs.is_floating_point() else theirs.clone()
    return mixed
