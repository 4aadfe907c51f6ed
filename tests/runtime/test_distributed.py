"""Data parallel on PyTorch's DDP: 2 CPU processes (gloo, torchrun) with 2x8 examples == one process with 16,
for every method family (single encoder, twins, IFCL with its queue), with and without gradient caching;
every collective receives tensors on the model's device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cselab.runtime.distributed import DistributedContext
from tests.helpers import WORDS, build_tiny_model_dir, write_corpus

WORKER = Path(__file__).with_name("distributed_worker.py")


def test_single_process_gather_is_identity():
    x = torch.randn(3, 2, requires_grad=True)
    assert DistributedContext().gather(x) is x


class _Recorded(Exception):
    pass


def test_collectives_use_the_context_device(monkeypatch):
    """On a 'meta' model device (no GPU here) every tensor handed to a collective must be on that device: the
    old CPU flag (NCCL: 'No backend type associated with device type cpu') fails this test."""
    import torch.distributed as dist

    seen = []

    def fake_all_gather(parts, tensor):
        seen.append(("all_gather", tensor.device, {p.device for p in parts}))

    def fake_broadcast(tensor, src):
        seen.append(("broadcast", tensor.device, {tensor.device}))
        raise _Recorded  # a meta tensor has no value to read back; the placement is what is checked

    monkeypatch.setattr(dist, "all_gather", fake_all_gather)
    monkeypatch.setattr(dist, "broadcast", fake_broadcast)
    meta = torch.device("meta")
    ctx = DistributedContext(rank=1, world_size=2, device=meta)
    local = torch.empty(3, 4, device=meta)
    out = ctx.gather(local)
    assert out.shape == (6, 4) and out.device == meta
    with pytest.raises(_Recorded):
        ctx.broadcast_flag(True)
    assert [op for op, _, _ in seen] == ["all_gather", "broadcast"]
    assert all(device == meta and others == {meta} for _, device, others in seen)


@pytest.fixture(scope="module")
def family_runs(tmp_path_factory):
    """One single-process run and one 2-process torchrun over the same cases (one launch each: ~2x10 s)."""
    root = tmp_path_factory.mktemp("ddp")
    bert = build_tiny_model_dir(root / "bert", "bert", seed=0)
    bert2 = build_tiny_model_dir(root / "bert2", "bert", seed=1)
    corpus = write_corpus(root / "corpus.txt", n=64)
    english = corpus.read_text().splitlines()
    german = [" ".join(reversed(line.split())) for line in english]  # any aligned second side will do
    (root / "de.txt").write_text("\n".join(german) + "\n")
    assert set(WORDS) >= {w for line in german for w in line.split()}
    common = ["train.batch_size=16", "model.dropout=0.0", "model.max_length=16", "train.seed=3",
              "train.eval_at_start=false"]
    simcse = [f"model.backbone={bert}", f"data.corpus={corpus}", *common]
    twin = [f"data.corpus={corpus}", f"method_options.encoder_1={bert}", f"method_options.encoder_2={bert2}",
            "method_options.allow_backbone_pooler=true", *common]
    cases = {
        "simcse": simcse,
        "simcse_cached": [*simcse, "train.chunk_size=4"],
        "simcsepp": ["method=simcse++", *simcse],
        "tncse": ["method=tncse", *twin],
        "jtcse": ["method=jtcse", "method_options.num_ca_layers=1", *twin],
        "jtcse_cached": ["method=jtcse", "method_options.num_ca_layers=1", "train.chunk_size=3", *twin],
        "ifcl": ["method=ifcl", f"model.backbone={bert}", f"method_options.parallel.source={corpus}",
                 f"method_options.parallel.target={root / 'de.txt'}", "method_options.queue_size=32", *common],
    }
    cases_file = root / "cases.json"
    cases_file.write_text(json.dumps(cases))
    out = root / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", CSELAB_RECORD_COLLECTIVES="1")
    single = subprocess.run([sys.executable, str(WORKER), str(cases_file), str(out)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    # `python -m torch.distributed.run` is the torchrun launcher, independent of PATH
    multi = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                            str(WORKER), str(cases_file), str(out)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert multi.returncode == 0, multi.stderr[-3000:]
    return out


def _load(out, name, rank, world):
    return load_file(out / f"{name}_rank{rank}_of{world}.safetensors")


@pytest.mark.parametrize("name, reference", [
    ("simcse", "simcse"), ("simcse_cached", "simcse"), ("simcsepp", "simcsepp"), ("tncse", "tncse"),
    ("jtcse", "jtcse"), ("jtcse_cached", "jtcse"), ("ifcl", "ifcl"),
])
def test_two_ranks_match_one_process(family_runs, name, reference):
    """Each rank's gradient after DDP == the one-process gradient of the global batch of 16 (the plain step)."""
    one = _load(family_runs, reference, 0, 1)
    ranks = [_load(family_runs, name, r, 2) for r in (0, 1)]
    assert int(one["__local_batch__"]) == 16 and all(int(r["__local_batch__"]) == 8 for r in ranks)
    for rank in ranks:
        assert torch.allclose(rank["__loss__"], one["__loss__"], atol=1e-5)
        assert rank.keys() == one.keys()
        for key in one:
            if not key.startswith("__"):
                assert torch.allclose(rank[key], one[key], atol=1e-5, rtol=1e-4), key
    # the gradient is not trivially zero, so the comparison means something
    assert max(float(g.abs().max()) for n, g in one.items() if not n.startswith("__")) > 1e-4


def test_ifcl_queue_holds_the_global_anchors_on_every_rank(family_runs):
    one = _load(family_runs, "ifcl", 0, 1)["__queue__"]
    ranks = [_load(family_runs, "ifcl", r, 2)["__queue__"] for r in (0, 1)]
    assert one.shape == (16, 32)  # the 16 anchors of the global batch (queue capacity 32, hidden size 32)
    assert torch.equal(ranks[0], ranks[1])  # identical, bit for bit, on both ranks
    assert torch.allclose(ranks[0], one, atol=1e-5)  # and the single process's anchors, in the same order


def test_every_collective_is_on_the_model_device(family_runs):
    for rank in (0, 1):
        calls = json.loads((family_runs / f"collectives_rank{rank}_of2.json").read_text())
        ops = {c["op"] for c in calls}
        assert {"all_gather", "broadcast"} <= ops, ops  # the recorder saw the gathers and the dev-eval flag
        wrong = [c for c in calls if c["devices"] != [c["model"]]]
        assert not wrong, wrong[:3]
