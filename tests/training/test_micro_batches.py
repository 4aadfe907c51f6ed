"""Micro-batches (cselab adapt's activation budget): the step of a batch run in pieces has the whole batch's gradient,
for the loss of every shipped recipe, and the pieces are chosen from the activations the step would hold."""

from types import SimpleNamespace

import pytest
import torch

from cselab.adaptation.recipe import load_recipe, shipped_recipes
from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.runtime.memory import ACTIVATION_BUDGET, ActivationBudget, activation_bytes_per_token, choose_micro_batch
from cselab.runtime.precision import backbone_config_of
from cselab.training.trainer import Trainer
from tests.helpers import build_tiny_model_dir, write_corpus

MINILM = SimpleNamespace(num_hidden_layers=6, hidden_size=384, num_attention_heads=12, intermediate_size=1536)


def test_bytes_per_token_of_minilm_at_256_tokens_by_hand():
    # per layer: 12 heads x 256 keys x (3 floats + a 1-byte mask) + (12 x 384 + 3 x 1536) floats
    per_layer = 12 * 256 * (3 * 4 + 1) + (12 * 384 + 3 * 1536) * 4
    assert activation_bytes_per_token(MINILM, 256) == 6 * per_layer == 460_800


@pytest.mark.parametrize("batch, length, rows, expected", [
    (64, 256, 1, 2),   # 2 x 256 x 460,800 B = 225 MiB fits 256 MiB; 4 would be 450 MiB
    (64, 64, 2, 4),    # SimCSE's two views: 2 x 64 x 281,088 B = 34.3 MiB an example; 7 fit, 4 divides 64
    (64, 8, 1, 64),    # short lines: the whole batch fits (8 x 118,080 B an example, 57.7 MiB in all)
    (10, 128, 1, 5),   # 128 x 340,992 B = 41.6 MiB an example: a divisor (5), not the largest count that fits (6)
])
def test_micro_batch_is_the_largest_divisor_that_fits(batch, length, rows, expected):
    chosen = choose_micro_batch(batch, length, MINILM, sequences_per_example=rows)
    assert chosen.size == expected
    per_example = activation_bytes_per_token(MINILM, length) * length * rows
    assert expected * per_example <= ACTIVATION_BUDGET
    bigger = [d for d in range(expected + 1, batch + 1) if batch % d == 0]
    assert all(d * per_example > ACTIVATION_BUDGET for d in bigger)


def test_one_example_over_the_budget_still_runs():
    assert choose_micro_batch(8, 256, MINILM, budget=1).size == 1


@pytest.fixture(scope="module")
def wide_teacher(tmp_path_factory):
    """Wider than the 32-wide student, as all-mpnet-base-v2 is than all-MiniLM-L6-v2 (the recipes' projection)."""
    return build_tiny_model_dir(tmp_path_factory.mktemp("teacher"), "bert", seed=7, hidden_size=48)


def _recipe_overrides(name, teacher):
    recipe = load_recipe(name)
    options = [f"method_options.{k}={v}" for k, v in recipe.method_options.items()]
    if recipe.needs_teacher:
        options.append(f"method_options.teacher={teacher}")
    return recipe, [f"method={recipe.method}", *options]


@pytest.mark.parametrize("name", shipped_recipes())
def test_each_recipes_step_in_micro_batches_has_the_whole_batchs_gradient(name, tiny_bert_dir, wide_teacher,
                                                                          tmp_path):
    recipe, method = _recipe_overrides(name, wide_teacher)
    corpus = write_corpus(tmp_path / "corpus.txt", n=96)
    base = [*method, f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=16",
            "model.max_length=16", "model.dropout=0.0", "train.seed=3", "train.eval_at_start=false",
            "train.precision=fp32"]

    def trainer(run, budget=None):
        config = load_config(None, [*base, f"train.output_dir={tmp_path / run}"])
        return Trainer(config, activation_budget=budget)

    whole = trainer("whole")
    per_example = (activation_bytes_per_token(backbone_config_of(whole.method), 16) * 16
                   * whole.method.rows_per_example)
    pieces = trainer("pieces", budget=4 * per_example)
    assert pieces.micro_batch.size == 4
    expected_way = "accumulate" if recipe.method == "distill" else "gradient-cache"
    assert pieces.micro_batch_way == expected_way
    assert pieces.micro_batch_facts()["way"] == expected_way
    assert whole.micro_batch_way == "whole"
    pieces.method.load_state_dict(whole.method.state_dict())  # the same weights (SimCSE's head is drawn per run)
    batch = whole.batch_at(0)
    whole_values = whole.compute_gradients(batch)
    piece_values = pieces.compute_gradients(batch)
    # the pieces were sized at the batch's own width: the largest divisor of 16 whose examples fit the budget there
    width = int(batch["input_ids"].shape[1])
    at_width = activation_bytes_per_token(backbone_config_of(whole.method), width) * width \
        * whole.method.rows_per_example
    expected = max(k for k in range(1, 17) if 16 % k == 0 and k * at_width <= 4 * per_example)
    assert dict(pieces.pieces_run) == {expected: 1} and expected < 16  # split, so the comparison means something
    assert torch.allclose(piece_values["loss"], whole_values["loss"], atol=1e-6)
    grads = {n: p.grad for n, p in whole.method.named_parameters() if p.grad is not None}
    piece_grads = {n: p.grad for n, p in pieces.method.named_parameters() if p.grad is not None}
    assert grads.keys() == piece_grads.keys() and grads
    assert max(float(g.abs().max()) for g in grads.values()) > 1e-4  # a gradient that could differ
    for n, g in grads.items():
        assert torch.allclose(piece_grads[n], g, atol=1e-6, rtol=1e-5), (n, float((piece_grads[n] - g).abs().max()))


def test_a_batch_of_short_lines_runs_in_bigger_pieces_than_one_of_long_passages(tiny_bert_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    # batches are drawn from one length group at a time: 16 lines of 3 words, 16 of 60 (cut to 32 tokens)
    corpus.write_text("".join(f"short line {i}\n" for i in range(16))
                      + "".join(" ".join(f"w{i}x{j}" for j in range(60)) + "\n" for i in range(16)))
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=16",
                                "model.max_length=32", f"train.output_dir={tmp_path / 'run'}", "method=distill",
                                f"method_options.teacher={tiny_bert_dir}", "train.precision=fp32"])
    per_token = activation_bytes_per_token
    probe = Trainer(config)
    backbone = backbone_config_of(probe.method)
    budget = 2 * per_token(backbone, 32) * 32  # two 32-token examples
    trainer = Trainer(config, activation_budget=budget)
    assert trainer.micro_batch.size == 2  # the widest case
    widths = {}
    for step in range(2):
        batch = trainer.batch_at(step)
        widths[step] = int(batch["input_ids"].shape[1])
        trainer.compute_gradients(batch)
    short, long = sorted(widths.values())
    assert long == 32 and short < 16
    expected_short = max(k for k in range(1, 17) if 16 % k == 0 and k * per_token(backbone, short) * short <= budget)
    assert expected_short > 2
    assert dict(trainer.pieces_run) == {2: 1, expected_short: 1}
    trainer.resize_pieces(4 * per_token(backbone, 32) * 32)  # four 32-token examples from now on, counted afresh
    trainer.compute_gradients(trainer.batch_at(1 if widths[1] == 32 else 0))
    assert dict(trainer.pieces_run) == {4: 1} and trainer.micro_batch_way == "accumulate"
    with pytest.raises(CselabError, match="runs its batches whole"):
        probe.resize_pieces(budget)


def test_cselab_train_runs_its_batch_whole(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=16",
                                f"train.output_dir={tmp_path / 'run'}"])
    trainer = Trainer(config)
    assert (trainer.micro_batch, trainer.micro_batch_way) == (None, "whole")


@pytest.mark.parametrize("method, way, budget_pieces", [("distill", "accumulate", 8), ("simcse", "gradient-cache", 4)])
def test_each_way_cuts_its_batch_at_its_own_budget(method, way, budget_pieces, tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    options = [f"method_options.teacher={tiny_bert_dir}"] if method == "distill" else []
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=16",
                                "model.max_length=16", f"train.output_dir={tmp_path / 'run'}", f"method={method}",
                                "train.precision=fp32", *options])
    probe = Trainer(config)
    per_example = (activation_bytes_per_token(backbone_config_of(probe.method), 16) * 16
                   * probe.method.rows_per_example)
    # 8 examples' worth for the accumulated way, 4 for the gradient-cached one: each way reads its own
    budget = ActivationBudget(accumulate=8 * per_example, gradient_cache=4 * per_example)
    trainer = Trainer(config, activation_budget=budget)
    assert trainer.micro_batch_way == way
    assert trainer.micro_batch.size == budget_pieces
    assert trainer.micro_batch.budget == budget.of(way)


def test_adapts_default_budget_gives_the_gradient_cached_way_less():
    default = ActivationBudget()
    assert default.of("accumulate") == ACTIVATION_BUDGET == 256 * 2**20
    assert default.of("gradient-cache") == 192 * 2**20
    assert ActivationBudget.uniform(5).of("gradient-cache") == ActivationBudget.uniform(5).of("accumulate") == 5
