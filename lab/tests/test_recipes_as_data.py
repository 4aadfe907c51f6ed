"""The study's arms moved out of `cselab adapt` into recipe files: every configuration of the domain study, and
cselab adapt's defaults, still plan what the code before the move planned (the effective configuration, the budget,
the selection, the mix and every text made), on a short and a long fixture text. The reference was written by that
code (``lab/tests/fixtures/adapt_plans_before.json``, ``python -m lab.tests.adapt_plan_snapshot``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.tests.adapt_plan_snapshot import TEXTS, current_plans, make_fixture

# the one intended change: the adapted teacher, like every model cselab adapt hands back, is now its run's `model`
HANDED_BACK = ("teacher-adapted/best", "teacher-adapted/model")
BEFORE = json.loads((Path(__file__).parent / "fixtures" / "adapt_plans_before.json").read_text()
                    .replace(*HANDED_BACK))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_configuration_plans_what_it_planned_before_the_move(name, tmp_path, monkeypatch):
    root = tmp_path / name
    fixture = make_fixture(root, TEXTS[name])
    monkeypatch.setenv("CSELAB_HOME", str(fixture["home"]))
    now = current_plans(name, root, fixture)
    before = {k: v for k, v in BEFORE.items() if k.startswith(f"{name}/")}
    assert sorted(now) == sorted(before)
    differ = {}
    for key, old in before.items():
        new = now[key]
        changed = {field: (old[field], new[field]) for field in old if old[field] != new[field]}
        if changed.get("config"):
            o, n = changed["config"]
            changed["config"] = {k: (o.get(k), n.get(k)) for k in set(o) | set(n) if o.get(k) != n.get(k)}
        if changed:
            differ[key] = changed
    assert not differ, json.dumps(differ, indent=1, default=str)[:4000]
