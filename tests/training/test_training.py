"""The training loop end to end on tiny random BERT/RoBERTa: runs, selects on dev, saves, resumes exactly."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from cselab.config.run_config import load_config
from cselab.models.sentence_model import load_model
from cselab.reporter import QUIET, console, report, reporting
from cselab.runtime.distributed import DistributedContext
from cselab.runtime.precision import autocast_context
from cselab.training.trainer import Trainer
from tests.helpers import write_corpus


def tiny_config(model_dir, corpus, out, *extra):
    return load_config(None, [
        f"model.backbone={model_dir}", f"data.corpus={corpus}", f"train.output_dir={out}",
        "train.batch_size=8", "train.max_steps=6", "train.eval_every=3", "train.lr=1e-3", "train.log_every=2",
        "model.max_length=16", *extra,
    ])


def test_whole_loop_trains_selects_and_saves(tiny_model_dir, sts_home, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = tiny_config(tiny_model_dir, corpus, tmp_path / "run")
    trainer = Trainer(config)
    before = {k: v.clone() for k, v in trainer.method.encoder.backbone.state_dict().items()}
    result = trainer.run()
    assert result.steps == 6 and result.best_step in (0, 3, 6)
    after = trainer.method.encoder.backbone.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "training changed no weight"
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "dev" in r] == [0, 3, 6]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in log if "loss" in r)
    best = load_model(tmp_path / "run" / "best")
    assert best.head is not None, "the train-only MLP must be saved with the checkpoint"
    meta = json.loads((tmp_path / "run" / "best" / "cselab.json").read_text())["training"]
    assert meta["step"] == result.best_step and meta["dev_score"] == pytest.approx(result.best_dev)



def test_the_trainer_prints_nothing_unless_its_caller_put_a_reporter_in_effect(tiny_bert_dir, sts_home, tmp_path,
                                                                                capsys):
    corpus = write_corpus(tmp_path / "corpus.txt")
    Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "a", "train.max_steps=2")).run()
    assert capsys.readouterr() == ("", "")  # no bar, no line: the default reporter is quiet
    with reporting(console()):
        Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "b", "train.max_steps=2")).run()
    out, err = capsys.readouterr()
    assert out == "" and "train simcse" in err and "2/2" in err and "encode" not in err  # dev scoring: no bar
    # the other ranks of a distributed run say nothing and show no bar, whatever their caller put in effect
    trainer = Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "c", "train.max_steps=2"))
    trainer.dist = DistributedContext(rank=1, world_size=2)
    with reporting(console()), trainer._rank_reporting():
        assert report() is QUIET

def test_bf16_step_runs_and_losses_are_fp32(tiny_bert_dir, sts_home, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = tiny_config(tiny_bert_dir, corpus, tmp_path / "run", "train.precision=bf16")
    trainer = Trainer(config)
    ctx = trainer._context()
    with autocast_context(config.train.precision, trainer.device):
        # matmuls really run in bf16 under the trainer's context (the MLP head's Linear output; LayerNorm
        # outputs stay fp32 under autocast), and the loss still comes out fp32
        assert trainer.method.encoder(trainer.batch_at(0), apply_head=True).dtype == torch.bfloat16
        terms = trainer.method.loss_terms(trainer.batch_at(0), ctx)
    assert terms["info_nce"].dtype == torch.float32
    assert torch.isfinite(torch.as_tensor(trainer.train_step(trainer.batch_at(1))["loss"]))


def test_training_time_counts_steps_and_queued_work_not_evaluation(tiny_bert_dir, sts_home, tmp_path, monkeypatch):
    # every step is made to take >= 0.05 s and every evaluation 0.3 s, and the device sync before each of the
    # 2 evaluation/save points (steps 3 and 6) waits 0.1 s, standing in for a GPU's queued kernels: the
    # recorded training time must hold the 6 steps and both waits (>= 0.5 s) and none of the 3 evaluations
    # (0.9 s: steps 0, 3, 6)
    import cselab.training.trainer as trainer_module

    corpus = write_corpus(tmp_path / "corpus.txt")
    trainer = Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "run"))
    real_step, real_eval = trainer.train_step, trainer._eval_and_select
    syncs = []

    def queued_work(device):
        syncs.append(trainer.state.step)
        time.sleep(0.1)

    def slow_step(batch):
        time.sleep(0.05)
        return real_step(batch)

    def slow_eval():
        time.sleep(0.3)
        return real_eval()

    monkeypatch.setattr(trainer, "train_step", slow_step)
    monkeypatch.setattr(trainer, "_eval_and_select", slow_eval)
    monkeypatch.setattr(trainer_module, "synchronize", queued_work)
    started = time.perf_counter()
    result = trainer.run()
    elapsed = time.perf_counter() - started
    assert syncs == [3, 6]
    seconds = 6 * 8 / result.train_sentences_per_s
    assert seconds >= 0.5 and seconds <= elapsed - 0.9
    assert trainer.state.train_seconds == pytest.approx(seconds)


def test_existing_run_is_not_overwritten(tiny_bert_dir, sts_home, tmp_path):
    from cselab.errors import CselabError

    corpus = write_corpus(tmp_path / "corpus.txt")
    Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "run", "train.max_steps=2")).run()
    with pytest.raises(CselabError, match="already holds a run"):
        Trainer(tiny_config(tiny_bert_dir, corpus, tmp_path / "run", "train.max_steps=2")).run()


def _train_cli(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "cselab.cli", "train", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_killed_run_resumes_to_identical_weights(tiny_bert_dir, sts_home, tmp_path):
    """40 steps straight == a run SIGKILLed after step 20 and resumed with --resume."""
    corpus = write_corpus(tmp_path / "corpus.txt", n=400)
    env = dict(os.environ, CSELAB_HOME=str(sts_home))
    common = [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=8", "train.max_steps=40",
              "train.eval_every=10", "train.save_every=5", "train.lr=5e-4", "model.max_length=16", "train.log_every=1"]
    straight = _train_cli([*common, f"train.output_dir={tmp_path / 'a'}"], env)
    assert straight.wait(timeout=300) == 0, straight.stderr.read()
    killed = _train_cli([*common, f"train.output_dir={tmp_path / 'b'}"], env)
    # kill b as soon as its saved state has reached step 20
    state_file = tmp_path / "b" / "last" / "trainer_state.json"
    deadline = time.time() + 300
    while time.time() < deadline and killed.poll() is None:
        try:
            saved_step = json.loads(state_file.read_text())["step"]
        except (OSError, ValueError, KeyError):
            saved_step = 0
        if saved_step >= 20:
            killed.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    killed.wait(timeout=60)
    assert killed.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    state = json.loads((tmp_path / "b" / "last" / "trainer_state.json").read_text())
    assert 20 <= state["step"] < 40
    resumed = _train_cli([*common, f"train.output_dir={tmp_path / 'b'}", "--resume"], env)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    wa = load_file(tmp_path / "a" / "last" / "method.safetensors")
    wb = load_file(tmp_path / "b" / "last" / "method.safetensors")
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    sa = json.loads((tmp_path / "a" / "summary.json").read_text())
    sb = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert sa["best_dev"] == sb["best_dev"] and sa["best_step"] == sb["best_step"]


def test_tensorboard_logging(tiny_bert_dir, sts_home, tmp_path):
    pytest.importorskip("tensorboard")
    corpus = write_corpus(tmp_path / "corpus.txt")
    config = tiny_config(tiny_bert_dir, corpus, tmp_path / "run", "train.max_steps=2", "train.tensorboard=true",
                         "train.log_every=1")
    Trainer(config).run()
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
