"""Configuration: presets validate, overrides apply, unknown keys are one-line errors with a suggestion."""

import pytest

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from tests.helpers import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"


def test_overrides_and_types():
    cfg = load_config(None, ["train.lr=1e-5", "model.pooler=mean", "train.max_steps=7",
                             "method_options.temperature=0.1"])
    assert cfg.train.lr == 1e-5 and cfg.model.pooler == "mean" and cfg.train.max_steps == 7
    assert cfg.method_options == {"temperature": 0.1}


def test_unknown_key_suggests_closest():
    with pytest.raises(CselabError, match=r"unknown key 'train.lrr' \(did you mean 'train.lr'\?\)"):
        load_config(None, ["train.lrr=1"])


def test_unknown_section_and_bad_values():
    with pytest.raises(CselabError, match="unknown key 'trian'"):
        load_config(None, ["trian.lr=1"])
    with pytest.raises(CselabError, match="unknown pooler 'avg'"):
        load_config(None, ["model.pooler=avg"])
    with pytest.raises(CselabError, match="train.lr"):
        load_config(None, ["train.lr=-1"])
    with pytest.raises(CselabError, match="not KEY=VALUE"):
        load_config(None, ["train.lr"])


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(CselabError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(CselabError, match="not valid YAML"):
        load_config(bad)


@pytest.mark.parametrize("preset", sorted(p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*.yaml")))
def test_every_shipped_preset_validates(preset):
    from cselab.methods import METHODS

    cfg = load_config(CONFIGS / preset)
    method = METHODS.get(cfg.method)
    method.Options.model_validate(cfg.method_options)
