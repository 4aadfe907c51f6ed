"""Results tables are rendered from records, and README blocks are replaced in place."""

import json

import pytest

from cselab.errors import CselabError
from cselab.reporting.tables import protocol_table, read_records, replace_block


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


def test_replace_block_and_errors(tmp_path):
    text = "a\n<!-- cselab:protocol -->\nold\n<!-- /cselab:protocol -->\nb\n"
    assert replace_block(text, "protocol", "NEW") == "a\n<!-- cselab:protocol -->\nNEW\n<!-- /cselab:protocol -->\nb\n"
    with pytest.raises(CselabError, match="no block"):
        replace_block("nothing", "protocol", "x")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(CselabError, match="bad.jsonl:1"):
        read_records(bad)
