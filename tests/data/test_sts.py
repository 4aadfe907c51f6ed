"""STS readers and task loading on hand-written fixtures (no network).

``fixtures/home`` mimics the fetched cache (``sts/stsb/sts-*.csv``); ``fixtures/senteval`` mimics
SentEval's data layout (``STS/STS1x-en-test``, ``STS/STSBenchmark``, ``SICK``).
The real-data counts are checked in test_data_fetch.py (network).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cselab.data.evalsets.sts import (
    SENTEVAL_STS_SUBSETS,
    TASK_NAMES,
    StsSubset,
    StsTask,
    available_tasks,
    load_task,
    read_senteval_sts_subset,
    read_sick_file,
    read_stsb_file,
    senteval_root,
)
from cselab.errors import CselabError
from tests.helpers import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"
HOME = FIXTURES / "home"
SENTEVAL = FIXTURES / "senteval"


def _write(tmp_path, text: str, name: str = "sts.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- read_stsb_file --------------------------------------------------------------------------------


def test_read_stsb_file_fields_credits_and_quotes():
    rows = read_stsb_file(HOME / "sts" / "stsb" / "sts-test.csv")
    assert len(rows) == 3
    quoted = rows[1]  # has two trailing credit fields and double quotes: split on tabs, never CSV-unquote
    assert (quoted.genre, quoted.dataset, quoted.year, quoted.sid, quoted.score) == (
        "main-forums",
        "answer-answer",
        "2016",
        "0002",
        4.0,
    )
    assert quoted.sentence1 == 'He said "no" to the offer.'
    assert quoted.sentence2 == 'He turned down the "generous" offer.'


def test_read_stsb_file_normalises_whitespace():
    rows = read_stsb_file(HOME / "sts" / "stsb" / "sts-dev.csv")
    assert rows[0].sentence1 == "A plane is taking off."


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "g\td\t2012\t0001\t3.0\tonly one sentence\n",
            r"sts\.csv:1: expected at least 7 tab-separated fields, found 6",
        ),
        ("g\td\t2012\t0001\tabc\tA.\tB.\n", r"sts\.csv:1: score 'abc' is not a number"),
        ("g\td\t2012\t0001\tnan\tA.\tB.\n", r"sts\.csv:1: score nan is outside \[0, 5\]"),
        ("g\td\t2012\t0001\tinf\tA.\tB.\n", r"score inf is outside"),
        ("g\td\t2012\t0001\t5.5\tA.\tB.\n", r"score 5.5 is outside \[0, 5\]"),
        ("g\td\t2012\t0001\t-1\tA.\tB.\n", r"score -1 is outside"),
        ("g\td\t2012\t0001\t2\t  \tB.\n", r"sts\.csv:1: empty sentence"),
    ],
)
def test_read_stsb_file_errors(tmp_path, line, message):
    path = _write(tmp_path, "g\td\t2012\t0000\t1.0\tFine.\tFine too.\n" + line)
    with pytest.raises(CselabError, match=message.replace(":1:", ":2:")):
        read_stsb_file(path)


def test_read_stsb_file_missing_and_empty(tmp_path):
    with pytest.raises(CselabError, match="STS file not found"):
        read_stsb_file(tmp_path / "missing.csv")
    with pytest.raises(CselabError, match="has no rows"):
        read_stsb_file(_write(tmp_path, "\n\n"))


def test_read_stsb_file_invalid_utf8(tmp_path):
    path = tmp_path / "sts.csv"
    path.write_bytes(b"g\td\t2012\t0001\t1.0\tA \xff.\tB.\n")
    with pytest.raises(CselabError, match="not valid UTF-8"):
        read_stsb_file(path)


# --- dataclasses -----------------------------------------------------------------------------------


def test_subset_and_task_validate():
    sub = StsSubset("x", ["a", "b"], ["c", "d"], np.array([1.0, 2.0]))
    task = StsTask("stsb", "test", (sub, sub))
    assert task.size == 4 and sub.size == 2 and task.display_name == "STS-B"
    with pytest.raises(CselabError, match="must be equal"):
        StsSubset("x", ["a"], ["c", "d"], np.array([1.0]))
    with pytest.raises(CselabError, match="is empty"):
        StsSubset("x", [], [], np.array([]))
    with pytest.raises(CselabError, match="has no subset"):
        StsTask("stsb", "test", ())


# --- tasks from the fetched layout -----------------------------------------------------------------


def test_load_stsb_splits_from_home():
    sizes = {split: load_task("stsb", split, home=HOME).size for split in ("train", "dev", "test")}
    assert sizes == {"train": 14, "dev": 4, "test": 3}
    task = load_task("stsb", "dev", home=HOME)
    assert task.name == "stsb" and task.split == "dev"
    assert task.subsets[0].scores.dtype == np.float64


def test_part_tasks_use_all_three_splits_sorted_by_sid():
    task = load_task("sts12-part", home=HOME)
    assert task.display_name == "STS12-part"
    assert [(s.name, s.size) for s in task.subsets] == [("MSRpar", 2), ("MSRvid", 3)]
    msrvid = task.subsets[1]
    # dev 0001, test 0002, train 0003; the 2012train row is not part of STS12
    assert msrvid.sentences1 == [
        "A plane is taking off.",
        "A woman is cutting an onion.",
        "A cat is sleeping on a sofa.",
    ]
    assert msrvid.scores.tolist() == [5.0, 3.6, 4.0]


@pytest.mark.parametrize(
    "name, subsets",
    [
        ("sts13-part", [("headlines", 2)]),
        ("sts14-part", [("deft-forum", 1), ("deft-news", 1), ("headlines", 1), ("images", 1)]),
        ("sts15-part", [("answers-forums", 1), ("headlines", 1), ("images", 1)]),
        ("sts16-part", [("answer-answer", 2), ("headlines", 2)]),
        ("sts17-en", [("track5.en-en", 2)]),
    ],
)
def test_part_task_subsets(name, subsets):
    task = load_task(name, "test", home=HOME)
    assert [(s.name, s.size) for s in task.subsets] == subsets


def test_unknown_task_and_split():
    with pytest.raises(CselabError, match="unknown STS task 'sts99'; valid tasks: stsb, sts12-part"):
        load_task("sts99", home=HOME)
    with pytest.raises(CselabError, match="task 'sts13-part' has no split 'dev'; valid splits: test"):
        load_task("sts13-part", "dev", home=HOME)
    with pytest.raises(CselabError, match="valid splits: train, dev, test"):
        load_task("stsb", "validation", home=HOME)


def test_missing_data_tells_how_to_fetch(tmp_path):
    with pytest.raises(CselabError, match=r"cselab data fetch sts"):
        load_task("stsb", "test", home=tmp_path)
    with pytest.raises(CselabError, match=r"cselab data fetch sts"):
        load_task("sts15-part", home=tmp_path)


def test_full_sets_need_senteval(tmp_path):
    with pytest.raises(CselabError, match=r"needs the SentEval data directory.*sts12-part instead"):
        load_task("sts12", home=tmp_path)
    with pytest.raises(CselabError, match=r"needs the SentEval data directory"):
        load_task("sickr", home=tmp_path)


def test_task_names_cover_both_sources():
    assert set(TASK_NAMES) == {
        "stsb",
        *(f"sts1{i}-part" for i in range(2, 7)),
        "sts17-en",
        *(f"sts1{i}" for i in range(2, 7)),
        "sickr",
    }


# --- SentEval layout -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SENTEVAL_STS_SUBSETS))
def test_senteval_sts_tasks(name, tmp_path):
    task = load_task(name, senteval_dir=SENTEVAL, home=tmp_path)
    assert [s.name for s in task.subsets] == list(SENTEVAL_STS_SUBSETS[name])
    assert all(s.size == 3 for s in task.subsets)  # the pair without a gold score is skipped
    assert task.display_name == name.upper()
    first = task.subsets[0]
    assert first.scores.tolist() == [4.8, 3.2, 1.0]
    assert first.sentences1[0].endswith(".") and "\t" not in first.sentences2[0]


def test_senteval_stsb_and_sick(tmp_path):
    assert load_task("stsb", "test", senteval_dir=SENTEVAL, home=tmp_path).size == 3
    assert load_task("stsb", "dev", senteval_dir=SENTEVAL, home=tmp_path).size == 2
    sick = {split: load_task("sickr", split, senteval_dir=SENTEVAL) for split in ("train", "dev", "test")}
    assert {split: t.size for split, t in sick.items()} == {"train": 2, "dev": 2, "test": 3}
    test = sick["test"].subsets[0]
    assert test.sentences1[0] == "Two kids are playing." and test.scores.tolist() == [4.9, 1.6, 4.4]
    assert sick["test"].display_name == "SICK-R"


def test_senteval_root_accepts_parent_directories(tmp_path):
    nested = tmp_path / "SentEval" / "data" / "downstream"
    shutil.copytree(SENTEVAL, nested)
    assert senteval_root(tmp_path / "SentEval") == nested
    assert senteval_root(tmp_path / "SentEval" / "data") == nested
    assert load_task("sts16", senteval_dir=tmp_path / "SentEval").size == 15
    with pytest.raises(CselabError, match="is not a SentEval data directory"):
        senteval_root(tmp_path)


def test_senteval_missing_year(tmp_path):
    (tmp_path / "STS").mkdir()
    with pytest.raises(CselabError, match="no STS14-en-test/"):
        load_task("sts14", senteval_dir=tmp_path)


def test_senteval_subset_errors(tmp_path):
    inp = _write(tmp_path, "A.\tB.\nC.\tD.\n", "STS.input.x.txt")
    with pytest.raises(CselabError, match=r"has 2 lines but .*STS\.gs\.x\.txt has 1"):
        read_senteval_sts_subset(inp, _write(tmp_path, "1.0\n", "STS.gs.x.txt"), "x")
    with pytest.raises(CselabError, match=r"STS\.gs\.x\.txt:2: score 'high' is not a number"):
        read_senteval_sts_subset(inp, _write(tmp_path, "1.0\nhigh\n", "STS.gs.x.txt"), "x")
    with pytest.raises(CselabError, match=r"has no gold score"):
        read_senteval_sts_subset(inp, _write(tmp_path, "\n\n", "STS.gs.x.txt"), "x")
    bad = _write(tmp_path, "no tab here\nC.\tD.\n", "STS.input.y.txt")
    with pytest.raises(CselabError, match=r"STS\.input\.y\.txt:1: expected 2 tab-separated sentences"):
        read_senteval_sts_subset(bad, _write(tmp_path, "1\n2\n", "STS.gs.y.txt"), "y")
    with pytest.raises(CselabError, match="STS file not found"):
        read_senteval_sts_subset(tmp_path / "nope.txt", tmp_path / "nope.gs", "z")


def test_sick_errors(tmp_path):
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    with pytest.raises(CselabError, match=r"SICK\.txt:2: score 0\.5 is outside \[1, 5\]"):
        read_sick_file(_write(tmp_path, header + "1\tA.\tB.\t0.5\tNEUTRAL\n", "SICK.txt"))
    with pytest.raises(CselabError, match=r"SICK\.txt:2: expected at least 4 tab-separated fields, found 3"):
        read_sick_file(_write(tmp_path, header + "1\tA.\tB.\n", "SICK.txt"))
    with pytest.raises(CselabError, match="has no rows"):
        read_sick_file(_write(tmp_path, header, "SICK.txt"))


def test_available_tasks(tmp_path):
    assert available_tasks(home=tmp_path) == ()
    assert available_tasks(home=HOME) == (
        "stsb",
        "sts12-part",
        "sts13-part",
        "sts14-part",
        "sts15-part",
        "sts16-part",
        "sts17-en",
    )
    both = available_tasks(home=tmp_path, senteval_dir=SENTEVAL)
    assert both[-6:] == ("sts12", "sts13", "sts14", "sts15", "sts16", "sickr")
    assert "sts12-part" in both  # rebuilt from SentEval's STS-B copy
