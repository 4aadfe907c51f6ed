"""The JSON file every analysis report writes: plain JSON values plus provenance (commit, machine, date)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cselab.fileio import write_atomic
from cselab.provenance import provenance


def _jsonable(obj: Any) -> Any:
    """Plain JSON values; nan/inf become null (strict JSON has no nan)."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_report_json(path: Path, payload: dict[str, Any]) -> Path:
    return write_atomic(path, json.dumps(_jsonable({**payload, **provenance()}), indent=2, allow_nan=False) + "\n")
