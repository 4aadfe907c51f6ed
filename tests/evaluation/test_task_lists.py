"""``cselab mteb MODEL --tasks jtcse-zero-shot``: the tasks JTCSE's tables name, as mteb knows them."""

from __future__ import annotations

import pytest

from cselab.errors import CselabError
from cselab.evaluation import mteb_adapter
from cselab.evaluation.task_lists import (
    JTCSE_BITEXT,
    JTCSE_CLASSIFICATION,
    JTCSE_RERANKING,
    TASK_LISTS,
    expand_task_lists,
)
from tests.helpers import run_cli

mteb = pytest.importorskip("mteb")


def test_the_list_holds_the_papers_tables_and_mteb_knows_every_task():
    # JTCSE: Table II "45 text classifications", Table III "14 text reranking tasks", Table IV "15 bi-textmining"
    assert (len(JTCSE_CLASSIFICATION), len(JTCSE_RERANKING), len(JTCSE_BITEXT)) == (45, 14, 15)
    names = TASK_LISTS["jtcse-zero-shot"]
    assert len(names) == len(set(names)) == 45 + 14 + 15 + 4
    types = {}
    for name in names:  # metadata only: nothing is downloaded
        types[name] = mteb.get_task(name).metadata.type
    assert [types[n] for _, n in JTCSE_CLASSIFICATION] == ["Classification"] * 45
    assert [types[n] for _, n in JTCSE_RERANKING] == ["Reranking"] * 14
    assert [types[n] for _, n in JTCSE_BITEXT] == ["BitextMining"] * 15
    assert {types[n] for n in ("STS17", "STS22", "STS22.v2", "STSBenchmarkMultilingualSTS")} == {"STS"}


def test_expand_keeps_order_and_other_names():
    assert expand_task_lists(["STSBenchmark", "jtcse-zero-shot", "STS17"]) == \
        ["STSBenchmark", *TASK_LISTS["jtcse-zero-shot"]]


def test_cli_runs_the_expanded_list(tiny_bert_dir, monkeypatch, capsys):
    asked = []

    def stop(names, **_):
        asked.extend(names)
        raise CselabError("stopped before any data is fetched")

    monkeypatch.setattr(mteb_adapter, "get_tasks", stop)
    rc, _, err = run_cli(["mteb", str(tiny_bert_dir), "--tasks", "jtcse-zero-shot"], capsys)
    assert rc == 2 and "stopped before any data is fetched" in err
    assert asked == list(TASK_LISTS["jtcse-zero-shot"])
