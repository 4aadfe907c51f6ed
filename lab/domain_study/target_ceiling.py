"""How well the vector recipes' *target* itself scores general similarity: the teacher's vectors reduced to the
student's width by the leading directions of a run's training text (``projection: pca-rotation``'s own
``cselab.methods.distill.leading_directions``; the rotation and its scale change no cosine, so the reduction is what
a student that met its target exactly would score), on STS-B **dev**, beside the teacher unreduced and the untouched
student.

Why: the vector recipes trained with general sentences beside the domain's text still ended below the STS-B floor;
if the reduced target itself scores below the untouched student, no budget or share of general sentences can keep the
floor, and the reduction (not the training) is what to change. Dev, not test: this informs the next recipe.

    python -m lab.domain_study.target_ceiling --run runs/domains/bbc-news/cselab-distill-pca-cos-s1 \
        --run runs/domains/bbc-news/cselab-distill-pca-cos-general-s1

One record per command in ``lab/results/target_ceiling.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from lab.record import RESULTS_DIR, append_record

RESULTS = RESULTS_DIR / "target_ceiling.jsonl"


def cosine_spearman(a: np.ndarray, b: np.ndarray, gold: list[float]) -> float:
    """Spearman (x100) between the cosines of the rows of ``a`` and ``b`` and ``gold``."""
    from scipy.stats import spearmanr

    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(100 * spearmanr(cos, gold).statistic)


def main(argv: list[str] | None = None) -> None:
    import torch

    from cselab.data.evalsets.sts import read_stsb_file, stsb_dir
    from cselab.methods.distill import leading_directions
    from cselab.models.sentence_model import load_model
    from cselab.paths import resolve_model_path
    from cselab.teacher.vectors import read_teacher_vectors

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", default=[], type=Path, help="a domain-study run directory of a "
                        "vector recipe (its train.txt and its teacher pass)")
    parser.add_argument("--teacher", default="all-mpnet-base-v2")
    parser.add_argument("--student", default="all-MiniLM-L6-v2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not args.run:
        parser.error("give --run RUN_DIR (one or more)")
    for run in args.run:
        if not (run / "train.txt").is_file() or not (run / "teacher").is_dir():
            parser.error(f"--run {run}: no train.txt and teacher pass (a vector recipe's run directory)")
    torch.set_num_threads(args.threads)
    rows = read_stsb_file(stsb_dir() / "sts-dev.csv")
    first, second = [r.sentence1 for r in rows], [r.sentence2 for r in rows]
    gold = [r.score for r in rows]

    def unit_vectors(model: Any, texts: list[str]) -> np.ndarray:
        with torch.no_grad():
            vectors = model.encode(texts, batch_size=64).float().numpy().astype(np.float64)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    student = load_model(resolve_model_path(args.student), pooler="mean")
    width = int(student.hidden_size)
    scores: dict[str, Any] = {"student": cosine_spearman(unit_vectors(student, first), unit_vectors(student, second),
                                                         gold)}
    del student
    teacher = load_model(resolve_model_path(args.teacher))
    t1, t2 = unit_vectors(teacher, first), unit_vectors(teacher, second)
    scores["teacher"] = cosine_spearman(t1, t2, gold)
    for run in args.run:
        texts = (run / "train.txt").read_text(encoding="utf-8").splitlines()
        unit = np.asarray(read_teacher_vectors(run / "teacher", texts), dtype=np.float64)
        unit /= np.linalg.norm(unit, axis=1, keepdims=True)
        basis = leading_directions(torch.from_numpy(unit), width).numpy()
        scores[str(run)] = cosine_spearman(t1 @ basis, t2 @ basis, gold)
        print(f"{run}: the reduced teacher {scores[str(run)]:.2f}", flush=True)
    print(f"STS-B dev: student {scores['student']:.2f}, teacher {scores['teacher']:.2f}")
    append_record(args.results, {"split": "stsb-dev", "width": width, "teacher": args.teacher,
                                 "student": args.student, "spearman": {k: round(v, 2) for k, v in scores.items()}},
                  __file__, argv)


if __name__ == "__main__":
    main()
