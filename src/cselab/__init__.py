"""cselab: unsupervised contrastive learning of sentence embeddings.

Public API (see :mod:`cselab.api`): :func:`load_model` -> :class:`SentenceEncoder` (``.encode`` returns numpy),
:func:`train`, :func:`evaluate`.
"""

from cselab.api import SentenceEncoder, evaluate, load_model, train  # noqa: E402
from cselab.version import __version__

__all__ = ["SentenceEncoder", "evaluate", "load_model", "train", "__version__"]
