"""lab/speed/teacher_pass_speed.py on a tiny teacher: one record with both precisions' rates, from the text asked."""

from __future__ import annotations

import json

from lab.speed import teacher_pass_speed
from tests.helpers import WORDS


def test_it_records_both_precisions_side_by_side(tmp_path, monkeypatch, tiny_bert_dir):
    home = tmp_path / "home"
    (home / "domains" / "bbc-news").mkdir(parents=True)
    (home / "domains" / "manifest.json").write_text("{}")
    lines = [" ".join(WORDS[i:i + 6]) for i in range(30)]
    (home / "domains" / "bbc-news" / "train.txt").write_text("\n".join(lines) + "\n\n")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    results = tmp_path / "teacher_pass.jsonl"
    script = teacher_pass_speed
    from cselab.runtime import precision as precisions

    entered, real = [], precisions.autocast_context  # timing cannot show which precision ran; record what was entered
    monkeypatch.setattr(precisions, "autocast_context", lambda p, device: entered.append(p) or real(p, device))
    script.main(["--teacher", str(tiny_bert_dir), "--sentences", "12", "--batch-size", "4", "--threads", "1",
                 "--results", str(results)])
    assert entered == ["fp32", "bf16", "fp32", "bf16"]  # alternating, each timed twice
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["sentences"] == 12 and set(record["sentences_per_s"]) == {"fp32", "bf16"}
    assert all(len(tries) == 2 for tries in record["tries"].values())
    rates = record["sentences_per_s"]
    assert rates == {p: max(t) for p, t in record["tries"].items()}
    assert record["bf16_speedup"] == round(rates["bf16"] / rates["fp32"], 2)
    assert record["command"].startswith("python -m lab.speed.teacher_pass_speed --teacher")
    assert record["provenance"]["machine"]["cpu"]
