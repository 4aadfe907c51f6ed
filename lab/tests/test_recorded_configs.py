"""Every recorded row still names the configuration it ran with: its preset plus its overrides, loaded by
today's schema, equal the effective configuration stored in the record. The fast training switches became
defaults after those rows ran, so the presets pin the old values and the check covers them too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cselab.config.run_config import dump_config, load_config
from cselab.training.run_directory import RUNTIME_KEYS

ROOT = Path(__file__).resolve().parents[2]
# keys added to the schema after rows were recorded -> the value every earlier row ran with
LATER_KEYS = {("model", "dropout_masks"): "torch", ("train", "length_group_window"): None}


def _recorded_rows() -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for path in sorted((ROOT / "lab" / "results").glob("*.jsonl")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            record = json.loads(line)
            config = record.get("config")
            if (isinstance(config, dict) and config.get("effective")
                    and str(config.get("path", "")).startswith("configs/")):
                rows.append((f"{path.name}:{lineno}", record))
    return rows


ROWS = _recorded_rows()


def test_there_are_recorded_rows_to_check():
    assert len(ROWS) > 50


@pytest.mark.parametrize(("where", "record"), ROWS, ids=[w for w, _ in ROWS])
def test_a_recorded_rows_preset_still_gives_its_configuration(where, record):
    config = record["config"]
    # overrides naming a run-local file (a teacher, a stage-1 model) are kept as written
    loaded = json.loads(json.dumps(load_config(ROOT / config["path"],
                                               list(config.get("overrides") or [])).model_dump()))
    effective = config["effective"]
    for section, values in effective.items():
        if isinstance(values, dict) and section != "method_options":
            for key, value in values.items():
                if f"{section}.{key}" in RUNTIME_KEYS:  # where it ran, not what it computed
                    continue
                if (section, key) == ("train", "precision") and loaded[section][key] == "auto":
                    # auto is what the preset asks; it resolved to value
                    assert value in ("auto", "bf16", "fp32"), where
                    continue
                assert loaded[section][key] == value, (f"{where}: {section}.{key} is {loaded[section][key]!r}, "
                                                       f"ran {value!r}")
        elif section != "method_options":
            assert loaded[section] == values, f"{where}: {section}"
    for (section, key), old in LATER_KEYS.items():
        if key not in effective.get(section, {}):
            assert loaded[section][key] == old, f"{where}: {section}.{key} must stay {old!r} for this row"
    assert dump_config(load_config(ROOT / config["path"], list(config.get("overrides") or [])))
