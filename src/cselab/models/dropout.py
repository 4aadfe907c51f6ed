"""Switching dropout off for one forward pass (SimCSE++'s off-dropout sampling) and back on afterwards.

In HF models dropout is not only ``nn.Dropout`` modules: attention layers pass their dropout
probability to the attention kernel only while *their own* ``training`` flag is set
(``dropout=0.0 if not self.training else self.dropout.p``), and some families keep that probability as
a plain float attribute. Every one of these reads the ``training`` flag of the module that applies it,
so the complete and family-independent switch is the ``training`` flag of every submodule. This is not
``torch.no_grad``: gradients flow through the dropout-free pass as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def dropout_disabled(module: nn.Module) -> Iterator[nn.Module]:
    """Run the body with every dropout of ``module`` (all submodules) off; restore each flag afterwards.

    Each submodule gets back exactly the ``training`` flag it had before (also when the body raises),
    so a model that was partly in eval mode stays so.

    Example::

        with dropout_disabled(encoder):
            z0 = encoder(features, apply_head=True)   # deterministic, still differentiable
    """
    flags = [(m, m.training) for m in module.modules()]
    for m, _ in flags:
        m.training = False
    try:
        yield module
    finally:
        for m, was_training in flags:
            m.training = was_training
