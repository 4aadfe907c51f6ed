#!/usr/bin/env bash
# GPU check: the paper presets on one CUDA GPU with randomly initialised bert-base / roberta-base (no hub, no
# fetched data: lab/gpu/gpu_check_setup.py writes the backbones, a synthetic corpus and a synthetic STS-B).
#
#   bash lab/gpu/gpu_check.sh [RESULTS_JSONL]      # default lab/results/gpu_check.jsonl
#
# Per preset (SimCSE, SimCSE++, CoT-BERT, TNCSE stage 2, JTCSE stage 2; bert-base and, where the paper has
# one, roberta-base) and per precision (bf16, fp16): STEPS (50) training steps at the preset's batch size,
# a dev evaluation at the start, at STEPS/2 and at the end, a checkpoint at each, and the test scoring after
# training (all on the GPU). Prints steps/s and peak GPU memory, appends one JSON line per run. Then, when
# the machine has 2 GPUs or more, a 2-process torchrun of SimCSE (NCCL, global negatives). Nothing depends
# on this script; the scores are meaningless (random weights, synthetic data), the run is the check.
#
# Then the serving paths of the SimCSE model (lab/gpu/gpu_export_check.py: sentence-transformers on the GPU,
# cselab's ONNX export fp32/int8). A failed run is reported and the check goes on; the exit status is 1 if any failed.
#
# Environment: STEPS (50), PRECISIONS ("bf16 fp16"), PRESETS (all below), WORK (a temporary directory),
# EXTRA (more KEY=VALUE overrides for every run, e.g. "train.chunk_size=16"), DEVICE (cuda; "cpu" for a
# smoke run of the script itself: STEPS=2 PRECISIONS=bf16 DEVICE=cpu EXTRA="train.batch_size=4").
set -euo pipefail
cd "$(dirname "$0")/../.."
RESULTS=${1:-lab/results/gpu_check.jsonl}
STEPS=${STEPS:-50}
PRECISIONS=${PRECISIONS:-"bf16 fp16"}
PRESETS=${PRESETS:-"simcse/paper-bert-base simcse/paper-roberta-base simcse_pp/paper-bert-base cot_bert/paper-bert-base cot_bert/paper-roberta-base tncse/paper-bert-base tncse/paper-roberta-base jtcse/paper-bert-base jtcse/paper-roberta-base"}
WORK=${WORK:-$(mktemp -d -t cselab-gpu-check-XXXX)}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH=${PYTHONPATH:-}:src PYTHONUNBUFFERED=1

[ "$DEVICE" = cpu ] || python - <<'EOF'
import torch
assert torch.cuda.is_available(), "gpu_check.sh needs a CUDA GPU (DEVICE=cpu for a smoke run)"
print(f"GPU: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}, bf16 {torch.cuda.is_bf16_supported()}")
EOF
[ -d "$WORK/bert-base" ] || python -m lab.gpu.gpu_check_setup "$WORK"
export CSELAB_HOME=$WORK/home
mkdir -p "$WORK/runs"
failures=0  # a failed run is reported and the check goes on, so one start of a lent GPU sees every preset
mkdir -p "$(dirname "$RESULTS")"

for preset in $PRESETS; do
  backbone=$WORK/bert-base
  case $preset in *roberta*) backbone=$WORK/roberta-base ;; esac
  case $preset in
    tncse/*|jtcse/*)  # stage 2 from two (random) stage-1 encoders; the backbone's pooler stands in for P
      model=(method_options.pipeline=null method_options.encoder_1=$backbone method_options.encoder_2=$backbone
             method_options.allow_backbone_pooler=true) ;;
    *) model=(model.backbone=$backbone) ;;
  esac
  for precision in $PRECISIONS; do
    out=$WORK/runs/${preset//\//-}-$precision
    start=$(date +%s.%N)
    python -m cselab.cli train --config configs/$preset.yaml "${model[@]}" data.corpus=$WORK/corpus.txt \
      train.max_steps=$STEPS train.eval_every=$((STEPS / 2)) train.precision=$precision train.device=$DEVICE \
      train.output_dir=$out ${EXTRA:-} > "$out.log" 2>&1 || {
      echo "FAILED $preset $precision:"; tail -20 "$out.log"; failures=$((failures + 1)); continue; }
    python - "$out" "$preset" "$precision" "$start" "$RESULTS" "$STEPS" <<'EOF'
import json, sys, time
from pathlib import Path
from cselab.provenance import provenance
out, preset, precision, start, results, steps = sys.argv[1:]
summary = json.loads((Path(out) / "summary.json").read_text())
config = json.loads((Path(out) / "results.json").read_text())["config"]["effective"]
batch = config["train"]["batch_size"]
steps_per_s = summary["train_sentences_per_s"] / batch
row = {"benchmark": "gpu_check", "preset": preset, "precision": precision, "steps": summary["steps"],
       "batch_size": batch, "max_length": config["model"]["max_length"], "steps_per_s": round(steps_per_s, 2),
       "peak_gpu_mem_mb": round(summary["peak_mem_mb"]), "wall_s": round(time.time() - float(start), 1),
       "checkpoints": sorted(p.name for p in Path(out).iterdir() if p.is_dir()), **provenance()}
print(f"{preset:28s} {precision}  B {batch:3d}  {steps_per_s:6.2f} steps/s  peak {row['peak_gpu_mem_mb']:6d} MB  "
      f"wall {row['wall_s']:.0f} s  saved {','.join(row['checkpoints'])}")
with open(results, "a") as f:
    f.write(json.dumps(row) + "\n")
EOF
  done
done

gpus=$(python -c "import torch; print(torch.cuda.device_count() if '$DEVICE' != 'cpu' else 0)")
if [ "$gpus" -ge 2 ]; then
  out=$WORK/runs/torchrun-simcse
  if python -m torch.distributed.run --standalone --nproc_per_node 2 -m cselab.cli train \
      --config configs/simcse/paper-bert-base.yaml model.backbone=$WORK/bert-base data.corpus=$WORK/corpus.txt \
      train.max_steps=$STEPS train.eval_every=$((STEPS / 2)) train.precision=bf16 train.output_dir=$out ${EXTRA:-} \
      > "$out.log" 2>&1; then
    echo "torchrun 2 processes: $(python -c "import json; s=json.load(open('$out/summary.json')); print(f\"{s['train_sentences_per_s']:.0f} sentences/s, peak {s['peak_mem_mb']:.0f} MB on rank 0\")")"
  else
    echo "FAILED torchrun:"; tail -20 "$out.log"; failures=$((failures + 1))
  fi
else
  # NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so one GPU gets no 2-process run
  echo "torchrun: skipped ($gpus GPU; NCCL needs one GPU per process)"
fi

# the serving paths of a SimCSE model saved above (sentence-transformers on the GPU, cselab's ONNX export);
# EXPORT=0 skips them. CoT-BERT's prompt models and the twins of TNCSE/JTCSE are not exported (export refuses them).
exported=$WORK/runs/simcse-paper-bert-base-${PRECISIONS%% *}/best
if [ "${EXPORT:-1}" = 1 ] && [ "$DEVICE" != cpu ] && [ -d "$exported" ]; then
  python -m lab.gpu.gpu_export_check "$exported" "$WORK/corpus.txt" "$RESULTS" || failures=$((failures + 1))
fi
echo "results appended to $RESULTS; $failures failed"
[ "$failures" = 0 ]
