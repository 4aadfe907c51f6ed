"""+UC ensembles with the weight chosen on STS-B dev: every grid point's dev score against a direct computation
(members encoded by hand, weighted, cosine, scipy's Spearman over the dev CSV read here), the tie rule, the saved
model, and the CLI."""

import csv
import json

import numpy as np
import pytest
import torch
from scipy import stats

from cselab.errors import CselabError
from cselab.experiments.ensemble import choose_weight, ensemble_chosen_on_dev
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model
from tests.helpers import build_tiny_model_dir, run_cli, write_distinct_sts_home


@pytest.fixture
def pair(tmp_path, monkeypatch):
    home = write_distinct_sts_home(tmp_path / "home")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    a = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "a", "bert", seed=1))
    b = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "b", "bert", seed=2))
    c = Encoder.from_pretrained(build_tiny_model_dir(tmp_path / "c", "bert", seed=4))
    save_model(TwinModel(a, b), tmp_path / "twin")
    save_model(c, tmp_path / "other")
    with open(home / "sts" / "stsb" / "sts-dev.csv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return tmp_path, (a, b, c), rows


def _direct_dev(members, rows, w):
    a, b, c = members
    first, second, gold = [r[5] for r in rows], [r[6] for r in rows], [float(r[4]) for r in rows]

    def embed(texts):
        return (1 - w) * (a.encode(texts) + b.encode(texts)) + w * c.encode(texts)

    cos = torch.nn.functional.cosine_similarity(embed(first).double(), embed(second).double()).numpy()
    return 100 * stats.spearmanr(cos, np.asarray(gold)).statistic


def test_dev_score_of_every_weight_matches_a_direct_computation(pair):
    tmp_path, members, rows = pair
    grid = [0.0, 0.3, 0.7, 1.0]
    choice = choose_weight(load_model(tmp_path / "twin"), load_model(tmp_path / "other"), grid)
    assert list(choice.dev_by_weight) == grid
    for w in grid:
        assert choice.dev_by_weight[w] == pytest.approx(_direct_dev(members, rows, w), abs=1e-6)
    best = max(grid, key=lambda w: _direct_dev(members, rows, w))
    assert choice.weight == best and choice.dev == pytest.approx(_direct_dev(members, rows, best), abs=1e-6)


def test_ties_go_to_less_of_the_outside_model(pair):
    tmp_path, _, _ = pair
    twin = load_model(tmp_path / "twin")
    # the same model on both sides: every weight gives the same embeddings up to scale, so the same dev score
    choice = choose_weight(twin, twin, [0.2, 0.5, 0.9])
    assert len({round(s, 9) for s in choice.dev_by_weight.values()}) == 1 and choice.weight == 0.2


def test_saved_ensemble_carries_the_chosen_weight_and_the_sweep(pair):
    tmp_path, members, rows = pair
    path, choice = ensemble_chosen_on_dev(tmp_path / "twin", tmp_path / "other", tmp_path / "uc", [0.0, 0.5, 1.0])
    model = load_model(path)
    assert isinstance(model, EnsembleModel) and model.weights == [1 - choice.weight, choice.weight]
    saved = json.loads((path / "cselab.json").read_text())
    assert saved["weight_chosen_on"] == "stsb/dev" and saved["weight"] == choice.weight
    assert set(saved["dev_by_weight"]) == {"0.0", "0.5", "1.0"}


def test_cli_weight_dev_prints_the_sweep_and_refuses_bad_grids(pair, capsys):
    tmp_path, _, _ = pair
    models = [str(tmp_path / "twin"), str(tmp_path / "other")]
    code, out, err = run_cli(["ensemble", *models, "--output", str(tmp_path / "e1"), "--weight", "dev",
                              "--grid", "0,0.5"], capsys)
    assert code == 0, err
    assert "STS-B dev by w: 0: " in out and "chosen w = " in out and (tmp_path / "e1").is_dir()
    for grid, message in (("0,2", "must be in [0, 1]"), (",", "empty"), ("x", "give a number")):
        code, _, err = run_cli(["ensemble", *models, "--output", str(tmp_path / "e2"), "--weight", "dev",
                                "--grid", grid], capsys)
        assert code == 2 and message in err and not (tmp_path / "e2").exists()
    with pytest.raises(CselabError, match=r"\[0, 1\]"):
        choose_weight(load_model(tmp_path / "twin"), load_model(tmp_path / "other"), [1.5])
