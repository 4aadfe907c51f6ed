"""How a directory that ``cselab export`` wrote is recognised (its manifest), so that loading one as a torch
model is refused in one line. The export itself is :mod:`cselab.export`."""

from __future__ import annotations

import json
from pathlib import Path

from cselab.errors import CselabError

MANIFEST = "cselab_export.json"


def is_export_dir(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def refuse_torch_load(path: Path) -> None:
    """Called before a directory is loaded as a torch model: an export holds no torch weights."""
    if is_export_dir(path):
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
        fmt = manifest.get("format", "onnx") if isinstance(manifest, dict) else None
        if fmt not in ("onnx", "openvino"):
            raise CselabError(f"{path} holds a damaged {MANIFEST} (an export's manifest; an export has no torch "
                              "weights): export the model again, or give the model directory it was exported from")
        raise CselabError(f"{path} is an {fmt} export (no torch weights): load it with backend {fmt!r} "
                          f"(CLI: --backend {fmt}), or give the model directory it was exported from")
