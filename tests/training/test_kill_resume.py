"""Kills at every step of a checkpoint swap, concurrent runs, and the books of a resumed run (issues 14, 17).

A tiny training (6 steps, a save every 2) is SIGKILLed in a subprocess at chosen points of the directory swap
(``CSELAB_TEST_KILL_AT``, see ``cselab.fileio``), including between its two renames, where neither ``last``
nor ``best`` is under its own name. ``--resume`` must then finish the run with weights bit-identical to an
uninterrupted run and the same metrics log (no step logged twice).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cselab.cli import main
from cselab.fileio import KILL_HOOK_ENV, LOCK_FILE, SWAP_POINTS
from tests.helpers import write_corpus, write_sts_home

STEPS = 6


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_bert_dir) -> Path:
    w = tmp_path_factory.mktemp("kill-world")
    write_sts_home(w / "home")
    write_corpus(w / "corpus.txt", n=60)
    (w / "config.yaml").write_text(
        f"model: {{backbone: {tiny_bert_dir}, max_length: 16, eval_max_length: 32, dropout: 0.1}}\n"
        f"data: {{corpus: {w / 'corpus.txt'}}}\n"
        f"train: {{batch_size: 4, max_steps: {STEPS}, eval_every: 2, threads: 1, eval_batch_size: 16, lr: 1.0e-3,"
        " log_every: 1}\n")
    return w


def cli(world: Path, out: Path, *extra: str, capsys=None) -> tuple[int, str]:
    """``cselab train`` in this process; returns (exit status, stderr)."""
    previous = os.environ.get("CSELAB_HOME")
    os.environ["CSELAB_HOME"] = str(world / "home")
    try:
        main(["train", "--config", str(world / "config.yaml"), f"train.output_dir={out}", *extra])
        code = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        if previous is None:
            os.environ.pop("CSELAB_HOME")
        else:
            os.environ["CSELAB_HOME"] = previous
    err = capsys.readouterr().err if capsys is not None else ""
    return code, err


def spawn(world: Path, out: Path, *extra: str, kill_at: str | None = None) -> subprocess.Popen:
    env = dict(os.environ, CSELAB_HOME=str(world / "home"), OMP_NUM_THREADS="1")
    env.pop(KILL_HOOK_ENV, None)
    if kill_at:
        env[KILL_HOOK_ENV] = kill_at
    command = [sys.executable, "-m", "cselab.cli", "train", "--config", str(world / "config.yaml"),
               f"train.output_dir={out}", *extra]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def metrics(out: Path) -> list[dict]:
    """The metrics log without its timing column (the only value that differs between processes)."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "sent_per_s"} for row in rows]


def assert_same_weights(a: Path, b: Path) -> None:
    x, y = load_file(str(a)), load_file(str(b))
    assert x.keys() == y.keys()
    for key in x:
        assert torch.equal(x[key], y[key]), key


@pytest.fixture(scope="module")
def reference(world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "run"
    code, _ = cli(world, out)
    assert code == 0
    return out


def check_resumed_run(world: Path, reference: Path, out: Path, capsys) -> None:
    """``--resume`` after a kill finishes the run exactly as the uninterrupted reference did."""
    saved_wall = None
    if (out / "last" / "trainer_state.json").is_file():
        saved_wall = json.loads((out / "last" / "trainer_state.json").read_text())["wall_seconds"]
    code, err = cli(world, out, "--resume", capsys=capsys)
    assert code == 0, err
    assert_same_weights(out / "last" / "method.safetensors", reference / "last" / "method.safetensors")
    assert_same_weights(out / "best" / "model.safetensors", reference / "best" / "model.safetensors")
    assert metrics(out) == metrics(reference)  # no step logged twice, none missing
    leftovers = {p.name for p in out.iterdir()} - {p.name for p in reference.iterdir()}
    assert not leftovers, leftovers  # no .old/.tmp/lock left behind
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == STEPS
    if saved_wall is not None:  # the killed process's time counts too
        assert summary["wall_s"] > saved_wall > 0


def in_window(out: Path) -> bool:
    """Killed between the two renames: a checkpoint exists only as ``.old`` and ``.tmp``."""
    names = {p.name for p in out.iterdir()}
    return any(f"{d}.old" in names and f"{d}.tmp" in names and d not in names for d in ("last", "best"))


# one real SIGKILL inside each step of a swap: new copy written / old one moved aside / new one installed
@pytest.mark.parametrize("kill_at", ["swap-written:3", "swap-moved-aside:1", "swap-installed:2"])
def test_sigkill_inside_a_checkpoint_swap_then_resume_is_bit_identical(kill_at, world, reference, tmp_path, capsys):
    out = tmp_path / "run"
    process = spawn(world, out, kill_at=kill_at)
    _, err = process.communicate(timeout=300)
    assert process.returncode == -9, f"the kill point {kill_at} was not reached: {err[-2000:]}"
    assert in_window(out) == kill_at.startswith("swap-moved-aside")
    assert (out / LOCK_FILE).exists()  # the killed process's lock stays; the resume takes it over as stale
    check_resumed_run(world, reference, out, capsys)


class SimulatedKill(BaseException):
    """Stands in for SIGKILL in this process: no ``except Exception`` catches it, and nothing after it runs."""


@pytest.mark.parametrize("point", SWAP_POINTS)
def test_kill_at_every_swap_of_a_run_then_resume_is_bit_identical(point, world, reference, tmp_path, capsys,
                                                                   monkeypatch):
    # every occurrence of the point in the run, each a fresh run killed there (in-process, for speed; the
    # real SIGKILL test above shows a killed process leaves the same files)
    import cselab.fileio as fileio

    occurrence = 0
    while True:
        occurrence += 1
        seen = {"n": 0}

        def kill_point(name: str, occurrence=occurrence, seen=seen) -> None:
            if name == point:
                seen["n"] += 1
                if seen["n"] == occurrence:
                    raise SimulatedKill

        monkeypatch.setattr(fileio, "_kill_point", kill_point)
        out = tmp_path / f"run-{occurrence}"
        try:
            cli(world, out)
        except SimulatedKill:
            pass
        else:
            break  # the run has fewer occurrences: all were killed at
        finally:
            monkeypatch.setattr(fileio, "_kill_point", lambda name: None)
        assert in_window(out) == (point == "swap-moved-aside")
        if occurrence == 1 and point != "swap-moved-aside":
            assert not (out / "last").exists()  # killed before the first save: --resume starts over
        check_resumed_run(world, reference, out, capsys)
    assert occurrence > 2, f"{point} was reached only {occurrence - 1} times"  # last/ alone is swapped twice


def test_a_run_killed_before_its_first_save_resumes_from_the_start(world, reference, tmp_path, capsys):
    out = tmp_path / "run"
    process = spawn(world, out, kill_at="swap-installed:1")  # best/ of step 0 is in place, last/ never written
    process.communicate(timeout=300)
    assert process.returncode == -9 and (out / "best").is_dir() and not (out / "last").exists()
    code, err = cli(world, out, capsys=capsys)
    assert code == 2 and "--overwrite" in err  # neither silently reused nor stuck
    code, err = cli(world, out, "--overwrite", capsys=capsys)
    assert code == 0, err
    assert_same_weights(out / "last" / "method.safetensors", reference / "last" / "method.safetensors")


def test_second_concurrent_run_into_one_directory_is_refused_and_the_first_is_untouched(world, reference, tmp_path,
                                                                                           capsys):
    out = tmp_path / "run"
    first = spawn(world, out)
    deadline = time.time() + 120
    while not (out / LOCK_FILE).exists():
        assert first.poll() is None and time.time() < deadline, "the first run never took its lock"
        time.sleep(0.02)
    holder = json.loads((out / LOCK_FILE).read_text())
    assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()
    started = time.time()
    code, err = cli(world, out, "train.lr=0.5", capsys=capsys)
    assert time.time() - started < 5, "the second run was not refused at once"
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {out} is in use by a training run (pid {first.pid} on ")
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err[-2000:]
    assert "lr: 0.001" in (out / "config.yaml").read_text()  # the first run's configuration, not the second's
    assert metrics(out) == metrics(reference)
    assert_same_weights(out / "last" / "method.safetensors", reference / "last" / "method.safetensors")
    assert not (out / LOCK_FILE).exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(world, tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": 0}))
    code, err = cli(world, out, "train.max_steps=2", capsys=capsys)
    assert code == 0, err
    assert not (out / LOCK_FILE).exists()


def interrupt_at(step: int, monkeypatch) -> None:
    """Ctrl-C (KeyboardInterrupt) just before the training step ``step`` of the next run in this process."""
    from cselab.training.trainer import Trainer

    real_step = Trainer.train_step

    def step_or_ctrl_c(self, batch):
        if self.state.step == step:
            monkeypatch.setattr(Trainer, "train_step", real_step)
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", step_or_ctrl_c)


def test_interrupt_says_what_was_kept_and_resume_finishes(world, reference, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    interrupt_at(3, monkeypatch)
    code, err = cli(world, out, capsys=capsys)
    assert code == 130
    assert f"interrupted at step 3: the state of step 2 is kept in {out / 'last'}" in err and "--resume" in err
    assert not (out / LOCK_FILE).exists()
    code, err = cli(world, out, "--resume", capsys=capsys)
    assert code == 0, err
    assert_same_weights(out / "last" / "method.safetensors", reference / "last" / "method.safetensors")
    assert metrics(out) == metrics(reference)


def test_resume_of_a_recorded_run_does_not_record_it_again(world, tmp_path, capsys):
    out, results = tmp_path / "run", tmp_path / "results.jsonl"
    code, err = cli(world, out, "train.max_steps=2", "--results", str(results), capsys=capsys)
    assert code == 0, err
    record = results.read_text()
    for _ in range(2):
        code, err = cli(world, out, "train.max_steps=2", "--resume", "--results", str(results), capsys=capsys)
        assert code == 0, err
    assert results.read_text() == record and len(record.splitlines()) == 1


def test_allowed_change_on_resume_runs_and_is_recorded(world, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    interrupt_at(3, monkeypatch)
    assert cli(world, out, capsys=capsys)[0] == 130
    code, err = cli(world, out, "train.max_steps=4", "--resume", capsys=capsys)
    assert code == 2 and "(train.max_steps: 6 -> 4); to change it pass --allow-change train.max_steps" in err
    code, err = cli(world, out, "train.max_steps=4", "--resume", "--allow-change", "train.max_steps", capsys=capsys)
    assert code == 0, err
    assert json.loads((out / "summary.json").read_text())["steps"] == 4
    assert "max_steps: 4" in (out / "config.yaml").read_text()
    assert {"step": 2, "config_change": {"train.max_steps": [6, 4]}} in metrics(out)  # from where it applies


def test_eval_outputs_are_named_after_the_model_not_its_leaf(tmp_path, monkeypatch):
    from cselab.evaluation.model_eval import default_output

    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    a, b = tmp_path / "run-a" / "best", tmp_path / "run-b" / "best"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    names = [default_output(str(p), "cls").name for p in (a, b)]
    assert names[0] != names[1]
    expected = f"run-a-best-{hashlib.sha1(str(a.resolve()).encode()).hexdigest()[:8]}-cls.json"
    assert names[0] == expected
    assert default_output("all-MiniLM-L6-v2", None).name == "all-MiniLM-L6-v2-default.json"
