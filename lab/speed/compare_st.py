"""cselab vs sentence-transformers on the same CPU, side by side in ONE process: training steps and encoding.

Training: cselab's SimCSE step (``Trainer.batch_at`` + ``Trainer.train_step``: tokenisation, one forward of
both dropout views, InfoNCE, backward, AdamW) against sentence-transformers' own SimCSE recipe
(``MultipleNegativesRankingLoss`` on (s, s) pairs, CLS pooling, scale 1/tau = 20, AdamW as its trainer's
default ``adamw_torch_fused``; tokenisation inside the timed step, bf16 by autocast as its trainer does).
Both see the same sentences at every step, the same model directory, learning rate and precision. The
steps are INTERLEAVED (one step of every configuration per round), so a shared or throttling CPU slows
all alike and the ratios stay fair; absolute times from a shared machine mean little, the ratios do.

``precision: auto``: the probe (cselab.runtime.precision) picks bf16 or fp32 for this machine at the
training shapes; the "auto" ratio is cselab at that choice against sentence-transformers in fp32, the
precision a user gets by default.

Encoding: ``Encoder.encode`` vs ``SentenceTransformer.encode`` (mean pooling and L2 normalisation: the
model's own pipeline) on the same STS-B sentences, rounds alternating, in fp32 and under bf16 autocast; the
embeddings are compared (max |difference|, min cosine).

Times are CPU seconds of this process (see ``time_call``; wall times are recorded too), and a training
configuration's figure is its mean step over the rounds (the total: length-grouped batches differ in cost
by design; time a whole window: --rounds = train.length_group_window).

MFU: the model FLOPs of a training step (6 x tokens x linear weights + attention, non-padding tokens
only, so padding counts as waste) per second, over the matmul peak measured in this run at the same
precision and thread count (the best of a square 1024^3 and the model's feed-forward shape).

    python -m lab.speed.compare_st --threads 1 --warmup 2 --rounds 16 --encode-n 0          # the preset
    python -m lab.speed.compare_st --threads 1 --warmup 2 --rounds 16 --encode-n 1000 \
        --common model.dropout_masks=bits train.length_group_window=16                   # with the levers
    python -m lab.speed.compare_st --threads 1 --rounds 0 --encode-n 1000 --encode-rounds 3  # encoding only

Prints ratios (cselab speed / sentence-transformers speed: >1 means cselab is faster) and appends one JSON
record with provenance to ``lab/results/compare_st.jsonl``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import RESULTS_DIR, ROOT

RESULTS = RESULTS_DIR / "compare_st.jsonl"
PRESET = ROOT / "configs" / "simcse" / "cpu-minilm.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3, help="untimed training steps per configuration")
    parser.add_argument("--rounds", type=int, default=10,
                        help="timed training steps per configuration (0: skip training)")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--common", nargs="*", default=[], metavar="KEY=VALUE",
                        help="cselab config overrides (levers) on top of the SimCSE CPU preset")
    parser.add_argument("--encode-n", type=int, default=2000, help="sentences to encode (0: skip encoding)")
    parser.add_argument("--encode-rounds", type=int, default=3)
    parser.add_argument("--encode-batch", type=int, default=64)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--no-record", action="store_true")
    return parser.parse_args(argv)


# -- sentence-transformers' side ----------------------------------------------------------------------
class StRecipe:
    """sentence-transformers' unsupervised SimCSE: Transformer + CLS Pooling, MNRL on (s, s), fused AdamW."""

    def __init__(self, path: str, max_length: int, lr: float, temperature: float, precision: str) -> None:
        import torch
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer import losses, modules

        word = modules.Transformer(path, max_seq_length=max_length)
        pooling = modules.Pooling(word.get_embedding_dimension(), pooling_mode="cls")
        self.model = SentenceTransformer(modules=[word, pooling], device="cpu")
        self.loss = losses.MultipleNegativesRankingLoss(self.model, scale=1.0 / temperature)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, fused=True)
        self.precision = precision
        self.model.train()

    def step(self, sentences: list[str]) -> None:
        import contextlib

        import torch

        features = [self.model.preprocess(sentences), self.model.preprocess(sentences)]
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16"
                    else contextlib.nullcontext())
        with autocast:
            loss = self.loss(features, None)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


# -- cselab's side ------------------------------------------------------------------------------------
def build_cselab(model_path: str, args: argparse.Namespace, precision: str) -> Any:
    from cselab.config.run_config import load_config
    from cselab.training.trainer import Trainer

    overrides = [f"model.backbone={model_path}", f"model.max_length={args.max_length}",
                 f"train.batch_size={args.batch}", f"train.precision={precision}", "train.device=cpu",
                 "train.output_dir=/nonexistent/compare_st", *args.common]
    trainer = Trainer(load_config(PRESET, overrides))
    trainer.method.train()
    return trainer


def batch_sentences(trainer: Any, step: int) -> list[str]:
    """The sentences of cselab's batch ``step`` (so both sides train on the same ones)."""
    from cselab.training.trainer import epoch_order

    epoch, position = divmod(step, trainer.steps_per_epoch)
    order = epoch_order(len(trainer.examples), trainer.config.train.seed, epoch)
    size = trainer.config.train.batch_size
    return [trainer.examples[i] for i in order[position * size : (position + 1) * size].tolist()]


def step_flops(backbone_config: Any, token_counts: list[int], head: bool) -> float:
    """Model FLOPs of one training step (forward + backward = 3 x forward) over the NON-padding tokens."""
    h, inter, layers = backbone_config.hidden_size, backbone_config.intermediate_size, backbone_config.num_hidden_layers
    linear = layers * (4 * h * h + 2 * h * inter)  # Q, K, V, output projection + the feed-forward pair
    tokens = sum(token_counts)
    forward = 2 * tokens * linear + layers * sum(4 * n * n * h for n in token_counts)  # QK^T and AV
    if head:
        forward += 2 * len(token_counts) * h * h
    return 3.0 * forward


def matmul_peak(threads: int) -> dict[str, float]:
    """Best GFLOP/s of fp32 and bf16 matmuls at this thread count (square 1024^3 and the FFN shape)."""
    from cselab.runtime.precision import MatmulShape, probe_matmul

    # CPU time, like the steps it is compared with
    square = probe_matmul(MatmulShape(1024, 1024, 1024), seconds=1.0, clock=time.process_time)
    ffn = probe_matmul(MatmulShape(4096, 384, 1536), seconds=1.0, clock=time.process_time)
    return {k: max(square[k], ffn[k]) for k in square}


def time_call(fn: Any) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) of ``fn()``.

    CPU time is the figure compared: on a machine shared with other jobs a single-threaded step's wall time
    also counts the time it waited for a core, its CPU time does not (both are recorded).
    """
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def compare_training(args: argparse.Namespace, model_path: str) -> dict[str, Any]:
    import torch

    runs: dict[str, Any] = {}
    for precision in args.precisions:
        trainer = build_cselab(model_path, args, precision)
        tc, temperature = trainer.config.train, trainer.method.options.temperature
        runs[f"cselab-{precision}"] = ("cselab", trainer)
        runs[f"st-{precision}"] = ("st", StRecipe(model_path, args.max_length, tc.lr, temperature, precision))
    any_trainer = next(obj for kind, obj in runs.values() if kind == "cselab")
    times: dict[str, list[float]] = {name: [] for name in runs}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    tokens_per_step: list[list[int]] = []

    def one(name: str, step: int) -> tuple[float, float]:
        kind, obj = runs[name]
        if kind == "cselab":
            return time_call(lambda: obj.train_step(obj.batch_at(step)))
        sentences = batch_sentences(any_trainer, step)
        return time_call(lambda: obj.step(sentences))

    # warm-up on batches far from the timed ones, so the timed rounds start at step 0: with length-grouped
    # batches (train.length_group_window) --rounds equal to the window then times whole windows
    far = any_trainer.steps_per_epoch // 2
    for step in range(far, far + args.warmup):
        for name in runs:
            one(name, step)
    for step in range(args.rounds):
        mask = any_trainer.batch_at(step)["attention_mask"]
        tokens_per_step.append(mask.sum(dim=1).tolist() * 2)  # two views of every sentence
        for name in runs:
            cpu, elapsed = one(name, step)
            times[name].append(cpu)
            wall[name].append(elapsed)
    peak = matmul_peak(torch.get_num_threads())
    # mean = total time over the rounds: length-grouped batches differ in cost by design, so a median
    # would pick one batch; compared over whole windows the total is fair
    mean_time = {name: statistics.fmean(t) for name, t in times.items()}
    backbone = any_trainer.method.encoder.backbone.config
    flops = statistics.fmean(step_flops(backbone, t, head=True) for t in tokens_per_step)
    padding = 1 - statistics.fmean(sum(t) / (len(t) * max(t)) for t in tokens_per_step)
    ratios = {p: mean_time[f"st-{p}"] / mean_time[f"cselab-{p}"] for p in args.precisions}
    mfu = {p: flops / mean_time[f"cselab-{p}"] / 1e9 / peak[p] for p in args.precisions}
    st_mfu = {p: flops / mean_time[f"st-{p}"] / 1e9 / peak[p] for p in args.precisions}
    record: dict[str, Any] = {
        "ms_mean": {name: round(1000 * m, 1) for name, m in mean_time.items()},
        "ms_all": {name: [round(1000 * t, 1) for t in ts] for name, ts in times.items()},
        "wall_ms_mean": {name: round(1000 * statistics.fmean(t), 1) for name, t in wall.items()},
        "speedup_vs_st_same_precision": ratios,
        "matmul_peak_gflops": peak, "step_model_gflop": flops / 1e9, "padding_fraction": padding,
        "mfu": mfu, "st_mfu": st_mfu,
    }
    from cselab.runtime.precision import model_shape, resolve_precision

    choice = resolve_precision("auto", torch.device("cpu"),
                               model_shape(backbone, 2 * args.batch * args.max_length))
    record["auto"] = choice.to_dict()
    if f"cselab-{choice.precision}" in mean_time and "st-fp32" in mean_time:
        record["speedup_auto_vs_st_fp32"] = mean_time["st-fp32"] / mean_time[f"cselab-{choice.precision}"]
    return record


def padding_fraction(lengths: list[int], order: list[int], batch_size: int) -> float:
    """Share of the token slots that are padding when ``order`` is cut into batches padded to their longest."""
    slots = real = 0
    for start in range(0, len(order), batch_size):
        batch = [lengths[i] for i in order[start : start + batch_size]]
        slots, real = slots + len(batch) * max(batch), real + sum(batch)
    return 1 - real / slots


def compare_encoding(args: argparse.Namespace, model_path: str) -> dict[str, Any]:
    import contextlib

    import torch
    from sentence_transformers import SentenceTransformer

    from cselab.models.sentence_model import load_model
    from lab.speed.encode_benchmark import sts_sentences

    sentences = sts_sentences(args.encode_n)
    theirs = SentenceTransformer(model_path, device="cpu")
    ours = load_model(model_path, pooler="mean")
    ours.max_length = theirs.max_seq_length  # the same truncation
    record: dict[str, Any] = {"n": len(sentences), "batch_size": args.encode_batch, "rounds": args.encode_rounds}
    # the padding each side's batching leaves (what separates their work): cselab sorts by token count,
    # sentence-transformers by characters
    lengths = [len(row) for row in ours.token_rows(sentences)]
    record["padding_fraction"] = {
        "cselab": padding_fraction(lengths, sorted(range(len(sentences)), key=lambda i: -lengths[i]),
                                   args.encode_batch),
        "st": padding_fraction(lengths, sorted(range(len(sentences)), key=lambda i: -len(sentences[i])),
                               args.encode_batch),
    }
    for precision in args.precisions:
        def autocast() -> Any:
            return (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"  # noqa: B023
                    else contextlib.nullcontext())

        def run_ours() -> torch.Tensor:
            with autocast():
                # the model directory's sentence-transformers pipeline ends in Normalize: the same output here
                return ours.encode(sentences, batch_size=args.encode_batch, normalize=True)

        def run_theirs() -> torch.Tensor:
            with autocast():
                return theirs.encode(sentences, batch_size=args.encode_batch, convert_to_tensor=True,
                                     normalize_embeddings=False)

        outputs = {"cselab": run_ours(), "st": run_theirs()}  # warm-up
        times: dict[str, list[float]] = {"cselab": [], "st": []}
        for _ in range(args.encode_rounds):
            for name, fn in (("cselab", run_ours), ("st", run_theirs)):
                start = time.process_time()
                outputs[name] = fn()
                times[name].append(time.process_time() - start)
        a, b = outputs["cselab"].float(), outputs["st"].float().cpu()
        rate = {k: len(sentences) / statistics.median(v) for k, v in times.items()}
        record[precision] = {
            "sentences_per_cpu_s": rate, "speedup_vs_st": rate["cselab"] / rate["st"],
            "max_abs_diff": float((a - b).abs().max()),
            "min_cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=-1).min()),
        }
    from cselab.runtime.precision import inference_precision

    choice = inference_precision("auto", ours, args.encode_batch)
    record["auto"] = choice.to_dict()
    if choice.precision in record and "fp32" in record:
        cselab_rate = record[choice.precision]["sentences_per_cpu_s"]["cselab"]
        record["speedup_auto_vs_st_fp32"] = cselab_rate / record["fp32"]["sentences_per_cpu_s"]["st"]
    return record


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from cselab.models.backbone import quiet_transformers
    from cselab.paths import resolve_model_path
    from cselab.runtime.precision import cpu_model_name

    torch.set_num_threads(args.threads)
    quiet_transformers()
    model_path = resolve_model_path(args.model)
    record: dict[str, Any] = {
        "benchmark": "compare_st", "cpu": cpu_model_name(), "threads": torch.get_num_threads(),
        "settings": {"model": args.model, "batch_size": args.batch, "max_length": args.max_length,
                     "warmup": args.warmup, "rounds": args.rounds, "common": args.common, "interleaved": True},
    }
    print(f"compare_st: {args.model}, B {args.batch} x 2 views, max_len {args.max_length}, {record['threads']} "
          f"threads, {record['cpu']}; cselab levers: {' '.join(args.common) or 'preset defaults'}", file=sys.stderr)
    if args.rounds:
        train = compare_training(args, model_path)
        record["training"] = train
        print("training step, CPU ms (mean of interleaved rounds; wall ms beside it):")
        for name, ms in train["ms_mean"].items():
            print(f"  {name:<14} {ms:8.1f}  {train['wall_ms_mean'][name]:8.1f}")
        for p, r in train["speedup_vs_st_same_precision"].items():
            print(f"  {p}: cselab {r:.2f}x sentence-transformers' speed; MFU cselab {100 * train['mfu'][p]:.1f}% vs "
                  f"st {100 * train['st_mfu'][p]:.1f}% of the measured {train['matmul_peak_gflops'][p]:.0f} GFLOP/s")
        auto = train["auto"]
        print(f"  auto -> {auto['precision']} ({auto['reason']})")
        if "speedup_auto_vs_st_fp32" in train:
            print(f"  cselab precision auto vs sentence-transformers fp32: {train['speedup_auto_vs_st_fp32']:.2f}x")
        print(f"  padding: {100 * train['padding_fraction']:.1f}% of token slots")
    if args.encode_n:
        enc = compare_encoding(args, model_path)
        record["encoding"] = enc
        for p in args.precisions:
            e = enc[p]
            print(f"encode {p}: cselab {e['sentences_per_cpu_s']['cselab']:.0f} "
                  f"vs st {e['sentences_per_cpu_s']['st']:.0f} "
                  f"sent/CPU-s = {e['speedup_vs_st']:.2f}x; max |diff| {e['max_abs_diff']:.2e}, "
                  f"min cos {e['min_cosine']:.6f}")
        pad = enc["padding_fraction"]
        print(f"encode padding: cselab {100 * pad['cselab']:.1f}%, st {100 * pad['st']:.1f}% of the token slots")
        if "speedup_auto_vs_st_fp32" in enc:
            print(f"encode: cselab --precision auto ({enc['auto']['precision']}) vs sentence-transformers fp32: "
                  f"{enc['speedup_auto_vs_st_fp32']:.2f}x")
    if not args.no_record:
        from lab.record import append_record

        append_record(args.results, record, __file__, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
