"""A large lookup table's gradient added into one kept tensor: the same gradient as autograd's own ``nn.Embedding``,
no new table-sized tensor per backward pass, and the module's own lookup outside training."""

import pytest
import torch
from torch import nn

from cselab.config.run_config import load_config
from cselab.runtime.memory import activation_bytes_per_token
from cselab.runtime.precision import backbone_config_of
from cselab.training import kept_gradient
from cselab.training.kept_gradient import keep_lookup_gradients
from cselab.training.trainer import Trainer
from tests.helpers import write_corpus


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(50, 8, padding_idx=0)
        self.head = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.table(ids))).sum(dim=1)


def _pair() -> tuple[_Tiny, _Tiny]:
    torch.manual_seed(0)
    plain = _Tiny()
    hooked = _Tiny()
    hooked.load_state_dict(plain.state_dict())
    return plain, hooked


def _pieces() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (6, 7), generator=generator)
    ids[:, 5:] = 0  # padding
    ids[0, 0] = ids[1, 0] = ids[2, 3] = 17  # a row that several tokens of several pieces add to
    return list(ids.split(2))


def _backward(model: nn.Module, pieces: list[torch.Tensor]) -> None:
    target = torch.linspace(-1, 1, 3)
    for piece in pieces:
        ((model(piece) - target) ** 2).mean().backward()


def test_the_gradient_over_pieces_is_autograds_own():
    plain, hooked = _pair()
    kept = keep_lookup_gradients(hooked, min_bytes=0)
    assert kept.tables == [hooked.table]
    _backward(plain, _pieces())
    _backward(hooked, _pieces())
    assert hooked.table.weight.grad is kept.gradients[0]  # the kept tensor took the sums, not autograd's own
    assert float(plain.table.weight.grad.abs().max()) > 1e-3  # a gradient that could differ
    assert torch.allclose(hooked.table.weight.grad, plain.table.weight.grad, atol=1e-7)
    assert torch.equal(hooked.table.weight.grad[0], torch.zeros(8))  # the padding row gets none, as nn.Embedding's
    assert torch.allclose(hooked.head.weight.grad, plain.head.weight.grad, atol=1e-7)


def test_one_kept_tensor_is_the_gradient_of_every_step():
    _, hooked = _pair()
    kept = keep_lookup_gradients(hooked, min_bytes=0)
    optimizer = torch.optim.AdamW(hooked.parameters(), lr=1e-2)
    for _ in range(3):
        _backward(hooked, _pieces())
        assert hooked.table.weight.grad is kept.gradients[0]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        assert hooked.table.weight.grad is None
    # a fresh step after set_to_none starts from zero, not from the last step's sums
    plain, _ = _pair()
    plain.load_state_dict(hooked.state_dict())
    _backward(plain, _pieces())
    _backward(hooked, _pieces())
    assert torch.allclose(hooked.table.weight.grad, plain.table.weight.grad, atol=1e-7)


def test_outside_training_the_lookup_is_the_modules_own():
    plain, hooked = _pair()
    kept = keep_lookup_gradients(hooked, min_bytes=0)
    ids = _pieces()[0]
    with torch.no_grad():
        out = hooked.table(ids)
    assert out.grad_fn is None and torch.equal(out, plain.table(ids).detach())
    hooked.table.weight.requires_grad_(False)  # frozen after the hooks were put on: autograd's own path, no gradient
    assert hooked.table(ids).grad_fn is None
    hooked.table.weight.requires_grad_(True)
    kept.remove()
    assert type(hooked.table(ids).grad_fn).__name__ == "EmbeddingBackward0"


def test_only_tables_too_large_for_the_heap_are_hooked():
    model = nn.Sequential(nn.Embedding(30522, 384), nn.Embedding(512, 384))  # all-MiniLM-L6-v2's word and positions
    frozen = nn.Embedding(30522, 384).requires_grad_(False)
    assert keep_lookup_gradients(model).tables == [model[0]]
    assert keep_lookup_gradients(frozen).tables == []


@pytest.mark.parametrize("method", ["distill", "simcse"])  # micro-batches accumulated, and gradient-cached
def test_a_trainers_step_on_the_cpu_has_the_same_gradient_with_kept_tables(method, tiny_bert_dir, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(kept_gradient, "LARGEST_HEAP_TENSOR", 0)  # the tiny model's tables count as large
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    options = [f"method={method}", f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}",
               "train.batch_size=16", "model.max_length=16", "model.dropout=0.0", "train.seed=3",
               "train.eval_at_start=false", "train.precision=fp32", "train.device=cpu"]
    if method == "distill":
        options.append(f"method_options.teacher={tiny_bert_dir}")

    def trainer(run: str) -> Trainer:
        config = load_config(None, [*options, f"train.output_dir={tmp_path / run}"])
        probe = Trainer(config)
        per_example = (activation_bytes_per_token(backbone_config_of(probe.method), 16) * 16
                       * probe.method.rows_per_example)
        return Trainer(config, activation_budget=4 * per_example)

    kept, own = trainer("kept"), trainer("own")
    assert kept.kept_gradients.tables  # the student's word, position and token-type tables
    own.kept_gradients.remove()
    own.method.load_state_dict(kept.method.state_dict())
    batch = kept.batch_at(0)
    kept.compute_gradients(batch)
    own.compute_gradients(batch)
    assert sum(kept.pieces_run.values()) == 1 and min(kept.pieces_run) < 16  # the step ran in pieces
    for table, gradient in zip(kept.kept_gradients.tables, kept.kept_gradients.gradients, strict=True):
        assert table.weight.grad is gradient  # each table's sums went into its kept tensor
    assert not own.kept_gradients.tables
    grads = {n: p.grad for n, p in own.method.named_parameters() if p.grad is not None}
    kept_grads = {n: p.grad for n, p in kept.method.named_parameters() if p.grad is not None}
    assert grads.keys() == kept_grads.keys()
    assert any("word_embeddings" in n for n in grads)
    for n, g in grads.items():
        assert torch.allclose(kept_grads[n], g, atol=1e-6, rtol=1e-5), (n, float((kept_grads[n] - g).abs().max()))
