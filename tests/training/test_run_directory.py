"""A run directory is new, a cselab run, or refused: a user's own files are never replaced."""

from __future__ import annotations

import pytest

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.training.run_directory import LOCK_FILE, RUN_MARKER, RunDirectory, write_config
from tests.helpers import run_cli, write_corpus

USER_CONFIG = b"# my own notes, not cselab's\nlr: 0.1\n\xc3\xa9\n"


def _train_args(model, corpus, out, *extra):
    return ["train", f"model.backbone={model}", f"data.corpus={corpus}", f"train.output_dir={out}",
            "train.batch_size=8", "train.max_steps=2", "train.eval_every=2", "model.max_length=16", *extra]


@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--resume"]])
def test_a_directory_holding_a_users_file_is_refused_and_the_file_kept(tiny_bert_dir, sts_home, tmp_path, capsys, extra):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.yaml").write_bytes(USER_CONFIG)
    corpus = write_corpus(tmp_path / "corpus.txt")
    code, _, err = run_cli(_train_args(tiny_bert_dir, corpus, out, *extra), capsys)
    err = err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: ") and "did not write" in err[0]
    assert (out / "config.yaml").read_bytes() == USER_CONFIG
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml"]  # no marker, no lock left behind


def test_a_new_directory_is_marked_by_its_first_file_and_reopened(tmp_path):
    out = tmp_path / "run"
    with RunDirectory(out):
        assert (out / LOCK_FILE).is_file()
    assert not out.exists()  # opened and left without writing: nothing stays behind
    with RunDirectory(out):
        write_config(out, load_config(None, []))
    assert (out / RUN_MARKER).is_file()
    (out / "anything-cselab-wrote.txt").write_text("x")
    with RunDirectory(out):  # the marker makes it cselab's
        pass


def test_a_run_made_before_the_marker_is_still_cselabs(tmp_path):
    out = tmp_path / "old-run"
    out.mkdir()
    (out / "config.yaml").write_text("method: simcse\n")
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    with RunDirectory(out):
        pass


def test_an_empty_existing_directory_is_taken(tmp_path):
    with RunDirectory(tmp_path):
        write_config(tmp_path, load_config(None, []))
    assert (tmp_path / RUN_MARKER).is_file()


def test_the_refusal_is_a_cselab_error_for_the_api(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CselabError, match="did not write"), RunDirectory(tmp_path):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
