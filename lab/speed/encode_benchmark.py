"""Encode throughput: cselab's encoder vs sentence-transformers' ``SentenceTransformer.encode``.

Both encode the SAME sentences with the SAME model directory in ONE process, alternating rounds so that
machine noise hits both alike; prints sentences/s of each and the ratio, checks the embeddings agree,
and appends a record to lab/results/encode.jsonl.

    python -m lab.speed.encode_benchmark --model all-MiniLM-L6-v2 --n 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cselab.data.evalsets.sts import load_task
from cselab.data.stores.jsonl import append_jsonl
from cselab.models.sentence_model import load_model
from cselab.paths import resolve_model_path
from cselab.provenance import provenance
from lab.record import RESULTS_DIR

RESULTS = RESULTS_DIR / "encode.jsonl"


def sts_sentences(n: int) -> list[str]:
    """Real sentences of mixed length: STS-B test and dev sentences, in file order."""
    sentences: list[str] = []
    for split in ("test", "dev"):
        for sub in load_task("stsb", split).subsets:
            sentences += list(sub.sentences1) + list(sub.sentences2)
    return sentences[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--n", type=int, default=2000, help="number of sentences")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    path = resolve_model_path(args.model)
    sentences = sts_sentences(args.n)
    ours = load_model(path, pooler="mean")
    theirs = SentenceTransformer(path, device="cpu")
    # same truncation for both
    ours.max_length = theirs.max_seq_length

    def run_ours() -> torch.Tensor:
        return ours.encode(sentences, batch_size=args.batch_size)

    def run_theirs() -> torch.Tensor:
        return theirs.encode(sentences, batch_size=args.batch_size, convert_to_tensor=True, normalize_embeddings=False)

    run_ours(), run_theirs()  # warm-up
    times: dict[str, list[float]] = {"cselab": [], "sentence-transformers": []}
    for _ in range(args.rounds):
        for name, fn in (("cselab", run_ours), ("sentence-transformers", run_theirs)):
            start = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - start)
            if name == "cselab":
                a = out
            else:
                b = out
    # sentence-transformers' all-MiniLM pipeline normalises; compare directions
    cos = torch.nn.functional.cosine_similarity(a.float(), b.float().cpu(), dim=-1)
    rate = {k: len(sentences) / statistics.median(v) for k, v in times.items()}
    ratio = rate["cselab"] / rate["sentence-transformers"]
    print(f"sentences: {len(sentences)}, batch {args.batch_size}, rounds {args.rounds}, "
          f"threads {torch.get_num_threads()}")
    for name, value in rate.items():
        print(f"{name:>22}: {value:8.1f} sentences/s (median of {args.rounds})")
    print(f"throughput ratio cselab / sentence-transformers: {ratio:.2f}x; "
          f"min cosine between outputs {float(cos.min()):.6f}")
    if not args.no_record:
        record = {"benchmark": "encode", "model": args.model, "n": len(sentences), "batch_size": args.batch_size,
                  "rounds": args.rounds, "sentences_per_s": {k: round(v, 1) for k, v in rate.items()},
                  "ratio": round(ratio, 3), "min_cosine": float(cos.min()), **provenance()}
        append_jsonl(RESULTS, record)


if __name__ == "__main__":
    main()
