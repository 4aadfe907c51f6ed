"""cselab: unsupervised contrastive learning of sentence embeddings.

Public API (see :mod:`cselab.api`): :func:`adapt` (``cselab adapt``), :func:`load_model` -> :class:`SentenceEncoder`
(``.encode`` returns numpy), :func:`train`, :func:`reproduce` (a paper's row, ``cselab reproduce``), :func:`evaluate`,
:func:`evaluate_domain` (your own labelled files, or a suite domain). A misuse of any of them raises
:class:`UsageError` (a :class:`CselabError` and a ``ValueError``) with the command line's one-line message; a problem
with the files named raises ``CselabError`` (see :mod:`cselab.errors`).
"""

from cselab.api import SentenceEncoder, adapt, evaluate, load_model, reproduce, train  # noqa: E402
from cselab.errors import CselabError, UsageError
from cselab.evaluation.domain import evaluate_domain  # noqa: E402
from cselab.version import __version__

__all__ = ["CselabError", "SentenceEncoder", "UsageError", "__version__", "adapt", "evaluate", "evaluate_domain",
           "load_model", "reproduce", "train"]
