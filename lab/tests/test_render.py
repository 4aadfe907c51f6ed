"""``python -m lab.render``: every table of the docs and lab books from its records, and bad inputs in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab import render as render_module
from lab.render import RenderError, render, replace_block
from tests.cli.test_robustness import BAD_FIELDS, GOOD

ROOT = Path(__file__).resolve().parents[2]


def test_every_rendered_table_matches_its_records():
    """What `make report` promises: the tables in the repository's documents are those its records give."""
    assert render() == {}, "run `python -m lab.render` and commit the documents it updates"


def test_replace_block_and_errors():
    text = "a\n<!-- cselab:protocol -->\nold\n<!-- /cselab:protocol -->\nb\n"
    assert replace_block(text, "protocol", "NEW") == "a\n<!-- cselab:protocol -->\nNEW\n<!-- /cselab:protocol -->\nb\n"
    # a freshly added, empty block (markers on adjacent lines or on one line) is filled the same way
    for empty in ("<!-- cselab:seeds -->\n<!-- /cselab:seeds -->", "<!-- cselab:seeds --><!-- /cselab:seeds -->"):
        assert replace_block(f"a\n{empty}\n", "seeds", "T") == "a\n<!-- cselab:seeds -->\nT\n<!-- /cselab:seeds -->\n"
    with pytest.raises(RenderError, match="no block"):
        replace_block("nothing", "protocol", "x")


@pytest.fixture
def lab_copy(tmp_path):
    """The records and the documents, copied (``lab.render.main(root=COPY)`` renders the copy)."""
    results = tmp_path / "lab" / "results"
    shutil.copytree(ROOT / "lab" / "results", results)
    for document in render_module.documents():
        target = tmp_path / document.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(document, target)
    return tmp_path, results


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


CASES = {
    "adapt-records-missing": (lambda r: (r / "adapt.jsonl").unlink(), "adapt.jsonl"),
    "adapt-records-empty": (lambda r: (r / "adapt.jsonl").write_text(""), "adapt.jsonl holds no records"),
    "adapt-records-blank": (lambda r: (r / "adapt.jsonl").write_text("\n \n"), "adapt.jsonl holds no records"),
    "adapt-records-damaged": (lambda r: (r / "adapt.jsonl").write_text("{}\n"),
                              "adapt.jsonl:1: field 'method' is missing"),
    "seeds-not-json": (lambda r: (r / "seeds.jsonl").write_text("{nope\n"), "seeds.jsonl:1: not a JSON record"),
    "protocol-invalid-utf8": (lambda r: (r / "protocol.jsonl").write_bytes(b'{"method": "x\xff", "scores": {}}\n'),
                              "not UTF-8"),
    "baseline-missing": (lambda r: (r / "adapt.jsonl").write_text(json.dumps(
        {"protocol": "adapt", "method": "checkpoint", "scores": {"stsb": 80.0}}) + "\n"),
                         "no records for configuration"),
    "doc-invalid-utf8": (lambda r: (r.parents[1] / "docs" / "results.md").write_bytes(b"<!-- cselab:protocol -->\xff"),
                         "results.md is not UTF-8 text"),
    "doc-block-gone": (lambda r: (r.parents[1] / "docs" / "results.md").write_text("# nothing here\n"),
                       "no document has the block <!-- cselab:protocol -->"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inputs_end_in_one_line_and_change_nothing(case, lab_copy, capsys):
    root, results = lab_copy
    damage, message = CASES[case]
    damage(results)
    before = _snapshot(root)
    assert render_module.main(["--results", str(results)], root) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("error: "), err
    assert _snapshot(root) == before, "a refused render writes nothing"


def test_check_reports_a_changed_table_and_writes_nothing(lab_copy, capsys):
    root, results = lab_copy
    seeds = results / "seeds.jsonl"
    first = json.loads(seeds.read_text().splitlines()[0])
    first["scores"] = {k: (v + 1 if isinstance(v, float) else v) for k, v in first["scores"].items()}
    seeds.write_text(json.dumps(first) + "\n" + "\n".join(seeds.read_text().splitlines()[1:]) + "\n")
    before = _snapshot(root)
    assert render_module.main(["--check", "--results", str(results)], root) == 1
    assert "differs: docs/results.md" in capsys.readouterr().out
    assert _snapshot(root) == before
    assert render_module.main(["--results", str(results)], root) == 0
    assert render_module.main(["--check", "--results", str(results)], root) == 0


# the protocol's records through the same damaged lines as the library's record kinds (tests/cli/test_robustness.py)
ADAPT_CASES = [(cid, json.dumps(GOOD) + "\n" + json.dumps({**GOOD, **fields}) + "\n",
                f"adapt.jsonl:2: {expect} (not a valid adapt record)")
               for cid, fields, expect in BAD_FIELDS]
ADAPT_CASES += [("not-json", json.dumps(GOOD) + "\n{x\n", "adapt.jsonl:2: not a JSON record"),
                ("string", '"simcse"\n', "adapt.jsonl:1: a JSON str, not an object (not a valid adapt record)"),
                ("no-scores", '{"method": "simcse"}\n',
                 "adapt.jsonl:1: field 'scores' is missing (not a valid adapt record)")]


@pytest.mark.parametrize(("lines", "message"), [c[1:] for c in ADAPT_CASES], ids=[c[0] for c in ADAPT_CASES])
def test_a_damaged_adapt_record_is_refused_naming_its_line(lines, message, tmp_path):
    from cselab.errors import CselabError
    from lab.adapt_protocol.tables import read_adapt_records

    (tmp_path / "adapt.jsonl").write_text(lines)
    with pytest.raises(CselabError) as exc:
        read_adapt_records(tmp_path / "adapt.jsonl")
    assert message in str(exc.value), str(exc.value)
