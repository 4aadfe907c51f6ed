"""A method added from OUTSIDE the package: one class, registered, and the trainer, the CLI and the pipeline
train it without an edit. The method here is SimCSE with another similarity (negative squared Euclidean
distance instead of cosine); its loss is checked against a per-row loop written out in this file."""

from __future__ import annotations

import json
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from cselab.methods import METHODS, StepContext, register_method
from cselab.methods.simcse import SimCSE
from tests.helpers import run_cli, write_corpus


def euclidean_info_nce(a: Tensor, b: Tensor, temperature: float) -> Tensor:
    """InfoNCE whose logits are ``-||a_i - b_j||^2 / temperature`` (vectors L2-normalised first)."""
    a, b = F.normalize(a.float(), dim=-1), F.normalize(b.float(), dim=-1)
    logits = -torch.cdist(a, b).pow(2) / temperature
    return F.cross_entropy(logits, torch.arange(a.shape[0], device=a.device))


@register_method
class EuclideanSimCSE(SimCSE):
    """SimCSE's views and encoder, another similarity: only the loss is this file's own."""

    name = "test-euclidean-simcse"
    terms = ("euclidean_nce",)

    def loss_from_embeddings(self, embeddings: dict[str, Tensor], ctx: StepContext) -> dict[str, Tensor]:
        return {"euclidean_nce": euclidean_info_nce(embeddings["z1"], embeddings["z2"], self.options.temperature)}


def test_the_loss_equals_a_per_row_loop():
    torch.manual_seed(0)
    a, b, tau = torch.randn(5, 7), torch.randn(5, 7), 0.1
    total = 0.0
    for i in range(5):
        ai = a[i] / a[i].norm()
        dists = [float(((ai - b[j] / b[j].norm()) ** 2).sum()) for j in range(5)]
        logits = [-d / tau for d in dists]
        top = max(logits)
        total += -(logits[i] - (top + math.log(sum(math.exp(x - top) for x in logits))))
    assert math.isclose(float(euclidean_info_nce(a, b, tau)), total / 5, rel_tol=1e-5)


def test_an_outside_method_is_registered_trained_and_saved(tiny_bert_dir, sts_home, tmp_path, capsys):
    assert METHODS.get("test-euclidean-simcse") is EuclideanSimCSE
    corpus = write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    code, _, err = run_cli(["train", "--method", "test-euclidean-simcse", f"model.backbone={tiny_bert_dir}",
                 f"data.corpus={corpus}", f"train.output_dir={out}", "train.batch_size=8", "train.max_steps=4",
                 "train.eval_every=2", "train.log_every=1", "model.max_length=16", "train.lr=1e-3"], capsys)
    assert code == 0, err
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    values = [r["euclidean_nce"] for r in logged if "euclidean_nce" in r]
    assert len(values) == 4 and all(math.isfinite(v) and v > 0 for v in values)
    assert (out / "best" / "cselab.json").is_file()
    # the config reference lists the outside method's options too
    code, out_text, _ = run_cli(["config", "show", "test-euclidean-simcse"], capsys)
    assert code == 0
    assert "method_options.loss_weights.euclidean_nce=1.0" in out_text
