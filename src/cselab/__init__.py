"""cselab: unsupervised contrastive learning of sentence embeddings.

Public API (see :mod:`cselab.api`): :func:`load_model` -> :class:`SentenceEncoder` (``.encode`` returns numpy),
:func:`train`, :func:`evaluate`, :func:`evaluate_domain` (your own labelled files, or a suite domain).
"""

__version__ = "0.1.0"

from .api import SentenceEncoder, evaluate, load_model, train  # noqa: E402
from .evaluation.domain import evaluate_domain  # noqa: E402

__all__ = ["SentenceEncoder", "evaluate", "evaluate_domain", "load_model", "train", "__version__"]
