"""Run by test_distributed.py under torchrun (or alone): per method family, one step's loss and gradients.

Arguments: a JSON file of cases ``{name: [overrides...]}`` and the output directory. For every case it builds
the trainer (rank layout from torchrun's environment), computes the gradients of step 0 through
``Trainer.compute_gradients`` (the path ``train_step`` takes) and saves them, the loss and, for IFCL, the
hippocampus queue after one whole step. With ``CSELAB_RECORD_COLLECTIVES=1`` every torch.distributed
collective called from Python is recorded with the devices of its tensors and the model's device.
"""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file

from cselab.config.run_config import load_config
from cselab.training.trainer import Trainer

CALLS: list[dict] = []
MODEL_DEVICE: list[str] = ["unset"]


def _record(name, original):
    def wrapper(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        for a in args:
            if isinstance(a, (list, tuple)):
                tensors += [t for t in a if isinstance(t, torch.Tensor)]
        CALLS.append({"op": name, "devices": sorted({str(t.device) for t in tensors}), "model": MODEL_DEVICE[0]})
        return original(*args, **kwargs)
    return wrapper


if os.environ.get("CSELAB_RECORD_COLLECTIVES") == "1":
    for op in ("all_gather", "all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor",
               "broadcast_object_list", "all_gather_object", "reduce", "gather", "scatter"):
        setattr(dist, op, _record(op, getattr(dist, op)))


def run_case(name: str, overrides: list[str], out: Path) -> None:
    config = load_config(None, [*overrides, f"train.output_dir={out}/{name}-run"])
    trainer = Trainer(config)
    MODEL_DEVICE[0] = str(next(trainer.method.parameters()).device)
    batch = trainer.batch_at(0)
    values = trainer.compute_gradients(batch)
    grads = {n: p.grad.contiguous() for n, p in trainer.method.named_parameters() if p.grad is not None}
    grads["__loss__"] = values["loss"].reshape(1)
    grads["__local_batch__"] = torch.tensor([trainer.local_batch])
    queue = getattr(trainer.method, "queue", None)
    if queue is not None:  # finish the step: the queue is filled after the optimizer step
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.method.after_step()
        grads["__queue__"] = queue.embeddings.contiguous()
    if trainer.dist.is_main:
        trainer.dist.broadcast_flag(True)  # the flag of a dev evaluation (placement under the recorder)
    else:
        trainer.dist.broadcast_flag(False)
    save_file(grads, str(out / f"{name}_rank{trainer.dist.rank}_of{trainer.dist.world_size}.safetensors"))
    trainer.dist.barrier()


def main(cases_file: str, out: str) -> None:
    cases = json.loads(Path(cases_file).read_text())
    for name, overrides in cases.items():
        run_case(name, overrides, Path(out))
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    (Path(out) / f"collectives_rank{rank}_of{world}.json").write_text(json.dumps(CALLS))
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
