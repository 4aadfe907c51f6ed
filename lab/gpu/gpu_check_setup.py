"""Inputs of ``lab/gpu/gpu_check.sh`` that need no hub and no fetched data: randomly initialised
bert-base / roberta-base directories (full-size configs), a synthetic training corpus and a synthetic STS-B
(dev/test, with the metadata the partial STS12-16 tasks select on) in a fresh ``$CSELAB_HOME``.

The small tokenizers of the test suite are reused (``tests/helpers.py``, so the dev extras are needed):
they only have to produce valid ids. The models keep the real vocabulary sizes, so parameter counts,
memory and step times are those of bert-base / roberta-base.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from tests.helpers import WORDS, bpe_tokenizer, wordpiece_tokenizer

TEXT_WORDS = [w for w in WORDS if w.isalpha()]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(TEXT_WORDS) for _ in range(rng.randint(6, 20))) + " ." for _ in range(n)]


def backbone_dir(path: Path, family: str) -> Path:
    import torch
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    torch.manual_seed(0)
    if family == "bert":
        tokenizer, model = wordpiece_tokenizer(), BertModel(BertConfig())  # 12 x 768, vocab 30522
    else:
        tokenizer = bpe_tokenizer()
        model = RobertaModel(RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                           pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                           eos_token_id=tokenizer.eos_token_id))
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def sts_home(home: Path) -> Path:
    from cselab.data.evalsets.sts import PART_TASKS

    metadata = [entry for entries in PART_TASKS.values() for entry in entries]
    stsb = home / "sts" / "stsb"
    stsb.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for k, split in enumerate(("train", "dev", "test")):
        a, b = sentences(400, 10 + 2 * k), sentences(400, 11 + 2 * k)
        rows = [f"main\t{metadata[i % len(metadata)][0]}\t{metadata[i % len(metadata)][1]}\t{i:04d}\t"
                f"{rng.uniform(0, 5):.3f}\t{x}\t{y}" for i, (x, y) in enumerate(zip(a, b, strict=True))]
        (stsb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return home


def main(work: str) -> None:
    root = Path(work)
    backbone_dir(root / "bert-base", "bert")
    backbone_dir(root / "roberta-base", "roberta")
    (root / "corpus.txt").write_text("\n".join(sentences(20_000, 0)) + "\n")
    sts_home(root / "home")
    print(f"gpu check inputs in {root}")


if __name__ == "__main__":
    main(sys.argv[1])
