"""Results tables are rendered from records (what ``cselab report`` prints)."""

import json

import pytest

from cselab.errors import CselabError
from cselab.research.reporting.tables import protocol_table
from cselab.training.results import read_records


def test_protocol_table_rows(tmp_path):
    record = {"method": "simcse", "variant": "", "seed": 1, "steps": 300, "precision": "bf16",
              "scores": {"stsb": 81.234, "sts12-part": 70.0, "stsb_dev_best": 85.9, "stsb_dev_start": 79.73},
              "wall_s": 301.4, "train_sentences_per_s": 70.2, "peak_mem_mb": 1234.5, "git": "abcdef1234567"}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record) + "\n\n")
    table = protocol_table(read_records(path))
    lines = table.splitlines()
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(header, cells, strict=True))
    assert row["STS-B"] == "81.23" and row["STS12-part"] == "70.00" and row["STS13-part"] == "-"
    assert row["dev start"] == "79.73" and row["dev best"] == "85.90" and row["commit"] == "abcdef123"


def test_a_damaged_record_is_refused_naming_its_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(CselabError, match="bad.jsonl:1"):
        read_records(bad)


def _record(method, variant, seed, stsb):
    return {"method": method, "variant": variant, "seed": seed, "steps": 10, "precision": "bf16",
            "scores": {"stsb": stsb, "avg-available": stsb}, "git": "abc"}


def test_report_prints_every_table(tmp_path, capsys):
    from cselab.cli import main

    def write(name, records):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path

    protocol = write("protocol.jsonl", [_record("simcse", "", 1, 80.0)])
    seeds = write("seeds.jsonl", [_record("simcse", "", s, v) for s, v in ((1, 80.0), (2, 81.0), (3, 82.0))]
                  + [_record("simcse++", "", s, v) for s, v in ((1, 81.0), (2, 81.5), (3, 83.5))])
    ablation = write("ablation.jsonl", [_record("tncse", "nce+icnce+ictn", 1, 81.0), _record("tncse", "nce", 1, 80.0)])
    with pytest.raises(SystemExit) as exc:
        main(["report", "--results", str(protocol), "--seeds", str(seeds), "--ablation", str(ablation),
              "--compare", "simcse", "simcse++"])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    # seeds: mean and sample std by hand (80, 81, 82 -> 81.00 ± 1.00); the paired differences -1, -0.5, -1.5
    assert "| simcse | 1, 2, 3 | 3 | " in out and "81.00 ± 1.00" in out
    assert "| simcse | simcse++ | 1, 2, 3 | 81.00 | 82.00 | -1.00 | 0.50 |" in out
    assert "**tncse**" in out and "| nce+icnce+ictn |" in out and "| nce |" in out
    assert not list(tmp_path.glob("*.md")), "report prints; it writes no document"
