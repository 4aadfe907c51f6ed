"""Inputs of ``benchmarks/gpu_check.sh`` that need no hub and no fetched data: randomly initialised
bert-base / roberta-base directories (full-size configs; small tokenizers written here), a synthetic
training corpus and a synthetic STS-B (dev/test) in a fresh ``$CSELAB_HOME``.

The tokenizers only have to produce valid ids: a WordPiece vocabulary of the corpus' words for BERT and a
byte-level BPE without merges (one token per byte) for RoBERTa. The models keep the real vocabulary sizes,
so parameter counts, memory and step times are those of bert-base / roberta-base.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

WORDS = ["a", "man", "woman", "child", "dog", "cat", "bird", "horse", "plays", "eats", "runs", "sits", "rides",
         "walks", "the", "guitar", "food", "road", "chair", "park", "piano", "is", "on", "in", "with", "and", "two",
         "young", "old", "small", "big", "red", "blue", "green", "happy", "fast", "slow"]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20))) + " ." for _ in range(n)]


def bert_dir(path: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", '"', ":", ",",
                                               *sorted(set(WORDS)), "sentence", "means", "summarized", "this",
                                               "can", "but", "not", "does", "mean", "so"]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(path)  # bert-base: 12 layers, 768 wide, vocab 30522
    tokenizer.save_pretrained(path)
    return path


def roberta_dir(path: Path) -> Path:
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    symbols = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", *sorted(ByteLevel.alphabet())]
    (path / "vocab.json").write_text(json.dumps({s: i for i, s in enumerate(symbols)}))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = RobertaTokenizerFast(vocab_file=str(path / "vocab.json"), merges_file=str(path / "merges.txt"))
    torch.manual_seed(0)
    RobertaModel(RobertaConfig(vocab_size=50265, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
                               eos_token_id=2, type_vocab_size=1)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def sts_home(home: Path) -> Path:
    stsb = home / "sts" / "stsb"
    stsb.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for k, split in enumerate(("train", "dev", "test")):
        a, b = sentences(400, 10 + 2 * k), sentences(400, 11 + 2 * k)
        rows = [f"main\tsynthetic\t2024\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{x}\t{y}" for i, (x, y) in enumerate(zip(a, b, strict=True))]
        (stsb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return home


def main(work: str) -> None:
    root = Path(work)
    bert_dir(root / "bert-base")
    roberta_dir(root / "roberta-base")
    (root / "corpus.txt").write_text("\n".join(sentences(20_000, 0)) + "\n")
    sts_home(root / "home")
    print(f"gpu check inputs in {root}")


if __name__ == "__main__":
    main(sys.argv[1])
