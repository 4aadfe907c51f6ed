"""cselab as a library: train SimCSE, load the model, encode, evaluate, and use it from sentence-transformers.

    cselab data fetch all                  # STS-B, the default corpus and all-MiniLM-L6-v2 (once)
    python examples/quickstart.py          # 30 SimCSE steps on all-MiniLM-L6-v2 (a few minutes on a CPU)
    python examples/quickstart.py --backbone DIR --corpus FILE --steps 4 --output runs/quickstart
"""

from __future__ import annotations

import argparse

import numpy as np

import cselab


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="all-MiniLM-L6-v2")
    parser.add_argument("--corpus", default="default", help="'default' (fetched) or a text file, one sentence a line")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--output", default="runs/quickstart")
    args = parser.parse_args(argv)

    # 1. train: a preset file, a dict or (here) just the method and KEY=VALUE overrides; returns the saved model
    model_dir = cselab.train(None, f"model.backbone={args.backbone}", "model.pooler=cls", f"data.corpus={args.corpus}",
                             f"train.output_dir={args.output}", f"train.max_steps={args.steps}",
                             f"train.eval_every={max(1, args.steps // 2)}", "model.max_length=32",
                             method="simcse", progress=False)

    # 2. load and encode: numpy arrays, as sentence-transformers returns them
    model = cselab.load_model(model_dir)
    sentences = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell sharply."]
    embeddings = model.encode(sentences, normalize=True)
    similarity = embeddings @ embeddings.T
    print(f"{model}\ncosine similarities:\n{np.round(similarity, 3)}")

    # 3. evaluate on STS-B test (SentEval-style, cosine Spearman x 100)
    scores = cselab.evaluate(model, ["stsb"])
    print(f"STS-B test: {scores['stsb']['test']:.2f}")

    # 4. the same directory is a sentence-transformers model
    from sentence_transformers import SentenceTransformer

    st_embeddings = SentenceTransformer(str(model_dir), device="cpu").encode(sentences, normalize_embeddings=True)
    print(f"max |sentence-transformers - cselab|: {np.abs(st_embeddings - embeddings).max():.2e}")
    return {"model_dir": model_dir, "embeddings": embeddings, "st_embeddings": st_embeddings, "scores": scores}


if __name__ == "__main__":
    main()
