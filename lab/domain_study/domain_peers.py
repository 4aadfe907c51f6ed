"""sentence-transformers' own unsupervised recipes on a domain's text, through sentence-transformers' trainer.

The peers of ``cselab adapt`` in the domain study (``lab/domain_study/run_domains.py``, lab/books/domain_study.md
"Your own domain"). Each recipe is run with ``SentenceTransformerTrainer`` and sentence-transformers' own loss,
from the same start checkpoint (a local sentence-transformers directory, loaded as a user would: its own mean
pooling and normalisation), on the same text, with the budget given (steps, batch size, max length) and the
precision given:

* ``tsdae``: ``DenoisingAutoEncoderLoss`` with the decoder tied to the encoder (``tie_encoder_decoder=True``; the
  decoder is built from the same local model directory), input damaged by deleting each word with probability
  0.6 (:func:`delete_words`: whitespace words, so no nltk data is needed; at least one word is kept, as in
  sentence-transformers' ``DenoisingAutoEncoderDataset.delete``). lr 3e-5, constant schedule, no weight decay
  (``examples/unsupervised_learning/TSDAE/train_tsdae_from_file.py``).
* ``ct``: ``ContrastiveTensionLossInBatchNegatives`` on single sentences. lr 5e-5, 10% linear warm-up then linear
  decay, weight decay 0.01 (``examples/unsupervised_learning/CT_In-Batch_Negatives/train_ct-improved_from_file.py``).
* ``mnrl``: SimCSE as sentence-transformers documents it, ``MultipleNegativesRankingLoss`` on (s, s) pairs
  (dropout makes the two views differ), mean pooling. lr 5e-5, 10% warm-up, linear decay, weight decay 0.01
  (``examples/unsupervised_learning/SimCSE/train_simcse_from_file.py``).
* ``distill``: model distillation as sentence-transformers' example does it
  (``examples/sentence_transformer/training/distillation/model_distillation.py``): the teacher (a
  ``SentenceTransformer``) encodes the text, a PCA of its embeddings of the training sentences becomes a ``Dense``
  layer (no bias, identity) appended to the teacher when the student is narrower, the teacher's reduced embeddings
  are the labels, and the student learns them with ``MSELoss``; lr 1e-4, 10% warm-up, linear decay, the example's
  evaluators (STS-B dev and the ``MSEEvaluator`` on held-out sentences) every eighth of the budget and its
  ``load_best_model_at_end`` on STS-B dev (the fetched STS-B's dev split, read as the example reads it).

Those learning rates, schedules and weight decays are the ones of sentence-transformers' example scripts (their
``fit`` defaults where a script does not set one). No recipe but ``distill`` selects a step: the model after the last
step is the result, as the examples save it; ``distill`` keeps the step its example keeps.

    python -m lab.domain_study.domain_peers tsdae --text ~/.cache/cselab/domains/linux-man/train.txt \\
        --model ~/.cache/cselab/models/all-MiniLM-L6-v2 --output runs/peers/tsdae --steps 400
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TSDAE_DELETION = 0.6
MODEL_DIR = "model"


@dataclass(frozen=True)
class Recipe:
    name: str
    loss: str  # the sentence-transformers loss class
    lr: float
    scheduler: str  # transformers' lr_scheduler_type
    warmup_ratio: float
    weight_decay: float
    example: str  # the sentence-transformers example script the settings come from
    max_length: int | None = 64  # tokens of a training sentence (None: the model's own max_seq_length)


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("tsdae", "DenoisingAutoEncoderLoss", 3e-5, "constant", 0.0, 0.0,
           "examples/unsupervised_learning/TSDAE/train_tsdae_from_file.py"),
    Recipe("ct", "ContrastiveTensionLossInBatchNegatives", 5e-5, "linear", 0.1, 0.01,
           "examples/unsupervised_learning/CT_In-Batch_Negatives/train_ct-improved_from_file.py"),
    Recipe("mnrl", "MultipleNegativesRankingLoss", 5e-5, "linear", 0.1, 0.01,
           "examples/unsupervised_learning/SimCSE/train_simcse_from_file.py"),
    Recipe("distill", "MSELoss", 1e-4, "linear", 0.1, 0.0,
           "examples/sentence_transformer/training/distillation/model_distillation.py", max_length=None),
)}
DISTILL_EVALUATIONS = 8  # the example evaluates (and may keep) every 500 of its steps; here every eighth of the budget
MSE_SENTENCES = 500  # the held-out sentences of the MSEEvaluator (the example holds out NLI and Wikipedia sentences)


def saved_model(run_dir: str | Path, configuration: str, *, handed_back: bool = False) -> Path:
    """Where a domain-study run keeps its model: a sentence-transformers recipe's :data:`MODEL_DIR`; for a cselab
    run, the selected checkpoint (what a weight mix starts from), or with ``handed_back`` the model ``cselab adapt``
    hands its user, which the run's ``adapt.json`` says (the selected one mixed with the untouched model when its
    ``mix`` is below 1): ``model`` in it, or for a run made before cselab adapt handed back one path, ``weight-mix``
    (mixed) or the selected checkpoint."""
    from cselab.adaptation.plan import MODEL_DIR as ADAPT_MODEL_DIR
    from cselab.training.run_directory import selected_model_dir
    from lab.domain_study.study import CONFIGURATION

    run_dir = Path(run_dir)
    if configuration in CONFIGURATION and CONFIGURATION[configuration].recipe:
        return run_dir / MODEL_DIR
    summary = run_dir / "adapt.json"
    if handed_back and summary.is_file():
        if (run_dir / ADAPT_MODEL_DIR).is_dir():
            return run_dir / ADAPT_MODEL_DIR
        mixed = float(json.loads(summary.read_text(encoding="utf-8")).get("mix", 1.0)) < 1.0
        return run_dir / "weight-mix" if mixed else selected_model_dir(run_dir)
    return selected_model_dir(run_dir)


def delete_words(text: str, ratio: float = TSDAE_DELETION, rng: Any = random) -> str:
    """TSDAE's deletion noise on whitespace-separated words: each word deleted with probability ``ratio``, at
    least one kept."""
    words = text.split()
    if not words:
        return text
    kept = [w for w in words if rng.random() >= ratio]
    return " ".join(kept) if kept else rng.choice(words)


def read_sentences(path: str | Path) -> list[str]:
    return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _dataset(recipe: Recipe, sentences: list[str]) -> Any:
    from datasets import Dataset

    if recipe.name == "tsdae":
        dataset = Dataset.from_dict({"text": sentences})

        def noise(batch: dict[str, list[str]]) -> dict[str, list[str]]:
            # the loss reads (damaged, original): the column order of what the transform returns
            return {"noisy": [delete_words(t) for t in batch["text"]], "text": batch["text"]}

        dataset.set_transform(noise, columns=["text"], output_all_columns=True)
        return dataset
    if recipe.name == "ct":
        return Dataset.from_dict({"sentence": sentences})
    if recipe.name == "mnrl":
        return Dataset.from_dict({"anchor": sentences, "positive": sentences})
    raise ValueError(recipe.name)


def _loss(recipe: Recipe, model: Any) -> Any:
    from sentence_transformers import losses

    if recipe.name == "distill":
        return losses.MSELoss(model)
    if recipe.name == "tsdae":
        return losses.DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    if recipe.name == "ct":
        return losses.ContrastiveTensionLossInBatchNegatives(model)
    return losses.MultipleNegativesRankingLoss(model)


def embedding_width(model: Any) -> int:
    """A ``SentenceTransformer``'s embedding width, by the method's name in sentence-transformers 6 or 5."""
    return int((getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)())


def teacher_with_pca(teacher_dir: str | Path, student: Any, sentences: list[str], device: str) -> Any:
    """The example's teacher: a ``SentenceTransformer``, with a ``Dense`` layer holding the PCA of its embeddings of
    ``sentences`` appended when the student's embeddings are narrower."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from sklearn.decomposition import PCA

    teacher = SentenceTransformer(str(teacher_dir), device=device)
    width, teacher_width = embedding_width(student), embedding_width(teacher)
    if width < teacher_width:
        pca = PCA(n_components=width).fit(teacher.encode(sentences, convert_to_numpy=True, batch_size=64))
        dense = models.Dense(in_features=teacher_width, out_features=width, bias=False,
                             activation_function=torch.nn.Identity())
        dense.linear.weight = torch.nn.Parameter(torch.tensor(pca.components_, dtype=torch.float32))
        teacher.add_module("dense", dense)
    return teacher


def _distill_setup(model: Any, teacher_dir: str | Path, sentences: list[str], steps: int, seed: int,
                   device: str) -> dict[str, Any]:
    """The example's data and evaluators: the text labelled with the teacher's (reduced) embeddings, STS-B dev and the
    MSE on held-out sentences, and the trainer arguments that evaluate and keep the best step on STS-B dev."""
    from datasets import Dataset
    from sentence_transformers import evaluation

    from cselab.data.evalsets.sts import read_stsb_file, stsb_dir

    rng = random.Random(seed)
    held = set(rng.sample(range(len(sentences)), min(MSE_SENTENCES, len(sentences) // 20)))
    train = [s for i, s in enumerate(sentences) if i not in held]
    held_out = [s for i, s in enumerate(sentences) if i in held]
    teacher = teacher_with_pca(teacher_dir, model, train, device)
    labels = teacher.encode(train, batch_size=64, convert_to_numpy=True)
    dataset = Dataset.from_dict({"sentence": train, "label": [row.tolist() for row in labels]})
    dev = read_stsb_file(stsb_dir() / "sts-dev.csv")
    evaluator = evaluation.SequentialEvaluator([
        evaluation.EmbeddingSimilarityEvaluator([r.sentence1 for r in dev], [r.sentence2 for r in dev],
                                                [r.score / 5.0 for r in dev], name="sts-dev"),
        evaluation.MSEEvaluator(held_out, held_out, teacher_model=teacher)])
    every = max(1, steps // DISTILL_EVALUATIONS)
    return {"dataset": dataset, "evaluator": evaluator, "held_out": len(held_out),
            "args": {"eval_strategy": "steps", "eval_steps": every, "save_strategy": "steps", "save_steps": every,
                     "save_total_limit": 2, "load_best_model_at_end": True,
                     "metric_for_best_model": "eval_sts-dev_spearman_cosine"}}


def train_peer(recipe_name: str, model_dir: str | Path, text: str | Path, output_dir: str | Path, *, steps: int,
               batch_size: int = 64, max_length: int | None = None, seed: int = 1, precision: str = "fp32",
               progress: bool = True, teacher: str | Path | None = None) -> dict[str, Any]:
    """Train one recipe; the model is saved to ``output_dir/model``. Returns what ran (settings, wall seconds from
    loading the model to the saved result, the last logged loss). ``teacher``: the teacher of ``distill``."""
    import torch
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from transformers import set_seed

    recipe = RECIPES[recipe_name]
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision {precision!r}: fp32 or bf16")
    if (recipe.name == "distill") != (teacher is not None):
        raise ValueError("the distill recipe, and it alone, needs a teacher")
    output_dir = Path(output_dir)
    start = time.perf_counter()
    set_seed(seed)
    random.seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(str(model_dir), device=device)
    max_length = max_length or recipe.max_length or model.max_seq_length
    model.max_seq_length = max_length
    sentences = read_sentences(text)
    extra: dict[str, Any] = {"save_strategy": "no", "eval_strategy": "no"}
    setup = None
    if recipe.name == "distill":
        setup = _distill_setup(model, teacher, sentences, steps, seed, device)
        dataset, extra = setup["dataset"], setup["args"]
    else:
        dataset = _dataset(recipe, sentences)
    loss = _loss(recipe, model)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output_dir / "trainer"), max_steps=steps, per_device_train_batch_size=batch_size,
        learning_rate=recipe.lr, lr_scheduler_type=recipe.scheduler, warmup_steps=recipe.warmup_ratio,  # a ratio
        weight_decay=recipe.weight_decay, seed=seed, data_seed=seed, bf16=precision == "bf16",
        use_cpu=not torch.cuda.is_available(), report_to="none", logging_steps=max(1, steps // 20),
        dataloader_drop_last=True, disable_tqdm=not progress, **extra)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                                         evaluator=setup["evaluator"] if setup else None)
    output = trainer.train()
    model.save(str(output_dir / MODEL_DIR))
    if setup is not None:
        import shutil

        shutil.rmtree(output_dir / "trainer", ignore_errors=True)  # the example's checkpoints: the best is saved
    wall = time.perf_counter() - start
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    info = {"recipe": asdict(recipe), "steps": steps, "batch_size": batch_size, "max_length": max_length,
            "seed": seed, "precision": precision, "sentences": len(sentences), "wall_s": round(wall, 1),
            "train_runtime_s": round(float(output.metrics.get("train_runtime", 0.0)), 1),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "deletion": TSDAE_DELETION if recipe.name == "tsdae" else None,
            "pipeline": [type(m).__name__ for m in model], "model_dir": str(output_dir / MODEL_DIR)}
    if setup is not None:
        info.update(teacher=str(teacher), held_out=setup["held_out"], best_step=_best_step(trainer),
                    evaluations=[{k: v for k, v in h.items() if k.startswith("eval_") or k == "step"}
                                 for h in trainer.state.log_history if "eval_sts-dev_spearman_cosine" in h])
    return info


def _best_step(trainer: Any) -> int | None:
    checkpoint = trainer.state.best_model_checkpoint
    return int(str(checkpoint).rsplit("-", 1)[-1]) if checkpoint else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", choices=sorted(RECIPES))
    parser.add_argument("--text", required=True, help="one sentence per line")
    parser.add_argument("--model", required=True, help="a local sentence-transformers directory")
    parser.add_argument("--output", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, help="tokens of a training sentence (default: the recipe's)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--teacher", help="the distill recipe's teacher (a local sentence-transformers directory)")
    args = parser.parse_args(argv)
    info = train_peer(args.recipe, args.model, args.text, args.output, steps=args.steps, batch_size=args.batch_size,
                      max_length=args.max_length, seed=args.seed, precision=args.precision, teacher=args.teacher)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
