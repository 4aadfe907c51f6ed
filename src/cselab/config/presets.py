"""The YAML presets that ship inside the package, named on the command line as ``METHOD_DIR/NAME``
(``cselab train --preset simcse/cpu-minilm``; ``cselab presets`` lists them).

The repository's ``configs/`` directory is the one source of the presets: ``src/cselab/presets`` is a link to
it, which setuptools follows, so wheels and sdists carry the files themselves and an installed cselab finds its
presets from any directory, without the repository.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cselab.errors import CselabError

SUFFIX = ".yaml"


@dataclass(frozen=True)
class Preset:
    """A shipped preset: its command-line name and its file."""

    name: str
    path: Path


def presets_dir() -> Path:
    """The directory the presets are installed in (``cselab/presets``)."""
    return Path(str(resources.files("cselab") / "presets"))


def list_presets() -> list[Preset]:
    """Every shipped preset, sorted by name."""
    root = presets_dir()
    if not root.is_dir():
        raise CselabError(f"this cselab installation has no presets directory ({root}); reinstall the package")
    presets = [Preset(p.relative_to(root).with_suffix("").as_posix(), p) for p in root.rglob(f"*{SUFFIX}")]
    return sorted(presets, key=lambda p: p.name)


def preset_path(name: str) -> Path:
    """The file of preset ``name`` (``simcse/cpu-minilm``; a trailing ``.yaml`` is accepted)."""
    wanted = name.strip().strip("/").removesuffix(SUFFIX)
    names = {p.name: p.path for p in list_presets()}
    if wanted in names:
        return names[wanted]
    close = difflib.get_close_matches(wanted, list(names), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise CselabError(f"unknown preset {name!r}; {hint}`cselab presets` lists them")
