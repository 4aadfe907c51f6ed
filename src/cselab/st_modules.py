"""sentence-transformers modules for the cselab models that no standard module chain computes exactly.

A CoT-BERT encoder (prompt template, last-``[MASK]`` pooling), a twin (TNCSE/JTCSE: ``h_I + h_II``) and a
+UC ensemble name one of these classes in their ``modules.json``. Each is a whole model in one input module:
``load`` reads the directory with cselab's own loader (``cselab.json``), ``preprocess`` tokenises as cselab
does (the template, each member with its own tokenizer) and ``forward`` returns cselab's inference embedding,
so ``SentenceTransformer(dir, trust_remote_code=True).encode(texts)`` equals ``cselab.load_model(dir)``'s.

sentence-transformers (6.x) imports a module class outside its own package only with
``trust_remote_code=True``; without it, it refuses the directory with its own error. That is the intended
behaviour: the alternative, a standard chain that approximates the model, would load silently wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

try:  # sentence-transformers >= 6 (the old path still works there, with a deprecation warning)
    from sentence_transformers.sentence_transformer.modules import InputModule
except ImportError:  # pragma: no cover - sentence-transformers 5
    from sentence_transformers.models import InputModule

from cselab.models.sentence_model import load_model, save_model


class _CselabModule(InputModule):
    """One saved cselab model of kind :attr:`kind` as a sentence-transformers input module."""

    kind = ""
    save_in_root = True

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    @property
    def tokenizer(self) -> Any:  # sentence-transformers reads the first module's tokenizer
        return self.model.tokenizer

    @property
    def max_seq_length(self) -> int | None:
        return getattr(self.model, "max_length", None)

    def preprocess(self, inputs: Sequence[str], prompt: str | None = None, **kwargs: Any) -> dict[str, Tensor]:
        texts = [prompt + t for t in inputs] if prompt else list(inputs)
        return self.model.tokenize(texts)

    def tokenize(self, texts: Sequence[str], **kwargs: Any) -> dict[str, Tensor]:  # sentence-transformers 5
        return self.preprocess(texts)

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        tokens = {k: v for k, v in features.items() if isinstance(v, Tensor)}
        features["sentence_embedding"] = self.model(tokens)
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.model.hidden_size)

    get_embedding_dimension = get_sentence_embedding_dimension

    def save(self, output_path: str, *args: Any, **kwargs: Any) -> None:
        """Write the cselab directory (sentence-transformers then writes its own modules.json over ours)."""
        target = Path(output_path)
        save_model(self.model, target / ".cselab-save")
        for item in (target / ".cselab-save").iterdir():
            item.replace(target / item.name)
        (target / ".cselab-save").rmdir()

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> _CselabModule:
        directory = cls.load_dir_path(model_name_or_path, subfolder=subfolder, token=token,
                                      cache_folder=cache_folder, revision=revision, local_files_only=local_files_only)
        model = load_model(Path(directory))
        if getattr(model, "kind", None) != cls.kind:
            raise ValueError(f"{directory} holds a cselab {getattr(model, 'kind', '?')!r} model, not {cls.kind!r}")
        return cls(model)


class Encoder(_CselabModule):
    """A single cselab encoder that needs cselab's tokenisation or pooling (prompt template, mask pooling)."""

    kind = "encoder"


class Twin(_CselabModule):
    """A TNCSE/JTCSE twin: the sum of its two encoders' embeddings."""

    kind = "twin"


class Ensemble(_CselabModule):
    """A +UC ensemble: its members' embeddings combined as saved (weighted sum, or concatenation)."""

    kind = "ensemble"
