"""Helpers the tests share: tiny randomly initialised BERT and RoBERTa models with real tokenizers, tiny STS data
and corpora, and the command line run through its error boundary.

Nothing is downloaded: the tokenizers are built from a small vocabulary with the `tokenizers` library and the models
from small configs, so every code path runs in seconds on a CPU. The fixtures that use these are in
``tests/pytest_fixtures.py`` (a pytest plugin the repository's ``conftest.py`` loads, so ``lab/tests`` has them too).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]

WORDS = ["a", "an", "the", "this", "that", "is", "are", "was", "were", "be", "been", "of", "to", "in", "on", "for",
         "with", "as", "at", "by", "from", "and", "or", "but", "not", "no", "it", "he", "she", "they", "we", "you", "i",
         "his", "her", "their", "our", "my", "your", "man", "woman", "men", "women", "child", "dog", "cat", "bird",
         "horse", "car", "plays", "playing", "play", "runs", "running", "run", "eats", "eating", "eat", "sits",
         "sitting", "sit", "walks", "walking", "walk", "rides", "riding", "guitar", "piano", "ball", "food", "grass",
         "road", "street", "house", "park", "water", "table", "chair", "bed", "book", "phone", "music", "song", "red",
         "blue", "green", "big", "small", "old", "young", "new", "good", "bad", "happy", "sad", "fast", "slow", "two",
         "three", "one", "some", "many", "all", "sentence", "means", "summarized", "can", "cannot", "does", "mean",
         "so", ":", '"', "'", ",", ".", "!", "?", "-", "(", ")"]


def fetch_or_skip(target: str, home: Path) -> Path:
    """``fetch(target)`` from the real registries; skipped (not failed) when a registry cannot be reached, or when
    apt's package lists lack a pinned Debian package (``apt-get update`` on Debian 12 gives them)."""
    import re

    from cselab.data.registry.download import DownloadError
    from cselab.data.registry.fetch import fetch

    try:
        return fetch(target, home=home)
    except DownloadError as err:
        if err.unreachable:
            pytest.skip(f"a registry is unreachable: {err}")
        if re.search(r"Unable to locate package|was not found|`apt-get` is not installed", str(err)):
            pytest.skip(f"apt's package lists lack a pinned Debian package (run apt-get update): {err}")
        raise


def wordpiece_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = ["##" + c for c in letters]
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(specials + WORDS + letters + pieces))}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=128,
    )


def bpe_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator([" ".join(WORDS)] * 4, vocab_size=400, min_frequency=1, special_tokens=specials)
    from tokenizers import processors

    bpe.post_processor = processors.RobertaProcessing(("</s>", bpe.token_to_id("</s>")),
                                                      ("<s>", bpe.token_to_id("<s>")))
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=128,
    )


def build_tiny_model_dir(path: Path, family: str = "bert", seed: int = 0, hidden_size: int = 32,
                         positions: int = 128) -> Path:
    """Save a tiny randomly initialised BERT or RoBERTa (with tokenizer) as an HF model directory
    (``hidden_size``: a multiple of 4, for models of different widths; ``positions``: the tokens a BERT takes)."""
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    torch.manual_seed(seed)
    common = dict(hidden_size=hidden_size, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=2 * hidden_size)
    if family == "bert":
        tokenizer = wordpiece_tokenizer()
        config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=positions, pad_token_id=0, **common)
        model = BertModel(config)
    elif family == "roberta":
        tokenizer = bpe_tokenizer()
        config = RobertaConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=130,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **common,
        )
        model = RobertaModel(config)
    else:
        raise ValueError(family)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_sts_home(home: Path, n_pairs: int = 40, seed: int = 0) -> Path:
    """A ``$CSELAB_HOME`` holding a tiny STS-B in the fetched layout (made-up sentences, tiny vocabulary)."""
    import random

    rng = random.Random(seed)
    subjects = ["a man", "a woman", "the dog", "a child", "the cat", "two men", "the bird", "a young woman"]
    verbs = ["plays the guitar", "eats food", "runs on the road", "sits on the chair", "rides the horse",
             "walks in the park"]
    from cselab.data.evalsets.sts import PART_TASKS

    metadata = [entry for entries in PART_TASKS.values() for entry in entries]
    stsb = home / "sts" / "stsb"
    stsb.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        rows = []
        for i in range(n_pairs):
            s, v = rng.choice(subjects), rng.choice(verbs)
            same = rng.random() < 0.5
            s2 = s if same else rng.choice(subjects)
            v2 = v if rng.random() < 0.5 else rng.choice(verbs)
            score = 2.5 * (s2 == s) + 2.5 * (v2 == v)
            dataset, year = metadata[i % len(metadata)]
            rows.append(f"main\t{dataset}\t{year}\t{i:04d}\t{score:.3f}\t{s} {v}.\t{s2} {v2}.")
        (stsb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return home


def write_corpus(path: Path, n: int = 200, seed: int = 0) -> Path:
    import random

    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 12))) for _ in range(n)) + "\n")
    return path


def run_whole_loop(config, steps: int) -> tuple:
    """Train ``config`` for ``steps`` steps; check every step ran and some weight of the trained encoder's
    BACKBONE changed (not just a head); return the trainer and the records of its metrics log."""
    import json

    from cselab.training.trainer import Trainer

    trainer = Trainer(config)
    backbone = trainer.method.encoder.backbone
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    result = trainer.run()
    assert result.steps == steps
    after = backbone.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "training changed no backbone weight"
    log = [json.loads(line) for line in (Path(config.train.output_dir) / "metrics.jsonl").read_text().splitlines()]
    return trainer, log


def write_distinct_sts_home(home: Path, n: int = 60, seed: int = 3) -> Path:
    """Like :func:`write_sts_home`, but every sentence differs (random words), so no two cosines tie and
    float noise cannot reorder Spearman ranks: for checks of a score against an independent computation."""
    import random

    from cselab.data.evalsets.sts import PART_TASKS

    metadata = [entry for entries in PART_TASKS.values() for entry in entries]  # so every STS task has rows
    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    (home / "sts" / "stsb").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        lines = [f"main\t{metadata[i % len(metadata)][0]}\t{metadata[i % len(metadata)][1]}\t{i}\t"
                 f"{rng.uniform(0, 5):.3f}\t{' '.join(rng.sample(words, 7))}\t{' '.join(rng.sample(words, 6))}"
                 for i in range(n)]
        (home / "sts" / "stsb" / f"sts-{split}.csv").write_text("\n".join(lines) + "\n")
    return home


def run_cli(args, capsys):
    """Run ``cselab ARGS`` through its console entry point (the error boundary); (exit status, stdout, stderr)."""
    import pytest

    from cselab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def tiny_distill_config(teacher, student_dir, corpus, out, *extra):
    """A distillation run config for tiny models: 16 steps of B 16 at lr 1e-3 on the CPU, one dev evaluation at the
    end, every step logged; ``extra`` overrides win."""
    from cselab.training.pipeline import distill_config

    return distill_config(teacher, str(student_dir), corpus, output_dir=out, overrides=[
        "train.batch_size=16", "train.max_steps=16", "train.lr=1e-3", "train.eval_every=16",
        "train.eval_at_start=false", "model.max_length=16", "train.scheduler=constant", "train.device=cpu",
        "train.log_every=1", *extra])


def row_cosines(x, y):
    """The cosine of each row of ``x`` with the same row of ``y``, in float64 with numpy."""
    import numpy as np

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))


def build_tiny_marian_dir(path: Path, seed: int = 0) -> Path:
    """Save a tiny randomly initialised MarianMT translation model with a word-level tokenizer over :data:`WORDS`
    (what ``cselab data rtt --models`` loads; its translations are random words)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(["<pad>", "</s>", "<unk>", *WORDS]))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", vocab["</s>"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                        model_max_length=64)
    config = MarianConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                          max_position_embeddings=64, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                          forced_eos_token_id=1)
    torch.manual_seed(seed)
    MarianMTModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def recipe_with(base: str | Path = "vectors-and-head", **fields):
    """A recipe of ``cselab adapt`` (a shipped recipe's name, or a YAML file such as ``lab/recipes/distill.yaml``)
    with ``fields`` changed, validated as a recipe file is: what a user's ``--recipe FILE`` would say."""
    from cselab.adaptation.recipe import Recipe, load_recipe

    raw = load_recipe(base).model_dump(mode="json", by_alias=True)
    if "steps" in fields and isinstance(fields["steps"], dict):
        fields["steps"] = {**raw["steps"], **fields["steps"]}
    return Recipe.model_validate({**raw, **fields})


LAB_RECIPES = Path(__file__).resolve().parents[1] / "lab" / "recipes"  # the domain study's recipes, as test data
