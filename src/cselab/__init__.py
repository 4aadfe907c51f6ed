"""cselab: unsupervised contrastive learning of sentence embeddings.

Public API (see :mod:`cselab.api`): :func:`load_model` -> :class:`SentenceEncoder` (``.encode`` returns numpy),
:func:`train`, :func:`evaluate`, :func:`evaluate_domain` (your own labelled files, or a suite domain).
"""

from cselab.api import SentenceEncoder, evaluate, load_model, train  # noqa: E402
from cselab.evaluation.domain import evaluate_domain  # noqa: E402
from cselab.version import __version__

__all__ = ["SentenceEncoder", "evaluate", "evaluate_domain", "load_model", "train", "__version__"]
