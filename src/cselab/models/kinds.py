"""The registry of saved model kinds: ``cselab.json``'s ``kind`` -> the class that saves and loads it.

Each kind owns its format: a class registered here has

- ``kind``: the name written to ``cselab.json``;
- ``describe() -> dict``: what ``cselab.json`` holds (``kind`` included);
- ``save_files(path)``: writes its weights, tokenizer and sentence-transformers files into ``path``;
- ``load_saved(path, description, pooler=..., max_length=...)`` (classmethod): the inverse;
- ``card_summary(description) -> str`` (staticmethod): what the model card says the model is;
- ``needs_cselab_module(description) -> bool`` (staticmethod): whether sentence-transformers needs
  cselab's module (:mod:`cselab.st_modules`, same ``kind``) to load it, i.e. ``trust_remote_code=True``.

So a new kind is one decorated class: :func:`cselab.models.sentence_model.save_model` and ``load_model``
never list kinds.
"""

from __future__ import annotations

from typing import TypeVar

from cselab.errors import CselabError

MODEL_KINDS: dict[str, type] = {}

K = TypeVar("K", bound=type)


def register_kind(cls: K) -> K:
    """Class decorator: make ``cls`` the saver/loader of ``cls.kind``."""
    kind = cls.kind  # type: ignore[attr-defined]
    if kind in MODEL_KINDS and MODEL_KINDS[kind] is not cls:
        raise CselabError(f"model kind {kind!r} is registered twice ({MODEL_KINDS[kind].__name__}, {cls.__name__})")
    MODEL_KINDS[kind] = cls
    return cls


def kind_class(kind: object, where: str) -> type:
    """The registered class of ``kind``; a one-line error naming ``where`` it was read otherwise."""
    if not isinstance(kind, str) or kind not in MODEL_KINDS:
        raise CselabError(f"{where}: unknown model kind {kind!r}; known: {', '.join(sorted(MODEL_KINDS))}")
    return MODEL_KINDS[kind]
