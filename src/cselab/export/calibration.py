"""The sentences OpenVINO int8 is calibrated on: a seeded sample of the user's file (``calibration=FILE``, one
sentence a line) or of the fetched training corpus, never a download; and the manifest's record of which.
Only ``--format openvino --quantize int8`` is calibrated (ONNX int8 is dynamic), so asking for a calibration
file anywhere else is an error."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from cselab.errors import CselabError

CALIBRATION_SAMPLES = 300  # sentences nncf calibrates on (sentence-transformers' default calibration set size)
CALIBRATION_READ = 20_000  # lines read from the top of a calibration file to draw them from


def calibration_sentences(fmt: str, quantize: str | None, calibration: str | Path | None) -> list[str] | None:
    """OpenVINO int8's calibration sentences (a sample of the file, or of the fetched corpus); None otherwise."""
    if not (fmt == "openvino" and quantize):
        if calibration is not None:
            which = "ONNX int8 is dynamic (it needs no calibration)" if quantize else "an fp32 export is not calibrated"
            raise CselabError(f"--calibration is used only by --format openvino --quantize int8; {which}")
        return None
    if calibration is not None:
        path = Path(calibration).expanduser()
        if not path.is_file():
            raise CselabError(f"calibration file not found: {calibration} (one sentence a line)")
    else:
        from cselab.data.registry.sources import corpus_path

        path = corpus_path()
        if not path.is_file():
            raise CselabError("OpenVINO int8 needs calibration sentences: give --calibration FILE (one sentence a "
                              "line, e.g. your own texts) or run `cselab data fetch corpus` first")
    lines = _read_head(path, CALIBRATION_READ)
    if not lines:
        raise CselabError(f"calibration file {path} holds no sentences (one sentence a line)")
    rng = random.Random(0)
    return rng.sample(lines, CALIBRATION_SAMPLES) if len(lines) > CALIBRATION_SAMPLES else lines


def _read_head(path: Path, limit: int) -> list[str]:
    lines: list[str] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    lines.append(line.strip())
                if len(lines) >= limit:
                    break
    except UnicodeDecodeError as exc:
        raise CselabError(f"calibration file {path} is not UTF-8 text (byte {exc.start})") from None
    return lines


def calibration_record(calibration: str | Path | None, sentences: list[str] | None) -> dict[str, Any] | None:
    if sentences is None:
        return None
    from cselab.data.registry.sources import corpus_path

    return {"file": str(calibration if calibration is not None else corpus_path()), "sentences": len(sentences),
            "drawn_from_first_lines": CALIBRATION_READ, "seed": 0}
