"""cselab: unsupervised contrastive learning of sentence embeddings.

Public API (see :mod:`cselab.api`): :func:`load_model` -> :class:`SentenceEncoder` (``.encode`` returns numpy),
:func:`train`, :func:`evaluate`.
"""

__version__ = "0.1.0"

from cselab.api import SentenceEncoder, evaluate, load_model, train  # noqa: E402

__all__ = ["SentenceEncoder", "evaluate", "load_model", "train", "__version__"]
