"""The papers' own data (``cselab data fetch wiki1m | senteval | sickr | wiki1m-sickr``) fetched from a loopback HTTP
server started in the test: resumable downloads (a connection broken mid-file, a process killed mid-file), the
published size and line count, a 404, an unreachable server, ``--from DIR``, ``--verify`` and what is the user's.
Nothing reaches the internet: the base URL is ``$CSELAB_PAPERS_URL``, pointed at the loopback server."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from cselab.data.evalsets.sts import load_task
from cselab.data.papers import http_fetch
from cselab.data.papers import paper_data as paper_mod
from cselab.data.papers.paper_data import RemoteFile, fetch_paper, paper_path
from cselab.data.registry.download import DownloadError
from cselab.data.registry.fetch import fetch
from cselab.errors import CselabError
from tests.helpers import REPO_ROOT, run_cli

SENTEVAL_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "senteval"
WIKI_LINES = [f"sentence number {i} of the tiny wikipedia sample ." for i in range(300)]
WIKI = "".join(f"{line}\n" for line in WIKI_LINES).encode()


class LoopbackServer:
    """An HTTP server on 127.0.0.1 serving ``files`` (name -> bytes) with Range support and an ETag; it records each
    request's path and Range header. ``break_after[name] = n``: the next ``times[name]`` answers for that file send
    the headers of the whole answer and then only ``n`` bytes of the body before closing the connection.
    ``faults[name]``: every answer for that file is the fault :data:`FAULTS` names instead."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.requests: list[tuple[str, str | None]] = []
        self.break_after: dict[str, int] = {}
        self.times: dict[str, int] = {}
        self.faults: dict[str, str] = {}
        self.paths: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                name = self.path.rsplit("/", 1)[-1]
                server.requests.append((name, self.headers.get("Range")))
                server.paths.append(self.path)
                if name in server.faults:
                    self.answer_fault(server.faults[name], server.files.get(name, b""))
                    return
                if name not in server.files:
                    self.send_error(404, "Not Found")
                    return
                data = server.files[name]
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest()[:16] + '"')
                self.end_headers()
                if server.times.get(name, 0) > 0:
                    server.times[name] -= 1
                    self.wfile.write(body[: server.break_after[name]])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

            def answer_fault(self, fault: str, data: bytes) -> None:
                if fault.isdigit():
                    self.send_error(int(fault))
                    return
                if fault == "redirect-loop":
                    self.send_response(302)
                    self.send_header("Location", self.path)
                    self.end_headers()
                    return
                if fault == "html":
                    data = b"<!doctype html><html><body>Sign in to continue</body></html>\n"
                self.send_response(200)
                if fault == "short-length":  # the last 100 bytes left out, and the length says so
                    data = data[:-100]
                if fault != "no-length-early-close":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:len(data) // 3] if fault == "no-length-early-close" else data)
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/papers"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def cut(self, name: str, after: int, times: int = 1) -> None:
        self.break_after[name], self.times[name] = after, times

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _senteval_tar(prefix: str = "downstream/") -> bytes:
    """SentEval's fixture layout as a tar, under ``prefix`` (the real tar's folders above STS/ are not relied on),
    with a file of another task that must be left out."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for path in sorted(SENTEVAL_FIXTURE.rglob("*")):
            if path.is_file():
                tf.add(path, arcname=prefix + path.relative_to(SENTEVAL_FIXTURE).as_posix())
        other = b"a review\t1\n"
        info = tarfile.TarInfo(prefix + "MR/rt-polarity.pos")
        info.size = len(other)
        tf.addfile(info, io.BytesIO(other))
    return buf.getvalue()


def _independent_pair_counts() -> dict[str, int]:
    """Scored pairs per task of the fixture, counted from the raw files (non-empty gold lines; SICK rows)."""
    counts = {}
    for year in ("12", "13", "14", "15", "16"):
        folder = SENTEVAL_FIXTURE / "STS" / f"STS{year}-en-test"
        counts[f"sts{year}"] = sum(1 for gs in folder.glob("STS.gs.*.txt")
                                   for line in gs.read_text().splitlines() if line.strip())
    counts["stsb"] = sum(1 for line in (SENTEVAL_FIXTURE / "STS/STSBenchmark/sts-test.csv").read_text().splitlines()
                         if line.strip())
    counts["sickr"] = sum(1 for line in (SENTEVAL_FIXTURE / "SICK/SICK_test_annotated.txt").read_text().splitlines()[1:]
                          if line.strip())
    return counts


@pytest.fixture
def papers(monkeypatch, tmp_path):
    """A loopback server with Wiki1M and senteval.tar; the published counts patched to the fixtures'."""
    monkeypatch.setattr(paper_mod, "WIKI1M", RemoteFile("wiki1m_for_simcse.txt", lines=len(WIKI_LINES)))
    monkeypatch.setattr(paper_mod, "SENTEVAL_PAIRS", _independent_pair_counts())
    monkeypatch.setattr(http_fetch, "CHUNK", 64)  # several reads per file, so a cut lands mid-file
    with LoopbackServer({"wiki1m_for_simcse.txt": WIKI, "senteval.tar": _senteval_tar()}) as server:
        monkeypatch.setenv("CSELAB_PAPERS_URL", server.url)
        yield server


def _manifest(home: Path, target: str) -> dict:
    return json.loads((home / target / "manifest.json").read_text())


def test_wiki1m_resumes_a_connection_broken_mid_file(papers, tmp_path):
    papers.cut("wiki1m_for_simcse.txt", after=1000)
    home = tmp_path / "home"
    fetch("wiki1m", home=home)
    assert paper_path("wiki1m", home).read_bytes() == WIKI
    ranges = [r for name, r in papers.requests if name.endswith("wiki1m_for_simcse.txt")]
    assert ranges == [None, "bytes=1000-"]  # the second request continued where the first broke off
    manifest = _manifest(home, "wiki1m")
    assert manifest["files"]["wiki1m_for_simcse.txt"]["sha256"] == hashlib.sha256(WIKI).hexdigest()
    assert manifest["lines"] == 300
    assert not (home / ".downloads" / "wiki1m_for_simcse.txt").exists()  # not kept twice


def test_a_killed_download_resumes_on_the_next_call(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(http_fetch, "RETRIES", 0)  # the first call gives up at the first cut, like a killed process
    papers.cut("wiki1m_for_simcse.txt", after=2048)
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match="run the same command again to resume"):
        fetch("wiki1m", home=home)
    part = home / ".downloads" / "wiki1m_for_simcse.txt.part"
    assert part.read_bytes() == WIKI[:2048]
    assert not (home / "wiki1m").exists()
    fetch("wiki1m", home=home)
    assert paper_path("wiki1m", home).read_bytes() == WIKI
    assert papers.requests[-1] == ("wiki1m_for_simcse.txt", "bytes=2048-")
    assert not part.exists()


def test_a_changed_file_on_the_server_restarts_the_part(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(http_fetch, "RETRIES", 0)
    papers.cut("wiki1m_for_simcse.txt", after=500)
    home = tmp_path / "home"
    with pytest.raises(DownloadError):
        fetch("wiki1m", home=home)
    new = WIKI.replace(b"tiny", b"TINY")  # same size, other bytes: another ETag
    papers.files["wiki1m_for_simcse.txt"] = new
    fetch("wiki1m", home=home)
    assert paper_path("wiki1m", home).read_bytes() == new


def test_wrong_published_size_is_refused_before_the_body(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(paper_mod, "WIKI1M", RemoteFile("wiki1m_for_simcse.txt", bytes=len(WIKI) + 7, lines=300))
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match=rf"is {len(WIKI)} bytes, the published size is {len(WIKI) + 7}"):
        fetch("wiki1m", home=home)
    assert not (home / "wiki1m").exists()


def test_wrong_line_count_is_refused(papers, tmp_path, monkeypatch):
    monkeypatch.setattr(paper_mod, "WIKI1M", RemoteFile("wiki1m_for_simcse.txt", lines=1_000_000))
    home = tmp_path / "home"
    with pytest.raises(CselabError, match="has 300 lines, SimCSE published 1000000"):
        fetch("wiki1m", home=home)
    assert not (home / "wiki1m").exists()


def test_404_is_one_line_naming_the_url_and_from(papers, tmp_path, monkeypatch, capsys):
    papers.files.clear()
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    rc, out, err = run_cli(["data", "fetch", "wiki1m"], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert f"{papers.url}/wiki1m_for_simcse.txt" in lines[0] and "HTTP 404" in lines[0]
    assert "cselab data fetch wiki1m --from DIR" in lines[0]


def test_unreachable_server_is_one_line(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CSELAB_PAPERS_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(DownloadError, match=rf"cannot reach http://127.0.0.1:{port}/senteval.tar .*--from DIR") as exc:
        fetch("senteval", home=tmp_path / "home")
    assert exc.value.unreachable


def test_senteval_sickr_and_wiki1m_sickr(papers, tmp_path):
    home = tmp_path / "home"
    fetch("wiki1m-sickr", home=home)  # fetches wiki1m, senteval and sickr first
    senteval = paper_path("senteval", home)
    assert not (senteval / "MR").exists()  # only the seven tasks' folders
    for rel in ("STS/STS12-en-test/STS.input.MSRpar.txt", "SICK/SICK_test_annotated.txt",
                "STS/STSBenchmark/sts-test.csv"):
        assert (senteval / rel).read_bytes() == (SENTEVAL_FIXTURE / rel).read_bytes()
    expected = _independent_pair_counts()
    assert {t: load_task(t, "test", senteval_dir=senteval).size for t in expected} == expected
    assert _manifest(home, "senteval")["pairs"] == expected
    sick = []
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        for line in (SENTEVAL_FIXTURE / "SICK" / name).read_text().splitlines()[1:]:
            if line.strip():
                sick += line.split("\t")[1:3]
    sick = list(dict.fromkeys(" ".join(s.split()) for s in sick))
    assert paper_path("sickr", home).read_text().splitlines() == sick
    assert paper_path("wiki1m-sickr", home).read_text().splitlines() == WIKI_LINES + sick


def test_from_dir_needs_no_server(tmp_path, monkeypatch):
    monkeypatch.setattr(paper_mod, "WIKI1M", RemoteFile("wiki1m_for_simcse.txt", lines=300))
    monkeypatch.setenv("CSELAB_PAPERS_URL", "http://127.0.0.1:9")  # nothing is asked of it
    monkeypatch.setattr(paper_mod, "SENTEVAL_PAIRS", _independent_pair_counts())
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "wiki1m_for_simcse.txt").write_bytes(WIKI)
    home = tmp_path / "home"
    fetch("wiki1m", home=home, from_dir=hand)
    assert paper_path("wiki1m", home).read_bytes() == WIKI
    assert (hand / "wiki1m_for_simcse.txt").is_file()  # the user's file stays
    fetch("senteval", home=home, from_dir=SENTEVAL_FIXTURE)  # an extracted SentEval directory
    assert load_task("sts13", senteval_dir=paper_path("senteval", home)).size == _independent_pair_counts()["sts13"]
    with pytest.raises(CselabError, match="senteval.tar not found in"):
        fetch("senteval", home=tmp_path / "other", from_dir=hand)


def test_verify_names_a_damaged_file(papers, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    fetch("senteval", home=home)
    damaged = paper_path("senteval", home) / "STS/STS14-en-test/STS.gs.images.txt"
    damaged.write_bytes(damaged.read_bytes().replace(b"1", b"2", 1))
    monkeypatch.setenv("CSELAB_HOME", str(home))
    rc, _, err = run_cli(["data", "fetch", "senteval", "--verify"], capsys)
    assert rc == 2
    assert f"{damaged} has another sha256 than manifest.json recorded" in err
    assert "cselab data fetch senteval --rebuild" in err


def test_a_users_directory_is_never_replaced(papers, tmp_path):
    home = tmp_path / "home"
    (home / "wiki1m").mkdir(parents=True)
    (home / "wiki1m" / "mine.txt").write_text("my notes\n")
    with pytest.raises(CselabError, match="holds no manifest of cselab's"):
        fetch("wiki1m", home=home)
    assert (home / "wiki1m" / "mine.txt").read_text() == "my notes\n"
    assert papers.requests == []  # refused before anything was downloaded


def test_second_fetch_does_nothing(papers, tmp_path):
    home = tmp_path / "home"
    fetch_paper("wiki1m", home=home)
    n = len(papers.requests)
    fetch_paper("wiki1m", home=home)
    assert len(papers.requests) == n


def test_download_then_fetch_from_on_a_machine_without_the_source(papers, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    rc, out, err = run_cli(["data", "download", "wiki1m-sickr", "--to", str(tmp_path / "hand")], capsys)
    assert rc == 0, err
    assert out.strip().endswith(f"on the offline machine: cselab data fetch wiki1m-sickr --from {tmp_path / 'hand'}")
    assert (tmp_path / "hand" / "wiki1m_for_simcse.txt").read_bytes() == WIKI
    assert (tmp_path / "hand" / "senteval.tar").read_bytes() == papers.files["senteval.tar"]
    with socket.socket() as s:  # the source is gone: nothing listens there
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("CSELAB_PAPERS_URL", f"http://127.0.0.1:{s.getsockname()[1]}")
    rc, out, err = run_cli(["data", "fetch", "wiki1m-sickr", "--from", str(tmp_path / "hand")], capsys)
    assert rc == 0, err
    assert paper_path("wiki1m-sickr", tmp_path / "home").read_text().splitlines()[:300] == WIKI_LINES


# issue 92: a download is whole or refused, and a refusal leaves nothing behind
FAULTS = ("short-length", "no-length-early-close", "html", "404", "500", "403", "redirect-loop")


def _tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` -> 'dir', 'link' or the file's sha256 (computed here)."""
    return {str(p.relative_to(root)): "link" if p.is_symlink() else "dir" if p.is_dir()
            else hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))}


def _one_error_line(err: str) -> str:
    """The one error line of a failed command (progress bars before it are the download's, not errors)."""
    lines = [line for line in err.replace("\r", "\n").splitlines()
             if line.strip() and not line.startswith("wiki1m_for_simcse.txt: ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", ["download", "fetch"])
@pytest.mark.parametrize("base", ["CSELAB_PAPERS_URL", "HF_ENDPOINT"])
def test_a_faulty_answer_is_refused_and_leaves_nothing(base, command, fault, papers, tmp_path, monkeypatch, capsys):
    papers.faults["wiki1m_for_simcse.txt"] = fault
    if base == "HF_ENDPOINT":  # the hub's address, as a mirror of the hub gives it
        monkeypatch.delenv("CSELAB_PAPERS_URL")
        monkeypatch.setenv("HF_ENDPOINT", papers.url.removesuffix("/papers"))
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    (tmp_path / "mine.txt").write_text("the user's file\n")
    before = _tree(tmp_path)
    args = ["data", "download", "wiki1m", "--to", str(tmp_path / "to")] if command == "download" \
        else ["data", "fetch", "wiki1m"]
    rc, _, err = run_cli(args, capsys)
    assert rc == 2
    line = _one_error_line(err)
    url = papers.url if base == "CSELAB_PAPERS_URL" else \
        papers.url.removesuffix("/papers") + "/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
    assert f"{url}/wiki1m_for_simcse.txt" in line and "--from DIR" in line
    cut = WIKI[:len(WIKI) // 3]  # what the early close hands over: whole lines and a torn one
    cut_lines = cut.count(b"\n") + (not cut.endswith(b"\n"))
    short = WIKI[:-100]
    short_lines = short.count(b"\n") + (not short.endswith(b"\n"))
    expected = {"short-length": f"has {short_lines} lines, SimCSE published 300",
                "html": "has 1 lines, SimCSE published 300",
                "no-length-early-close": f"has {cut_lines} lines, SimCSE published 300",
                "redirect-loop": "HTTP 302"}.get(fault, f"HTTP {fault}")
    assert expected in line
    assert _tree(tmp_path) == before  # no --to, no $CSELAB_HOME, no .downloads, no part


def test_a_refused_body_is_not_taken_by_the_next_run(papers, tmp_path):
    home = tmp_path / "home"
    papers.faults["wiki1m_for_simcse.txt"] = "html"
    with pytest.raises(CselabError, match="has 1 lines"):
        fetch("wiki1m", home=home)
    assert not home.exists()
    del papers.faults["wiki1m_for_simcse.txt"]
    fetch("wiki1m", home=home)
    assert paper_path("wiki1m", home).read_bytes() == WIKI


def test_a_download_is_taken_again_only_with_its_receipt(papers, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CSELAB_HOME", str(tmp_path / "home"))
    to = tmp_path / "to"
    rc, _, err = run_cli(["data", "download", "wiki1m", "--to", str(to)], capsys)
    assert rc == 0, err
    receipt = json.loads((to / "wiki1m_for_simcse.txt.cselab-download.json").read_text())
    assert receipt["sha256"] == hashlib.sha256(WIKI).hexdigest() and receipt["bytes"] == len(WIKI)
    asked = len(papers.requests)
    rc, _, err = run_cli(["data", "download", "wiki1m", "--to", str(to)], capsys)
    assert rc == 0 and len(papers.requests) == asked  # cselab's own finished download: nothing asked again
    (to / "wiki1m_for_simcse.txt").write_bytes(WIKI.replace(b"tiny", b"TINY"))  # now the user's (same size)
    mine = hashlib.sha256((to / "wiki1m_for_simcse.txt").read_bytes()).hexdigest()
    rc, _, err = run_cli(["data", "download", "wiki1m", "--to", str(to)], capsys)
    assert rc == 2 and "cselab did not download and check it" in _one_error_line(err)
    assert hashlib.sha256((to / "wiki1m_for_simcse.txt").read_bytes()).hexdigest() == mine
    assert len(papers.requests) == asked


def test_a_cut_senteval_tar_is_refused(papers, tmp_path):
    tar = papers.files["senteval.tar"]
    papers.files["senteval.tar"] = tar[: len(tar) // 2]  # the server announces the cut size: only the tar tells
    with pytest.raises(CselabError, match="senteval.tar.part is not a tar archive SentEval's data can be read from"):
        fetch("senteval", home=tmp_path / "home")
    assert not (tmp_path / "home").exists()


def test_verify_of_a_deleted_file_reports_it_and_downloads_nothing(papers, tmp_path):
    home = tmp_path / "home"
    fetch("wiki1m", home=home)
    manifest = (home / "wiki1m" / "manifest.json").read_bytes()
    paper_path("wiki1m", home).unlink()
    asked = len(papers.requests)
    with pytest.raises(CselabError, match=r"wiki1m_for_simcse.txt is missing \(manifest.json lists it\)"):
        fetch("wiki1m", home=home, verify=True)
    assert len(papers.requests) == asked
    assert (home / "wiki1m" / "manifest.json").read_bytes() == manifest


def test_hf_endpoint_is_the_hubs_mirror_and_hf_hub_offline_refuses(papers, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CSELAB_PAPERS_URL")
    root = papers.url.removesuffix("/papers")
    monkeypatch.setenv("HF_ENDPOINT", root)
    home = tmp_path / "home"
    fetch("wiki1m", home=home)
    assert paper_path("wiki1m", home).read_bytes() == WIKI
    assert papers.paths == ["/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CSELAB_HOME", str(home))
    before = _tree(tmp_path)
    rc, _, err = run_cli(["data", "download", "senteval", "--to", str(tmp_path / "to")], capsys)
    assert rc == 2
    assert "HF_HUB_OFFLINE is set, so " + root + "/datasets/princeton-nlp/datasets-for-simcse/resolve/main/" \
        "senteval.tar is not downloaded" in _one_error_line(err)
    assert _tree(tmp_path) == before and len(papers.paths) == 1


def test_a_kill_after_the_download_keeps_it_for_the_next_run(papers, tmp_path, monkeypatch):
    """Killed while building: the checked download (its receipt matches) is taken by the next run, not fetched again;
    once installed, nothing is left in .downloads."""
    home = tmp_path / "home"
    real_install = paper_mod.install_dir

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(paper_mod, "install_dir", killed)
    with pytest.raises(KeyboardInterrupt):
        fetch("wiki1m", home=home)
    assert (home / ".downloads" / "wiki1m_for_simcse.txt").read_bytes() == WIKI
    asked = len(papers.requests)
    monkeypatch.setattr(paper_mod, "install_dir", real_install)
    fetch("wiki1m", home=home)
    assert len(papers.requests) == asked
    assert paper_path("wiki1m", home).read_bytes() == WIKI
    assert not (home / ".downloads").exists()
