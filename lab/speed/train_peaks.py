"""The peak memory of `cselab train`'s presets: each `cpu-minilm` preset and `paper-bert-base`, a few steps on the CPU.

Each preset runs as ``cselab train --preset NAME`` for ``--steps`` steps (no evaluation at the start, one at the last
step, no results record) under ``/usr/bin/time -v``, one after another, and the record keeps the peak resident memory,
user and system seconds and minor faults of each. ``paper-bert-base`` presets name bert-base-uncased, which no
command here fetches: they run on a randomly initialised model of bert-base's size (12 layers of 768, the
all-MiniLM-L6-v2 tokenizer, whose vocabulary is bert-base-uncased's), which has the same memory, on the default
corpus (its own wiki1m_for_simcse.txt is not fetched here; at max_length 32 the text's lines fill every sequence
alike). ``--corpus-lines N`` trains every preset on the fetched corpus numbered into N distinct lines instead
(lab.domain_study.time_adapt's text): what the size of the text adds to the peak. A preset that cannot start here is
recorded with its one-line error.

    python -m lab.speed.train_peaks                                   # every cpu-minilm preset and simcse's bert-base
    python -m lab.speed.train_peaks --presets simcse/cpu-minilm simcse/paper-bert-base --steps 3
    python -m lab.speed.train_peaks --presets simcse/cpu-minilm --corpus-lines 5000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.record import RESULTS_DIR, ROOT, append_record

RESULTS = RESULTS_DIR / "train_peaks.jsonl"


def presets() -> list[str]:
    return [f"{p.parent.name}/cpu-minilm" for p in sorted((ROOT / "configs").glob("*/cpu-minilm.yaml"))] + [
        "simcse/paper-bert-base"]


def random_bert_base(out: Path) -> Path:
    """A randomly initialised BERT of bert-base's size with the fetched all-MiniLM-L6-v2's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from cselab.paths import resolve_model_path

    minilm = resolve_model_path("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size)).save_pretrained(out)  # BertConfig's defaults: bert-base
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    from lab.speed.adapt_footprint import cpu_name, parse_time_v

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=None)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--corpus-lines", type=int, default=None, help="train on the fetched corpus numbered into "
                        "this many distinct lines (default: each preset's own corpus)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from lab.domain_study.time_adapt import numbered_corpus

    rows = []
    with tempfile.TemporaryDirectory(prefix="train-peaks-") as tmp:
        bert_base = None
        corpus = numbered_corpus(args.corpus_lines, Path(tmp) / "corpus.txt") if args.corpus_lines else None
        for preset in args.presets or presets():
            overrides = [f"train.max_steps={args.steps}", f"train.eval_every={args.steps}", "train.eval_at_start=false",
                         f"train.output_dir={Path(tmp) / preset.replace('/', '-')}"]
            if preset.endswith("paper-bert-base"):
                bert_base = bert_base or random_bert_base(Path(tmp) / "bert-base-random")
                overrides += [f"model.backbone={bert_base}", "data.corpus=default"]
            if corpus is not None:
                overrides.append(f"data.corpus={corpus}")
            log = Path(tmp) / "time-v.txt"
            load_start = os.getloadavg()
            done = subprocess.run(["/usr/bin/time", "-v", "-o", str(log), sys.executable, "-m", "cselab.cli", "train",
                                   "--preset", preset, *overrides], capture_output=True, text=True)
            row = {"preset": preset, "steps": args.steps, "corpus_lines": args.corpus_lines, "rc": done.returncode,
                   "loadavg_start": [round(x, 2) for x in load_start],
                   "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
            if done.returncode == 0:
                row.update(parse_time_v(log.read_text(encoding="utf-8")))
                print(f"{preset}: peak {row['peak_rss_mb']:,.0f} MB ({row['command_s']:.0f} s)", flush=True)
            else:
                row["error"] = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
                print(f"{preset}: did not run ({row['error']})", flush=True)
            rows.append(row)  # one record per preset: a long sweep stopped part-way keeps what it measured
            append_record(args.results, {**row, "cpu_model": cpu_name(), "cpu_count": os.cpu_count()},
                          __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
