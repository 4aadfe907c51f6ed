"""lab/speed/teacher_export_time.py on a tiny teacher: each format exported once in a fresh home, then found kept."""

from __future__ import annotations

import json
import os

import pytest

from lab.speed import teacher_export_time


def test_it_exports_each_format_once_and_times_the_kept_one(tmp_path, monkeypatch, tiny_bert_dir):
    pytest.importorskip("openvino", reason="the export extra is not installed (pip install 'cselab[export]')")
    import cselab.export

    home = tmp_path / "home"
    monkeypatch.setenv("CSELAB_HOME", str(home))
    exports: list[str] = []
    export = cselab.export.export_model
    monkeypatch.setattr(cselab.export, "export_model", lambda *a, **k: exports.append(a[1]) or export(*a, **k))
    results = tmp_path / "teacher_pass.jsonl"
    teacher_export_time.main(["--teacher", str(tiny_bert_dir), "--threads", "1", "--results", str(results)])
    assert exports == ["onnx", "openvino"]  # the second call of each format found the export kept
    assert os.environ["CSELAB_HOME"] == str(home) and not home.exists()  # the user's home untouched, restored
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["benchmark"] == "teacher_export" and set(record["seconds"]) == {"onnx", "openvino"}
    assert all(set(s) == {"first", "kept"} for s in record["seconds"].values())
    assert record["command"].startswith("python -m lab.speed.teacher_export_time --teacher")
