"""The bbc-news domain's adaptation text as whole articles, one per line, instead of its sentences.

The domain's ``train.txt`` holds the sentences of the articles that are not test items. This writes those same
articles whole (from target ``zeroshot``, which the domain was built from), so ``cselab adapt`` can train on the
unit the task embeds: ``run_domains.py --domains bbc-news --configurations cselab-simcse --text FILE
--max-length 256``. An article is left out when its text is a test item (compared as the domain compares them).

    cselab data fetch zeroshot
    python -m lab.domain_study.bbc_train_articles --out runs/domains-articles/bbc-news-train-articles.txt
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def train_articles(zeroshot_jsonl: Path, test_labels: Path) -> list[str]:
    """The distinct articles of ``zeroshot_jsonl`` whose text is not a line of the domain's ``labels.tsv``."""
    from cselab.data.evalsets.indomain import sentence_key
    from cselab.data.text.corpus import normalize_text
    from cselab.evaluation.domain_files import read_labels

    test = {sentence_key(text) for text in read_labels(test_labels).texts}
    out, seen = [], set(test)
    for line in zeroshot_jsonl.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        text = normalize_text(json.loads(line)["text"])
        key = sentence_key(text)
        if key and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def main(argv: list[str] | None = None) -> None:
    from cselab.data.evalsets.domains import domain_files
    from cselab.data.registry.sources import target_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    source = target_dir("zeroshot") / "bbc-news.jsonl"
    if not source.is_file():
        raise SystemExit(f"{source} not found: run `cselab data fetch zeroshot` first")
    articles = train_articles(source, domain_files("bbc-news")["labels"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(f"{a}\n" for a in articles), encoding="utf-8")
    print(f"{len(articles)} articles -> {args.out}")


if __name__ == "__main__":
    main()
