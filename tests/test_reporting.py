"""Results tables are rendered from records, and README blocks are replaced in place."""

import json

import pytest

from cselab.errors import CselabError
from cselab.experiments.results import read_records
from cselab.reporting.tables import protocol_table, replace_block


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
    # a freshly added, empty block (markers on adjacent lines or on one line) is filled the same way
    for empty in ("<!-- cselab:seeds -->\n<!-- /cselab:seeds -->", "<!-- cselab:seeds --><!-- /cselab:seeds -->"):
        assert replace_block(f"a\n{empty}\n", "seeds", "T") == "a\n<!-- cselab:seeds -->\nT\n<!-- /cselab:seeds -->\n"
    with pytest.raises(CselabError, match="no block"):
        replace_block("nothing", "protocol", "x")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(CselabError, match="bad.jsonl:1"):
        read_records(bad)


def _record(method, variant, seed, stsb):
    return {"method": method, "variant": variant, "seed": seed, "steps": 10, "precision": "bf16",
            "scores": {"stsb": stsb, "avg-available": stsb}, "git": "abc"}


def test_report_updates_every_readme_block(tmp_path, capsys):
    from cselab.cli import main

    def write(name, records):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path

    protocol = write("protocol.jsonl", [_record("simcse", "", 1, 80.0)])
    seeds = write("seeds.jsonl", [_record("simcse", "", s, v) for s, v in ((1, 80.0), (2, 81.0), (3, 82.0))]
                  + [_record("simcse++", "", s, v) for s, v in ((1, 81.0), (2, 81.5), (3, 83.5))])
    ablation = write("ablation.jsonl", [_record("tncse", "nce+icnce+ictn", 1, 81.0), _record("tncse", "nce", 1, 80.0)])
    readme = tmp_path / "README.md"
    blocks = "".join(f"<!-- cselab:{n} -->\nold\n<!-- /cselab:{n} -->\n" for n in ("protocol", "seeds", "ablation"))
    readme.write_text("intro\n" + blocks)
    with pytest.raises(SystemExit) as exc:
        main(["report", "--results", str(protocol), "--seeds", str(seeds), "--ablation", str(ablation),
              "--compare", "simcse", "simcse++", "--update-readme", str(readme)])
        raise SystemExit(0)
    assert exc.value.code == 0, capsys.readouterr().err
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro\n")
    # seeds: mean and sample std by hand (80, 81, 82 -> 81.00 ± 1.00); the paired differences -1, -0.5, -1.5
    assert "| simcse | 1, 2, 3 | 3 | " in text and "81.00 ± 1.00" in text
    assert "| simcse | simcse++ | 1, 2, 3 | 81.00 | 82.00 | -1.00 | 0.50 |" in text
    assert "**tncse**" in text and "| nce+icnce+ictn |" in text and "| nce |" in text
