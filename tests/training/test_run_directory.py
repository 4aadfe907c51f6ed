"""A run directory is new, a cselab run, or refused: a user's own files are never replaced."""

from __future__ import annotations

import pytest

from cselab.config.run_config import load_config
from cselab.errors import CselabError
from cselab.reporter import Reporter, reporting
from cselab.training.run_directory import LOCK_FILE, RUN_MARKER, RunDirectory, RunStart, write_config
from tests.helpers import run_cli, write_corpus

USER_CONFIG = b"# my own notes, not cselab's\nlr: 0.1\n\xc3\xa9\n"


def _train_args(model, corpus, out, *extra):
    return ["train", f"model.backbone={model}", f"data.corpus={corpus}", f"train.output_dir={out}",
            "train.batch_size=8", "train.max_steps=2", "train.eval_every=2", "model.max_length=16", *extra]


@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--resume"]])
def test_a_directory_holding_a_users_file_is_refused_and_the_file_kept(tiny_bert_dir, sts_home, tmp_path, capsys,
                                                                        extra):
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


def test_files_that_look_like_a_run_do_not_make_a_directory_cselabs(tmp_path):
    """Only the marker does: a user's config.yaml beside a results.json or a metrics.jsonl stays theirs."""
    out = tmp_path / "looks-like-a-run"
    out.mkdir()
    (out / "config.yaml").write_text("mine: 1\n")
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    (out / "results.json").write_text("{}\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(CselabError, match="did not write"), RunDirectory(out):
        pass
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_empty_existing_directory_is_taken(tmp_path):
    with RunDirectory(tmp_path):
        write_config(tmp_path, load_config(None, []))
    assert (tmp_path / RUN_MARKER).is_file()


def test_the_refusal_is_a_cselab_error_for_the_api(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CselabError, match="did not write"), RunDirectory(tmp_path):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


# -- opening a run: the policy (fresh / resume / overwrite), read and decided without a trainer ----------------------
def _config(out, *overrides):
    return load_config(None, [f"train.output_dir={out}", *overrides])


def _a_run(out, *, state=True, finished=False):
    """A run directory as a run leaves it: its configuration, a metrics line, best/, last/ (a saved state)."""
    out.mkdir(parents=True)
    write_config(out, _config(out))
    (out / "metrics.jsonl").write_text('{"step": 2, "loss": 1.0}\n')
    (out / "best").mkdir()
    if state:
        (out / "last").mkdir()
    if finished:
        (out / "summary.json").write_text("{}\n")
    return out


@pytest.mark.parametrize(("options", "message"), [
    ({"resume": True, "overwrite": True}, "give --resume or --overwrite, not both"),
    ({"allow_change": ("train.max_steps",)}, "--allow-change only applies with --resume"),
    ({"resume": True, "allow_change": ("train.lr",)}, "--allow-change train.lr: only train.max_steps"),
])
def test_contradicting_options_are_refused_before_the_directory_is_touched(tmp_path, options, message):
    from cselab.errors import UsageError

    out = tmp_path / "run"
    with pytest.raises(UsageError, match=message), RunDirectory.open(_config(out), **options):
        pass
    assert not out.exists()  # no lock, no directory


def test_a_new_directory_starts_fresh_and_the_lock_goes_with_the_block(tmp_path):
    out = tmp_path / "run"
    with RunDirectory.open(_config(out)) as run:
        assert (out / LOCK_FILE).is_file()
        assert run.start() == RunStart(None, {})
    assert not out.exists()


def test_a_directory_holding_a_run_is_refused_without_resume_or_overwrite(tmp_path):
    out = _a_run(tmp_path / "run")
    with pytest.raises(CselabError, match="already holds a run; pass --resume to continue it, --overwrite"), \
            RunDirectory.open(_config(out)) as run:
        run.start()
    assert (out / "last").is_dir() and (out / "metrics.jsonl").is_file()


def test_overwrite_clears_an_unfinished_run_and_refuses_a_finished_one(tmp_path):
    out = _a_run(tmp_path / "run")
    (out / "tensorboard").mkdir()
    with RunDirectory.open(_config(out), overwrite=True) as run:
        assert run.start() == RunStart(None, {})
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER]
    done = _a_run(tmp_path / "done", finished=True)
    with pytest.raises(CselabError, match="--overwrite: .* holds a finished run; delete it yourself"), \
            RunDirectory.open(_config(done), overwrite=True) as run:
        run.start()
    assert (done / "summary.json").is_file() and (done / "last").is_dir()


def test_resume_continues_the_saved_state_and_refuses_a_changed_configuration(tmp_path):
    out = _a_run(tmp_path / "run")
    with RunDirectory.open(_config(out, "train.device=cpu"), resume=True) as run:  # a runtime key may differ
        assert run.start() == RunStart(out / "last", {})
    with pytest.raises(CselabError, match=r"\(train.max_steps: None -> 9\); to change it pass --allow-change"), \
            RunDirectory.open(_config(out, "train.max_steps=9"), resume=True) as run:
        run.start()
    with RunDirectory.open(_config(out, "train.max_steps=9"), resume=True, allow_change=["train.max_steps"]) as run:
        assert run.start() == RunStart(out / "last", {"train.max_steps": (None, 9)})


def test_resume_without_a_saved_state_starts_again_and_says_so(tmp_path):
    out = _a_run(tmp_path / "run", state=False)  # killed before its first save
    said = []
    with RunDirectory.open(_config(out), resume=True) as run, reporting(Reporter(lines=said.append)):
        assert run.start() == RunStart(None, {})
    assert said == [f"--resume: {out} holds no saved state yet; starting the run from step 0"]
    assert not (out / "best").exists() and not (out / "metrics.jsonl").exists()
    done = _a_run(tmp_path / "done", state=False, finished=True)
    with pytest.raises(CselabError, match="--resume: .* holds a finished run but no saved state"), \
            RunDirectory.open(_config(done), resume=True) as run:
        run.start()


def test_a_checkpoint_swap_cut_by_a_kill_is_undone_before_the_run_starts(tmp_path):
    out = _a_run(tmp_path / "run", state=False)
    (out / "last.old").mkdir()  # killed between the renames: the old state set aside, the new one not in place
    (out / "last.tmp").mkdir()
    (out / "best").rename(out / "best.old")
    with RunDirectory.open(_config(out), resume=True) as run:
        assert run.start() == RunStart(out / "last", {})
    assert sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE) == [
        RUN_MARKER, "best", "config.yaml", "last", "metrics.jsonl"]


def test_another_rank_reads_its_own_state_and_changes_no_file(tmp_path):
    out = _a_run(tmp_path / "run", state=False)
    (out / "last-rank1").mkdir()
    with RunDirectory.open(_config(out), resume=True) as run:
        assert run.start(rank=1) == RunStart(out / "last-rank1", {})
    with RunDirectory.open(_config(out), overwrite=True) as run:
        assert run.start(rank=1) == RunStart(None, {})
    assert (out / "best").is_dir() and (out / "metrics.jsonl").is_file()  # rank 0 clears, not rank 1


def test_cselab_train_checks_its_options_once_and_takes_the_lock_once(tiny_bert_dir, sts_home, tmp_path, capsys,
                                                                       monkeypatch):
    """The CLI opens the run (before torch loads) and hands it down: neither the recorded run nor the trainer
    opens it again."""
    from cselab import fileio
    from cselab.training import run_directory

    checks, locks = [], []
    real_check, real_acquire = run_directory.check_run_options, fileio.DirectoryLock.acquire
    monkeypatch.setattr(run_directory, "check_run_options", lambda *a: checks.append(a) or real_check(*a))
    monkeypatch.setattr(fileio.DirectoryLock, "acquire",
                        lambda self: locks.append(self.directory) or real_acquire(self))
    out = tmp_path / "run"
    code, _, err = run_cli(_train_args(tiny_bert_dir, write_corpus(tmp_path / "corpus.txt"), out), capsys)
    assert code == 0, err
    assert checks == [(False, False, ())]
    assert locks == [out]
    code, _, err = run_cli(_train_args(tiny_bert_dir, tmp_path / "corpus.txt", out, "--resume"), capsys)
    assert code == 0 and "already recorded" in _ + err
    assert checks[1:] == [(True, False, ())] and locks[1:] == [out]
