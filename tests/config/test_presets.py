"""Presets shipped in the package (named with --preset, listed by `cselab presets`) and `cselab config show`.

Expected values come from the repository's configs/ directory read here, from pydantic's own dump of the
default config, and from the method papers' settings, not from the code that lists or renders them."""

from __future__ import annotations

import json

import pytest
import yaml

from cselab.config.run_config import RunConfig, load_config
from cselab.methods import METHODS
from tests.cli.test_cli import run_cli
from tests.helpers import REPO_ROOT, write_corpus

ROOT = REPO_ROOT
CONFIG_FILES = sorted(ROOT.glob("configs/*/*.yaml"))


def one_line_error(code, err) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_every_config_file_is_listed_and_resolves_to_the_same_file(capsys):
    assert len(CONFIG_FILES) >= 20
    expected = {f"{p.parent.name}/{p.stem}": p for p in CONFIG_FILES}
    code, out, err = run_cli(["presets"], capsys)
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == sorted(expected)
    by_name = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    for name, path in expected.items():
        assert by_name[name] == yaml.safe_load(path.read_text())["method"]  # the method column
    from cselab.config.presets import preset_path

    for name, path in expected.items():
        assert preset_path(name).read_bytes() == path.read_bytes()
    assert preset_path("simcse/cpu-minilm.yaml").read_bytes() == (ROOT / "configs/simcse/cpu-minilm.yaml").read_bytes()


@pytest.mark.parametrize(("args", "message"), [
    (["train", "--preset", "simcse/cpu-minlm"], "unknown preset 'simcse/cpu-minlm'; did you mean 'simcse/cpu-minilm'?"),
    (["train", "--preset", "nothing/like-this"], "`cselab presets` lists them"),
    (["train", "--preset", "simcse/cpu-minilm", "--config", "x.yaml"], "give --config FILE or --preset NAME, not both"),
    (["seeds"], "give --config FILE or --preset NAME"),
    (["ablate"], "give --config FILE or --preset NAME"),
    (["report"], "give at least one records file"),
    (["config", "show", "simcsee"], "unknown method 'simcsee'"),
])
def test_bad_preset_and_config_arguments(args, message, capsys):
    code, _, err = run_cli(args, capsys)
    assert message in one_line_error(code, err)


def test_train_with_a_preset_uses_its_values_and_records_its_name(tiny_bert_dir, sts_home, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    results = tmp_path / "results.jsonl"
    code, out, err = run_cli(["train", "--preset", "simcse/cpu-minilm", "--results", str(results),
                              f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "model.max_length=16",
                              "train.batch_size=8", "train.max_steps=2", "train.eval_every=2", "train.precision=fp32",
                              f"train.output_dir={tmp_path / 'run'}"], capsys)
    assert code == 0, err
    record = json.loads(results.read_text())
    assert record["config"]["path"] == "preset simcse/cpu-minilm"
    effective = record["config"]["effective"]
    preset = yaml.safe_load((ROOT / "configs/simcse/cpu-minilm.yaml").read_text())
    # what the overrides did not touch comes from the preset, not from the defaults (seed 42, lr 3e-5, no dropout)
    assert effective["train"]["seed"] == preset["train"]["seed"] == 1
    assert effective["model"]["dropout"] == preset["model"]["dropout"] == 0.1
    assert effective["train"]["scheduler"] == preset["train"]["scheduler"]
    assert record["steps"] == 2 and (tmp_path / "run" / "best").is_dir()


def test_seeds_keeps_records_and_summary_under_the_run(tiny_bert_dir, sts_home, tmp_path, capsys, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus.txt", n=40)
    monkeypatch.chdir(tmp_path)  # nothing may land in the current directory
    before = set(tmp_path.iterdir())
    run = tmp_path / "runs" / "tiny"
    code, out, err = run_cli(["seeds", "--preset", "simcse/cpu-minilm", "--seeds", "1",
                              f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "model.max_length=16",
                              "train.batch_size=8", "train.max_steps=1", "train.eval_every=1", "train.precision=fp32",
                              f"train.output_dir={run}"], capsys)
    assert code == 0, err
    assert set(tmp_path.iterdir()) - before == {tmp_path / "runs"}
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["tiny", "tiny-seed1"]
    assert {"seeds.jsonl", "seeds.md", "seeds.png", "seeds.json"} <= {p.name for p in run.iterdir()}
    assert json.loads((run / "seeds.jsonl").read_text())["seed"] == 1


def parse_reference(text: str) -> dict[str, tuple[str, str]]:
    """KEY -> (DEFAULT text, description) of `cselab config show` output, parsed here."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        setting, _, comment = line.partition("  # ")
        key, _, value = setting.strip().partition("=")
        assert key and key not in out, line
        out[key] = (value, comment.strip())
    return out


def flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize("method", METHODS.names())
def test_config_show_lists_every_key_with_its_default(method, capsys):
    code, out, err = run_cli(["config", "show", method], capsys)
    assert code == 0, err
    keys = parse_reference(out)
    assert keys["method"][0] == method
    # every section key, with pydantic's own dump of the default config as the expected default
    defaults = flatten(RunConfig().model_dump(mode="json"))
    section_keys = {k for k in defaults if k.split(".")[0] in ("model", "data", "train")}
    assert section_keys == {k for k in keys if k.split(".")[0] in ("model", "data", "train")}
    for key in section_keys:
        assert yaml.safe_load(keys[key][0]) == defaults[key], key
        assert keys[key][1], f"{key} has no description"
    # every option of the method, and one weight per loss term
    options = METHODS.get(method).Options
    for name in options.model_fields:
        if name != "loss_weights":
            assert f"method_options.{name}" in keys
    assert {k for k in keys if k.startswith("method_options.loss_weights.")} == {
        f"method_options.loss_weights.{t}" for t in METHODS.get(method).terms}
    # each printed default, given back as an override, leaves the configuration as it was
    base_overrides = ["method_options.teacher=T"] if method == "distill" else []
    base = load_config(None, base_overrides, method=method)
    # (loss weights: test_config_show_loss_weights_are_the_methods_weights)
    plain = [k for k, (v, _) in keys.items() if v != "<required>" and k != "method" and ".loss_weights." not in k
             and not any(k.startswith(other + ".") or k.startswith(other + "[].") for other in keys if other != k)]
    for key in plain:
        again = load_config(None, [*base_overrides, f"{key}={keys[key][0]}"], method=method)
        assert again.model_dump(exclude={"method_options"}) == base.model_dump(exclude={"method_options"}), key
        assert options.model_validate(again.method_options) == options.model_validate(base.method_options), key


def test_config_show_descriptions_bounds_and_paper_values(capsys):
    _, out, _ = run_cli(["config", "show", "simcse++"], capsys)
    keys = parse_reference(out)
    assert keys["model.max_length"] == ("32", "training truncation length (tokens); > 0")
    assert "one of: linear, constant" in keys["train.scheduler"][1]
    assert "one of: negatives, positive" in keys["method_options.offdropout_scale"][1]
    # SimCSE++ (METHODS.md section 2): DCL weight lambda 0.1, tau_DCL 5, InfoNCE at weight 1
    assert keys["method_options.loss_weights.dcl"][0] == "0.1"
    assert keys["method_options.loss_weights.info_nce"][0] == "1.0"
    assert keys["method_options.dcl_temperature"][0] == "5.0"
    _, out, _ = run_cli(["config", "show", "tncse"], capsys)
    keys = parse_reference(out)
    # the stage-1 recipe is unset by default, and its keys are listed below it
    assert keys["method_options.pipeline"][0] == "null"
    assert keys["method_options.pipeline.stage1.encoders[].augmentation.kind"][0] == "<required>"
    assert "word_dropout" in keys["method_options.pipeline.stage1.encoders[].augmentation.kind"][1]
    _, out, _ = run_cli(["config", "show", "distill"], capsys)
    assert parse_reference(out)["method_options.teacher"][0] == "<required>"


@pytest.mark.parametrize("method", ["simcse", "simcse++", "ifcl"])
def test_config_show_loss_weights_are_the_methods_weights(method, tiny_bert_dir, capsys):
    from cselab.methods import build_method

    _, out, _ = run_cli(["config", "show", method], capsys)
    shown = {k.rsplit(".", 1)[1]: float(v) for k, (v, _) in parse_reference(out).items() if ".loss_weights." in k}
    built = build_method(load_config(None, [f"model.backbone={tiny_bert_dir}"], method=method))
    assert shown == built.weights
