"""The schemas of cselab's records and their one reader, :func:`read_records`, shared by ``cselab report``,
``cselab seeds`` and ``cselab ablate``.

Every kind is the results record that :func:`cselab.training.results.results_record` writes
(docs/results.md#results-record), so they share the field checks of :data:`RESULTS`; they differ in what a
record of the kind must hold:

* ``results`` (``cselab train --results``, the protocol table): ``method`` and ``scores``;
* ``seeds`` (``cselab seeds``): also a ``seed``, since records are grouped and paired by it;
* ``ablation`` (``cselab ablate``): also a ``seed`` and the ``variant`` that names the loss-term subset.

Every kind checks a ``training_text`` object (what a run trained on) and an ``ensemble`` object (a +UC ensemble's
weight) where a record has one; a study that keeps records of its own builds its kind on :data:`RESULTS`
(``RESULTS.with_required(...)``) and reads it with :func:`cselab.data.stores.jsonl.read_jsonl`.

A bad line is refused with the file, the line and the field (``seeds.jsonl:3: field 'seed' is not a whole
number``) instead of rendering a row of ``?`` or failing deep inside a table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cselab.data.stores.jsonl import Schema, list_of, mapping, nullable, number, read_jsonl, text, whole
from cselab.errors import CselabError

_SECTION = mapping()  # a section of the effective configuration (model, data, train, method_options)

RESULTS = Schema("results", {
    "method": text(empty=False),
    "variant": text(),
    "row": text(),
    "protocol": text(),
    "backbone": text(),
    "seed": whole(0),
    "steps": whole(0),
    "best_step": whole(0),
    "precision": text(),
    "scores": mapping(nullable(number())),
    "wall_s": number(minimum=0),
    "train_sentences_per_s": number(minimum=0),
    "peak_mem_mb": number(minimum=0),
    "git": text(),
    "date": text(),
    "machine": mapping(),
    "stage1": list_of(mapping()),
    "config": Schema("config", {
        "path": text(),
        "overrides": list_of(text()),
        "effective": Schema("effective configuration", {
            "method": text(), "model": _SECTION, "data": _SECTION, "train": _SECTION, "method_options": _SECTION}),
    }),
    "training_text": Schema("training text", {
        "corpus": text(),
        "sentences": whole(0),
        "sha256": text(),
        "overlap": mapping(whole(0)),
        "not_held_out": list_of(text()),
        "error": text(),
    }),
    "ensemble": Schema("ensemble", {
        "weight": number(0.0, 1.0),
        "dev": number(),
        "dev_by_weight": mapping(nullable(number())),
        "of": text(), "model": text(), "outside": text(), "saved": text(), "combine": text(),
    }),
}, required=("method", "scores"))
SEEDS = RESULTS.with_required("seeds", "seed")
ABLATION = RESULTS.with_required("ablation", "seed", "variant")
KINDS: dict[str, Schema] = {s.kind: s for s in (RESULTS, SEEDS, ABLATION)}


def read_records(path: str | Path, kind: str = "results", *, allow_empty: bool = True) -> list[dict[str, Any]]:
    """The records of a JSON-lines file of ``kind`` (see :data:`KINDS`), each checked against its schema; a
    line that is not such a record is refused naming the file, the line and the field. With ``allow_empty``
    false, a file without records is refused too (a report of nothing)."""
    records = read_jsonl(path, KINDS[kind])
    if not records and not allow_empty:
        raise CselabError(f"{path} holds no records; give a {kind} file that `cselab` has written records to")
    return records
