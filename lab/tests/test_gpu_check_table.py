"""lab/gpu/gpu_check_table.py: the GPU check's records as docs/results.md's tables, checked cell by cell against
records written by hand (a preset checked twice shows its last run; a precision never run says so)."""

from __future__ import annotations

import json

import pytest

from lab.gpu import gpu_check_table


def _run(preset: str, precision: str, steps_per_s: float, mem: int, commit: str) -> dict:
    return {"benchmark": "gpu_check", "preset": preset, "precision": precision, "steps": 50, "batch_size": 64,
            "max_length": 32, "steps_per_s": steps_per_s, "peak_gpu_mem_mb": mem, "git": commit,
            "machine": {"gpu": "GPU-X"}, "date": "2026-01-02T03:04:05+00:00"}


RECORDS = [
    _run("simcse/paper-bert-base", "bf16", 1.5, 1000, "a" * 40),
    _run("simcse/paper-bert-base", "bf16", 2.25, 1200, "b" * 40 + "+dirty"),  # the check ran again
    _run("simcse/paper-bert-base", "fp16", 3.0, 1300, "b" * 40 + "+dirty"),
    _run("tncse/paper-bert-base", "bf16", 4.0, 5000, "b" * 40 + "+dirty"),
    {"benchmark": "gpu_export_check", "sentences": 8, "onnxruntime": "9.9", "ort_providers": ["CPUExecutionProvider"],
     "failed": ["int8"], "paths": {"onnx": {"min_cosine": 0.9999994, "mean_cosine": 1.0, "seconds": 7.123},
                                   "int8": {"min_cosine": 0.5, "mean_cosine": 0.75, "seconds": 1.0}},
     "git": "c" * 40, "machine": {"gpu": "GPU-X"}, "date": "2026-01-02T09:00:00+00:00"},
]


def test_the_tables_by_hand(tmp_path):
    script = gpu_check_table
    results = tmp_path / "gpu_check.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    lines = script.render_tables(script.read_records(results)).splitlines()
    assert lines[0] == ("| preset | batch | max len | steps | bf16 steps/s | bf16 peak MB | fp16 steps/s "
                        "| fp16 peak MB | GPU | commit | date |")
    assert lines[2] == ("| simcse/paper-bert-base | 64 | 32 | 50 | 2.25 | 1,200 | 3.00 | 1,300 | GPU-X | bbbbbbbbb* "
                        "| 2026-01-02 |")
    assert lines[3] == ("| tncse/paper-bert-base | 64 | 32 | 50 | 4.00 | 5,000 | not run | - | GPU-X | bbbbbbbbb* "
                        "| 2026-01-02 |")
    assert "providers CPUExecutionProvider; failed: int8" in lines[5]
    assert lines[-2:] == ["| onnx | 0.999999 | 1.000000 | 7.12 |", "| int8 | 0.500000 | 0.750000 | 1.00 |"]


def test_it_is_rendered_into_the_doc_block_and_a_doc_without_one_is_refused(tmp_path):
    from lab.render import RenderError, render, table_makers

    results = tmp_path / "gpu_check.jsonl"
    results.write_text(json.dumps(RECORDS[0]) + "\n")
    doc = tmp_path / "results.md"
    doc.write_text("before\n<!-- cselab:gpu-check -->\nold\n<!-- /cselab:gpu-check -->\nafter\n")
    makers = {"gpu-check": table_makers(tmp_path)["gpu-check"]}
    text = render(tmp_path, [doc], makers)[doc][1]
    assert "old" not in text and "| simcse/paper-bert-base | 64 | 32 | 50 | 1.50 | 1,000 | not run |" in text
    assert text.startswith("before\n") and text.endswith("after\n")
    doc.write_text("no block\n")
    with pytest.raises(RenderError, match="gpu-check"):
        render(tmp_path, [doc], makers)
