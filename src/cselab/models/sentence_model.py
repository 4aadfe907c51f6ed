"""What gets saved, loaded, evaluated and exported: a model that turns sentences into vectors.

Kinds (``cselab.json`` ``kind``, registry in :mod:`cselab.models.kinds`): ``encoder`` (one encoder, possibly
prompted; :class:`cselab.models.encoder.Encoder`), ``twin`` (sum of two encoders, TNCSE/JTCSE) and
``ensemble`` (members combined with weights, +UC: a weighted sum, or for members of different sizes a
concatenation of weighted unit vectors). Each kind writes and reads its own files; weights are
safetensors, the description is JSON and the tokenizer is ``tokenizer.json``: loading never unpickles anything.

Every saved directory is also a sentence-transformers model (``modules.json``): with standard modules where
they compute the model exactly, else with a module of :mod:`cselab.st_modules`, which sentence-transformers
loads only with ``trust_remote_code=True`` and otherwise refuses (never a silent fallback to mean pooling).
A model card (``README.md``) says what the model is and how it was made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from cselab.errors import CselabError, UsageError
from cselab.fileio import check_writable_dir, fresh_sibling, replace_directory
from cselab.models import st_layout
from cselab.models.encoder import Encoder
from cselab.models.exported import refuse_torch_load  # an export directory holds no torch weights
from cselab.models.kinds import kind_class, register_kind
from cselab.models.model_card import model_card
from cselab.models.poolers import check_pooler
from cselab.paths import resolve_model_path
from cselab.vocabulary import COMBINE_MODES

DESCRIPTION_FILE = "cselab.json"
MEMBER_SEPARATOR = "."  # feature keys of a composite model: "<member>.<key>"


class WeightedSum(nn.Module):
    """Members whose embeddings are summed with weights; the shared part of :class:`TwinModel` and
    :class:`EnsembleModel`. Members are saved as complete model directories of their own kind."""

    kind = ""
    member_overrides: tuple[str, ...] = ()  # load_model overrides passed on to the members
    st_module = ""  # the cselab.st_modules class sentence-transformers loads it with
    size_hint = ""  # appended to the error for members of different sizes

    @staticmethod
    def needs_cselab_module(description: dict[str, Any]) -> bool:
        return True  # sentence-transformers has no module that combines several encoders

    def __init__(self, members: Sequence[nn.Module], weights: Sequence[float]) -> None:
        super().__init__()
        if len(members) != len(weights) or not members:
            raise CselabError(f"a {self.kind} model needs one weight per member and at least one member")
        self.weights = [float(w) for w in weights]

    def member_modules(self) -> list[nn.Module]:
        raise NotImplementedError

    def named_members(self) -> list[tuple[str, nn.Module]]:
        raise NotImplementedError

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False) -> Tensor:
        embeddings = [m.encode(texts, batch_size=batch_size, progress=progress) for m in self.member_modules()]
        return self.combine_embeddings(embeddings)

    def combine_embeddings(self, embeddings: Sequence[Tensor]) -> Tensor:
        """The members' embeddings (in member order) made into one: here their weighted sum, one size for all.

        Both paths (:meth:`encode`, :meth:`forward`) go through this, so they cannot disagree."""
        dims = sorted({e.shape[-1] for e in embeddings})
        if len(dims) != 1:
            raise CselabError(self.size_mismatch(dims))
        return sum(w * e for w, e in zip(self.weights, embeddings, strict=True))

    def size_mismatch(self, dims: Sequence[int]) -> str:
        return f"{self.kind} members have different embedding sizes: {list(dims)}{self.size_hint}"

    # -- the token-level path (what sentence-transformers runs batch by batch) ----------------------
    def tokenize(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """Each member's features under ``"<member>.<key>"`` (members may use different tokenizers)."""
        return {f"{name}{MEMBER_SEPARATOR}{key}": value for name, member in self.named_members()
                for key, value in member.tokenize(texts).items()}

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        """The members' inference embeddings of :meth:`tokenize`'s features, combined as :meth:`encode` does."""
        embeddings = []
        for name, member in self.named_members():
            prefix = name + MEMBER_SEPARATOR
            embeddings.append(member({k[len(prefix):]: v for k, v in features.items() if k.startswith(prefix)}))
        return self.combine_embeddings(embeddings)

    @property
    def hidden_size(self) -> int:
        return int(self.member_modules()[0].hidden_size)

    @property
    def tokenizer(self) -> Any:
        return self.member_modules()[0].tokenizer

    # -- persistence --------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "members": [name for name, _ in self.named_members()], "weights": self.weights}

    def save_files(self, path: Path) -> None:
        for name, member in self.named_members():
            _write(member, path / name, {})
        st_layout.write_modules(path, [st_layout.StModule(self.st_module)])

    @classmethod
    def load_saved(cls, source: Path, description: dict[str, Any], *, pooler: str | None = None,
                   max_length: int | None = None) -> WeightedSum:
        given = {"pooler": pooler, "max_length": max_length}
        overrides = {key: given[key] for key in cls.member_overrides}
        names = description.get("members")
        if not isinstance(names, list) or not names or not all(isinstance(m, str) for m in names):
            raise CselabError(f"{source / DESCRIPTION_FILE}: 'members' must list the member directories")
        cls.check_description(source, description)
        members = [load_sentence_model(source / name, **overrides) for name in names]
        return cls.from_members(members, description)

    @classmethod
    def check_description(cls, source: Path, description: dict[str, Any]) -> None:
        """Refuse a damaged description of this kind in one line (members are checked by :meth:`load_saved`)."""

    @classmethod
    def from_members(cls, members: Sequence[nn.Module], description: dict[str, Any]) -> WeightedSum:
        raise NotImplementedError


@register_kind
class TwinModel(WeightedSum):
    """Two encoders whose inference output is the sum ``h_I + h_II`` (TNCSE/JTCSE)."""

    kind = "twin"
    member_overrides = ("pooler", "max_length")
    st_module = "cselab.st_modules.Twin"

    def __init__(self, first: Encoder, second: Encoder) -> None:
        super().__init__([first, second], [1.0, 1.0])
        self.encoders = nn.ModuleList([first, second])

    @classmethod
    def from_members(cls, members: Sequence[nn.Module], description: dict[str, Any]) -> TwinModel:
        return cls(*members)

    def member_modules(self) -> list[nn.Module]:
        return list(self.encoders)

    def named_members(self) -> list[tuple[str, nn.Module]]:
        return [(f"encoder_{i + 1}", e) for i, e in enumerate(self.encoders)]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "members": [name for name, _ in self.named_members()]}

    @staticmethod
    def card_summary(description: dict[str, Any]) -> str:
        return "the sum of two encoders' embeddings (TNCSE/JTCSE twin)."


@register_kind
class EnsembleModel(WeightedSum):
    """Member models' embeddings combined with weights ``w_i`` (the papers' +UC ensemble).

    ``combine`` says how. ``"sum"`` (the papers'): ``sum_i w_i e_i``, which needs members of one size.
    ``"concat"``: the concatenation of ``sqrt(w_i) e_i / ||e_i||``, whose cosine similarity is
    ``sum_i w_i cos_i / sum_i w_i``, the weighted mean of the members' cosines, so members may be of any size
    (e.g. a 384-d MiniLM with a 768-d MPNet); its size is the sum of theirs.
    """

    kind = "ensemble"
    member_overrides = ("max_length",)  # members may be of different kinds: their poolers stay as saved
    st_module = "cselab.st_modules.Ensemble"
    size_hint = '; a weighted sum needs one size: use combine "concat" (CLI: --combine concat)'

    def __init__(self, members: Sequence[nn.Module], weights: Sequence[float], *, combine: str = "sum") -> None:
        super().__init__(members, weights)
        problem = _combine_problem(combine, self.weights)
        if problem:
            raise CselabError(problem)
        self.combine = combine
        self.members = nn.ModuleList(members)
        sizes = [getattr(m, "hidden_size", None) for m in members]  # a member without one is checked at encode
        if combine == "sum" and None not in sizes and len(set(sizes)) > 1:
            raise CselabError(self.size_mismatch(sorted(set(sizes))))  # refused before a save, not at encode

    def combine_embeddings(self, embeddings: Sequence[Tensor]) -> Tensor:
        if self.combine == "sum":
            return super().combine_embeddings(embeddings)
        return torch.cat([math.sqrt(w) * F.normalize(e, dim=-1) for w, e in zip(self.weights, embeddings, strict=True)],
                         dim=-1)

    @property
    def hidden_size(self) -> int:
        if self.combine == "concat":
            return sum(int(m.hidden_size) for m in self.members)
        return super().hidden_size

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "combine": self.combine}

    @staticmethod
    def card_summary(description: dict[str, Any]) -> str:
        if description.get("combine") == "concat":
            return ("the concatenation of member models' unit-length embeddings, each scaled by sqrt(weight), "
                    f"weights {description.get('weights')} (its cosine is the weighted mean of the members' cosines).")
        return f"a weighted sum of member models' embeddings, weights {description.get('weights')}."

    @classmethod
    def check_description(cls, source: Path, description: dict[str, Any]) -> None:
        weights = description.get("weights")
        if not (isinstance(weights, list) and all(isinstance(w, (int, float)) for w in weights)):
            raise CselabError(f"{source / DESCRIPTION_FILE}: an ensemble needs a list of numeric 'weights'")
        problem = _combine_problem(description.get("combine", "sum"), weights)  # saved before combine: a sum
        if problem:
            raise CselabError(f"{source / DESCRIPTION_FILE}: {problem}")

    @classmethod
    def from_members(cls, members: Sequence[nn.Module], description: dict[str, Any]) -> EnsembleModel:
        return cls(members, description["weights"], combine=description.get("combine", "sum"))

    def member_modules(self) -> list[nn.Module]:
        return list(self.members)

    def named_members(self) -> list[tuple[str, nn.Module]]:
        return [(f"member_{i + 1}", m) for i, m in enumerate(self.members)]


def _combine_problem(combine: object, weights: Sequence[float]) -> str | None:
    """What is wrong with an ensemble's ``combine`` and its weights, or None."""
    if not isinstance(combine, str) or combine not in COMBINE_MODES:
        return f"unknown ensemble combine {combine!r}; known: {', '.join(COMBINE_MODES)}"
    if combine == "concat" and (any(w < 0 for w in weights) or not sum(weights) > 0):
        return ("a concat ensemble needs weights >= 0 with a positive sum (they scale unit vectors), "
                f"got {list(weights)}")
    return None


# -- saving -------------------------------------------------------------------------------------------
SAVING_MARK = ".cselab-saving"  # in a model being written, until its cselab.json is: the directory is cselab's
SAVED_FILES = ".cselab-files.json"  # the files a save wrote (relative paths): anything else there is not cselab's


def is_saved_model(path: Path) -> bool:
    """Whether ``path`` is a directory holding a model cselab saved (a readable ``cselab.json`` naming its kind)."""
    try:
        description = read_description(path) if path.is_dir() and not path.is_symlink() else None
    except CselabError:
        return False
    return description is not None and isinstance(description.get("kind"), str)


def check_model_output(path: str | Path) -> Path:
    """Refuse, in one line, a place a model may not be saved to (checked before anything is written): a model goes
    to a new path, an empty directory or a model cselab saved (which it replaces), never over a file, a link or a
    directory of the user's. The siblings a save writes and sets aside (``PATH.tmp``, ``PATH.old``) must be absent or
    cselab's too."""
    path = Path(path)
    hint = "choose another path or move it away"
    if "\0" in str(path):
        raise UsageError(f"path: {str(path)!r} holds a NUL byte, which no path can")
    if path.is_symlink():
        raise CselabError(f"{path} is a link; a model is saved to a new directory or over a model cselab saved: {hint}")
    if path.exists() and not path.is_dir():
        raise CselabError(f"{path} is a file, not a model directory; a model is saved to a new directory or over a "
                          f"model cselab saved: {hint}")
    if path.is_dir() and not is_saved_model(path):
        names = sorted(p.name for p in path.iterdir())
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise CselabError(f"{path} holds files that are not a model cselab saved ({shown}); a model is saved to "
                              f"a new or empty directory or over a model cselab saved: {hint}")
    if path.is_dir() and is_saved_model(path):
        foreign = _not_saved_there(path)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise CselabError(f"{path} is a model cselab saved, but it also holds files cselab did not write there "
                              f"({shown}), which a save would delete: move them out of it, or {hint}")
    if not path.exists():
        check_writable_dir(path, "path")
    for sibling in (path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")):
        if sibling.is_symlink() or (sibling.exists() and not _is_cselabs_sibling(sibling)):
            raise CselabError(f"{sibling} is in the way of saving {path} (a save writes and sets aside a model "
                              f"there) and is not cselab's: {hint}")
    return path


def _not_saved_there(path: Path) -> list[str]:
    """What is in a saved model's directory that its save did not write (:data:`SAVED_FILES`), shallowest first; a
    model saved before cselab listed its files lists nothing, and is taken as a whole."""
    try:
        listed = json.loads((path / SAVED_FILES).read_text(encoding="utf-8")).get("files")
    except FileNotFoundError:
        return []  # saved before the list was written
    except (OSError, ValueError, AttributeError):
        return [SAVED_FILES]  # damaged: it proves nothing
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        return [SAVED_FILES]
    owned = {*listed, SAVED_FILES}
    owned |= {parent.as_posix() for name in list(owned) for parent in Path(name).parents if parent != Path(".")}
    present = sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))
    foreign = [name for name in present if name not in owned or (path / name).is_symlink()]
    return [name for name in foreign if not any(parent.as_posix() in foreign for parent in Path(name).parents)]


def _is_cselabs_sibling(path: Path) -> bool:
    """A sibling a killed save left: empty, still being written (:data:`SAVING_MARK`) or a whole saved model."""
    return path.is_dir() and (not any(path.iterdir()) or (path / SAVING_MARK).is_file() or is_saved_model(path))


def save_model(model: nn.Module, path: str | Path, *, extra: dict[str, Any] | None = None) -> Path:
    """Save any sentence model kind to ``path`` atomically (written beside it, then renamed into place). Only to
    a new path, an empty directory or over a model cselab saved (:func:`check_model_output`, checked before and
    again just before the swap): a user's file or directory is refused in one line, never renamed or replaced."""
    path = check_model_output(path)
    if not callable(getattr(model, "save_files", None)):
        raise TypeError(f"cannot save {type(model).__name__}: not a registered model kind")
    try:
        tmp = fresh_sibling(path)
        _write(model, tmp, extra or {})
        check_model_output(path)
        return replace_directory(tmp, path)
    except OSError as exc:  # a place the checks could not foresee (a read-only or virtual file system)
        raise CselabError(f"cannot save a model to {path}: {exc.strerror or exc}") from None


def _write(model: nn.Module, path: Path, extra: dict[str, Any]) -> None:
    """The kind's own files, then ``cselab.json`` and the model card (marked as being written until then)."""
    save_files = getattr(model, "save_files", None)
    if not callable(save_files):
        raise TypeError(f"cannot save {type(model).__name__}: not a registered model kind")
    path.mkdir(parents=True)
    (path / SAVING_MARK).touch()
    save_files(path)
    description = dict(model.describe(), **extra)
    (path / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n")
    (path / "README.md").write_text(model_card(description, model_type=type(model).__name__))
    (path / SAVING_MARK).unlink()
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    (path / SAVED_FILES).write_text(json.dumps({"files": files}, indent=1) + "\n")


# -- loading ------------------------------------------------------------------------------------------
def load_model(
    name_or_path: str | Path, *, pooler: str | None = None, max_length: int | None = None,
    device: str | torch.device | None = None,
) -> nn.Module:
    """Like :func:`load_sentence_model`, on ``device`` (default: :func:`cselab.runtime.devices.inference_device`)."""
    from cselab.runtime.devices import inference_device, pick_device

    model = load_sentence_model(name_or_path, pooler=pooler, max_length=max_length)
    return model.to(pick_device(device) if device is not None else inference_device())


def load_sentence_model(
    name_or_path: str | Path, *, pooler: str | None = None, max_length: int | None = None
) -> nn.Module:
    """Load a cselab model directory, a sentence-transformers directory, a plain HF directory or hub name.

    ``pooler``/``max_length`` override what the directory says (for single encoders); an empty or unknown pooler
    is refused, never read as "no override".
    """
    if pooler is not None:
        check_pooler(pooler)
    source = Path(resolve_model_path(name_or_path))
    if source.exists() and not source.is_dir():
        raise CselabError(f"{source} is a file, not a model directory")
    description = read_description(source)
    if description is None:
        refuse_torch_load(source)
        return _load_foreign(source if source.exists() else str(name_or_path), pooler, max_length)
    cls = kind_class(description.get("kind"), str(source / DESCRIPTION_FILE))
    return cls.load_saved(source, description, pooler=pooler, max_length=max_length)


def read_description(path: str | Path) -> dict[str, Any] | None:
    """The ``cselab.json`` of a saved model, or None for foreign model directories."""
    file = Path(path) / DESCRIPTION_FILE
    if not file.is_file():
        return None
    description = _read_json(file)
    if not isinstance(description, dict):
        raise CselabError(f"{file} is damaged: a model description is a JSON object, "
                          f"found {type(description).__name__}")
    return description


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CselabError(f"cannot read {file}: {exc}") from exc


def _load_foreign(source: Path | str, pooler: str | None, max_length: int | None) -> Encoder:
    """A sentence-transformers directory (pooling read from its config) or a plain HF model."""
    st_pooler, st_max_length = None, None
    if isinstance(source, Path) and (source / "modules.json").is_file():
        st_pooler, st_max_length, source = _read_sentence_transformers_dir(source)
    return Encoder.from_pretrained(
        source,
        pooler=pooler or st_pooler or "cls",
        max_length=max_length or st_max_length or 256,
    )


def _read_sentence_transformers_dir(source: Path) -> tuple[str | None, int | None, Path]:
    modules = _read_json(source / "modules.json")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise CselabError(f"{source / 'modules.json'} is damaged: expected a list of module objects")
    pooler, max_length, backbone_dir = None, None, source
    for module in modules:
        module_dir = source / module.get("path", "")
        if module.get("type", "").endswith("Transformer"):
            backbone_dir = module_dir
            config_file = module_dir / "sentence_bert_config.json"
            if config_file.is_file():
                max_length = _read_json(config_file).get("max_seq_length")
        elif module.get("type", "").endswith("Pooling"):
            config = _read_json(module_dir / "config.json")
            # sentence-transformers 6 writes "pooling_mode", earlier versions one boolean per mode
            if config.get("pooling_mode_mean_tokens") or config.get("pooling_mode") == "mean":
                pooler = "mean"
            elif config.get("pooling_mode_cls_token") or config.get("pooling_mode") == "cls":
                pooler = "cls"
    return pooler, max_length, backbone_dir

