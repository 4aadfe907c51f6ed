"""Run by test_distributed.py under torchrun (or alone): one SimCSE step, dump loss and gradients."""

import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from cselab.training.config import load_config
from cselab.training.trainer import Trainer


def main(model_dir: str, corpus: str, out: str) -> None:
    config = load_config(None, [
        f"model.backbone={model_dir}", f"data.corpus={corpus}", f"train.output_dir={out}/run",
        "train.batch_size=16", "model.dropout=0.0", "model.max_length=16", "train.seed=3",
    ])
    trainer = Trainer(config, progress=False)
    batch = trainer.batch_at(0)
    terms = trainer.method.loss_terms(batch, trainer._context())
    loss = trainer.method.weighted_loss(terms)
    loss.backward()
    trainer.dist.sum_gradients(trainer.method)
    grads = {name: p.grad.contiguous() for name, p in trainer.method.named_parameters() if p.grad is not None}
    grads["__loss__"] = loss.detach().reshape(1)
    grads["__local_batch__"] = torch.tensor([batch["input_ids"].shape[0]])
    save_file(grads, str(Path(out) / f"grads_rank{trainer.dist.rank}_of{trainer.dist.world_size}.safetensors"))
    trainer.dist.barrier()
    trainer.dist.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
