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
from cselab.models.encoder import Encoder
from cselab.models.sentence_model import EnsembleModel, TwinModel, load_model, save_model
from cselab.research.experiments.ensemble import choose_weight, ensemble_chosen_on_dev
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


def test_mixed_weights_against_hand_computed_tensors():
    from cselab.models.weight_mix import mixed_weights

    a = {"w": torch.tensor([0.0, 2.0, -4.0]), "ids": torch.tensor([0, 1, 2])}
    b = {"w": torch.tensor([1.0, 6.0, 4.0]), "ids": torch.tensor([0, 1, 3])}
    mixed = mixed_weights(a, b, 0.25)
    torch.testing.assert_close(mixed["w"], torch.tensor([0.25, 3.0, -2.0]))  # 0.75 * a + 0.25 * b
    assert torch.equal(mixed["ids"], b["ids"])  # an index buffer is B's
    torch.testing.assert_close(mixed_weights(a, b, 0.0)["w"], a["w"])
    torch.testing.assert_close(mixed_weights(a, b, 1.0)["w"], b["w"])
    assert torch.equal(a["w"], torch.tensor([0.0, 2.0, -4.0]))  # the inputs are left as they were
    for other in ({"v": torch.zeros(3), "ids": b["ids"]}, {"w": torch.zeros(4), "ids": b["ids"]}):
        with pytest.raises(CselabError, match="architecture"):
            mixed_weights(a, other, 0.5)


def test_combine_weights_saves_one_model_of_the_mixed_weights(tmp_path, capsys):
    a_dir = build_tiny_model_dir(tmp_path / "a", "bert", seed=1)
    b_dir = build_tiny_model_dir(tmp_path / "b", "bert", seed=2)
    code, out, err = run_cli(["ensemble", str(a_dir), str(b_dir), "--combine", "weights", "--weight", "0.3",
                              "--output", str(tmp_path / "mixed")], capsys)
    assert code == 0, err
    a, b, mixed = (load_model(p, device="cpu") for p in (a_dir, b_dir, tmp_path / "mixed"))
    assert type(mixed) is type(b) and not isinstance(mixed, EnsembleModel)
    state_a, state_b = a.state_dict(), b.state_dict()
    for name, value in mixed.state_dict().items():  # every weight 0.7 * A + 0.3 * B, computed here
        expected = 0.7 * state_a[name] + 0.3 * state_b[name] if value.is_floating_point() else state_b[name]
        torch.testing.assert_close(value, expected)
    assert json.loads((tmp_path / "mixed" / "cselab.json").read_text())["weights_mixed"]["weight"] == 0.3
    code, _, err = run_cli(["ensemble", str(a_dir), str(b_dir), "--combine", "weights", "--weight", "dev",
                            "--output", str(tmp_path / "dev")], capsys)
    assert code == 2 and "give the weight" in err and not (tmp_path / "dev").exists()
    other = build_tiny_model_dir(tmp_path / "c", "bert", seed=3, hidden_size=48)
    code, _, err = run_cli(["ensemble", str(a_dir), str(other), "--combine", "weights", "--weight", "0.5",
                            "--output", str(tmp_path / "refused")], capsys)
    assert code != 0 and "architecture" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "refused").exists()
