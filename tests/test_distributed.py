"""Data parallel: 2 CPU processes (gloo, torchrun) with 2x8 sentences == one process with 16 sentences."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from conftest import write_corpus
from cselab.training.distributed import DistributedContext

WORKER = Path(__file__).with_name("distributed_worker.py")


def test_single_process_gather_is_identity():
    x = torch.randn(3, 2, requires_grad=True)
    assert DistributedContext().gather(x) is x


def test_two_ranks_match_one_process(tiny_bert_dir, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n=64)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    single = subprocess.run([sys.executable, str(WORKER), str(tiny_bert_dir), str(corpus), str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr
    # `python -m torch.distributed.run` is the torchrun launcher, independent of PATH
    multi = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(WORKER), str(tiny_bert_dir),
                            str(corpus), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)
    assert multi.returncode == 0, multi.stderr[-3000:]
    one = load_file(tmp_path / "grads_rank0_of1.safetensors")
    ranks = [load_file(tmp_path / f"grads_rank{r}_of2.safetensors") for r in (0, 1)]
    assert int(one["__local_batch__"]) == 16 and all(int(r["__local_batch__"]) == 8 for r in ranks)
    for rank in ranks:
        assert torch.allclose(rank["__loss__"], one["__loss__"], atol=1e-5)
        assert rank.keys() == one.keys()
        for name in one:
            if not name.startswith("__"):
                assert torch.allclose(rank[name], one[name], atol=1e-5, rtol=1e-4), name
    # the gradient is not trivially zero, so the comparison means something
    assert max(float(g.abs().max()) for n, g in one.items() if not n.startswith("__")) > 1e-4
