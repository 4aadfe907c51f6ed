"""Every table of the docs and the lab books, rendered again from the records in ``lab/results``.

    python -m lab.render            # rewrite every block whose table changed
    python -m lab.render --check    # change nothing; exit 1 naming the documents whose tables differ

A document holds a table between ``<!-- cselab:NAME -->`` and ``<!-- /cselab:NAME -->``; the block is replaced by
the table ``NAME`` rendered from its records, so no figure in a table is typed by hand. Every table must have a
block in one of the documents (README.md, docs/*.md, lab/books/*.md), except the shorter views of a table kept
elsewhere in full (:data:`OPTIONAL`). All documents are checked before any is written, and each is written
atomically.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from lab.record import RESULTS_DIR, ROOT

# the paired tests of docs/results.md's seeds table, and the adapt protocol's baseline configuration
SEED_COMPARISONS = (("simcse", "ifcl"), ("simcse", "tncse/dropout-0.1"), ("simcse", "jtcse/two-stream"),
                    ("tncse/dropout-0.1", "jtcse/two-stream"))
ADAPT_BASELINE = "simcse/T 0.2, lr 1e-5, precision auto"
OPTIONAL = frozenset({"domain-goals", "domain-peers", "domain-recipes"})


class RenderError(Exception):
    """A document or a record file that the tables cannot be rendered into or from (one line)."""


def _block_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- cselab:{re.escape(name)} -->).*?(<!-- /cselab:{re.escape(name)} -->)", re.S)


def has_block(text: str, name: str) -> bool:
    """Whether ``text`` holds the block ``name`` (both markers)."""
    return _block_pattern(name).search(text) is not None


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with the block ``name`` holding ``content``; :class:`RenderError` if the markers are missing."""
    pattern = _block_pattern(name)
    if not pattern.search(text):
        raise RenderError(f"no block <!-- cselab:{name} --> ... <!-- /cselab:{name} -->")
    return pattern.sub(lambda m: f"{m.group(1)}\n{content}\n{m.group(2)}", text)


def table_makers(results: Path) -> dict[str, Callable[[], str]]:
    """Each table's name and how to render it from the record files in ``results``."""
    from cselab.research.reporting.tables import ablation_tables, protocol_table, resolve_configuration, seeds_table
    from cselab.training.records import read_records
    from lab.adapt_protocol.tables import adapt_seeds_table, adapt_table, read_adapt_records
    from lab.domain_study import score_suite
    from lab.domain_study.study import (
        brief_goals_table,
        domains_report,
        peers_table,
        read_domain_records,
        read_suite_and_check_records,
        read_suite_records,
        recipes_table,
    )
    from lab.gpu.gpu_check_table import read_records as read_gpu_records
    from lab.gpu.gpu_check_table import render_tables as gpu_tables

    def records(name: str, kind: str) -> list:
        return read_records(results / name, kind, allow_empty=False)

    def adapt_seeds() -> str:
        adapt = read_adapt_records(results / "adapt.jsonl", allow_empty=False)
        return adapt_seeds_table(adapt, baseline=resolve_configuration(adapt, ADAPT_BASELINE))

    def suite() -> str:
        study = read_domain_records(results / "domains.jsonl")
        return score_suite.render_table(score_suite.read_suite_records(results / "suite.jsonl"),
                                        score_suite.untouched_scores(study),
                                        score_suite.untouched_scores(study, score_suite.LARGER))

    return {
        "protocol": lambda: protocol_table(records("protocol.jsonl", "results")),
        "seeds": lambda: seeds_table(records("seeds.jsonl", "seeds"), comparisons=SEED_COMPARISONS),
        "ablation": lambda: ablation_tables(records("ablation.jsonl", "ablation")),
        "gpu-check": lambda: gpu_tables(read_gpu_records(results / "gpu_check.jsonl")),
        "adapt": lambda: adapt_table(read_adapt_records(results / "adapt.jsonl", allow_empty=False)),
        "adapt-seeds": adapt_seeds,
        "domains": lambda: domains_report(read_suite_records(results)),
        "domain-goals": lambda: brief_goals_table(read_suite_records(results)),
        "domain-goals-by-task": lambda: brief_goals_table(read_suite_and_check_records(results), by_task=True),
        "domain-peers": lambda: peers_table(read_suite_records(results)),
        "domain-recipes": lambda: recipes_table(read_suite_and_check_records(results)),
        "suite": suite,
    }


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "lab" / "books").glob("*.md"))]


def render(results: Path = RESULTS_DIR, paths: list[Path] | None = None,
           makers: dict[str, Callable[[], str]] | None = None) -> dict[Path, tuple[str, str]]:
    """Each document whose blocks the tables change: ``path -> (old text, new text)``; nothing is written.
    ``makers``: the tables to render (default: every table, :func:`table_makers`)."""
    paths = documents() if paths is None else paths
    texts: dict[Path, str] = {}
    for path in paths:
        try:
            texts[path] = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RenderError(f"{path} is not UTF-8 text (byte {exc.start}); it is left as it is") from None
        except OSError as exc:
            raise RenderError(f"{path}: {exc.strerror}") from None
    new = dict(texts)
    for name, make in (table_makers(results) if makers is None else makers).items():
        holders = [path for path in paths if has_block(new[path], name)]
        if not holders:
            if name in OPTIONAL:
                continue
            raise RenderError(f"no document has the block <!-- cselab:{name} --> ... <!-- /cselab:{name} -->")
        table = make()
        for path in holders:
            new[path] = replace_block(new[path], name, table)
    return {path: (texts[path], new[path]) for path in paths if new[path] != texts[path]}


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """The command; ``root``: the repository whose documents are rendered (a copy of it, in the tests)."""
    from cselab.errors import CselabError
    from cselab.fileio import write_atomic

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table would change")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="the directory of the record files")
    args = parser.parse_args(argv)
    try:
        changed = render(args.results, documents(root))
    except (RenderError, CselabError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path, (_, text) in changed.items():
        if not args.check:
            write_atomic(path, text)
        print(f"{'differs' if args.check else 'updated'}: {path.relative_to(root)}")
    if not changed:
        print("every table matches its records")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
