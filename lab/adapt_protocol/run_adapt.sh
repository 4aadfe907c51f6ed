#!/usr/bin/env bash
# The adaptation protocol (docs/adapt.md): every row of lab/results/adapt.jsonl is produced by one line
# of this script. Rows already recorded are not rerun unless FORCE=1.
#   bash lab/adapt_protocol/run_adapt.sh                 # all rows (hours on a CPU: pick rows)
#   bash lab/adapt_protocol/run_adapt.sh simcse-indomain,simcse-general   # only the named rows
# Training texts: "indomain" = stsb-train-minus-all-eval (every column held out), "indomain-b1" =
# stsb-train-minus-stsb-eval (the partial STS12-16 columns NOT held out), "general" = the default corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
RESULTS=${RESULTS:-lab/results/adapt.jsonl}
ONLY=${1:-}
INDOMAIN=(data.corpus=stsb-train-minus-all-eval)
INDOMAIN_B1=(data.corpus=stsb-train-minus-stsb-eval)
GENERAL=(data.corpus=default)

python -m cselab.cli data indomain   # the in-domain texts (needs `cselab data fetch sts`)

RUNS=runs/adapt ONLY_MATCH=exact
source lab/protocol/rows.sh

# SimCSE: the measured start of the protocol (T 0.2, lr 1e-5, 200 steps), on each training text
row simcse-indomain       "T 0.2, lr 1e-5"  configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}"
row simcse-general        "T 0.2, lr 1e-5"  configs/simcse/adapt-minilm.yaml "${GENERAL[@]}"
row simcse-indomain-b1    "T 0.2, lr 1e-5"  configs/simcse/adapt-minilm.yaml "${INDOMAIN_B1[@]}"
# precision auto (bf16 on a CPU where it pays) against the fp32 row above: the same recipe, ~2.6x cheaper steps here
row simcse-indomain-auto  "T 0.2, lr 1e-5, precision auto" configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}" train.precision=auto
# SimCSE tuned on dev (precision auto): a higher lr, a longer budget (dev still rose at step 200), T 0.1
row simcse-indomain-lr3e-5 "T 0.2, lr 3e-5"    configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}" train.lr=3e-5
row simcse-indomain-400    "T 0.2, lr 1e-5, 400 steps" configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}" train.max_steps=400
row simcse-indomain-t0.1   "T 0.1, lr 1e-5"    configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}" method_options.temperature=0.1
# b1 (ten times the sentences; the partial STS12-16 columns not held out, STS-B test held out): longer budgets
row simcse-indomain-b1-400 "T 0.2, lr 1e-5, 400 steps" configs/simcse/adapt-minilm.yaml "${INDOMAIN_B1[@]}" train.max_steps=400
row simcse-indomain-b1-lr3e-5 "T 0.2, lr 3e-5, 400 steps" configs/simcse/adapt-minilm.yaml "${INDOMAIN_B1[@]}" train.max_steps=400 train.lr=3e-5
# the papers' temperature, for the record: its loss is ~1e-4 from the start on this encoder
row simcse-indomain-t0.05 "T 0.05, lr 1e-5" configs/simcse/adapt-minilm.yaml "${INDOMAIN[@]}" method_options.temperature=0.05
# the other methods at the same settings (IFCL: its own text, parallel-de); the twins need CLS + MLP and use the
# CPU protocol's measured settings (their presets say why); both of their stages count
row simcse-pp-indomain    "T 0.2, lr 1e-5"  configs/simcse_pp/adapt-minilm.yaml "${INDOMAIN[@]}"
row simcse-pp-general     "T 0.2, lr 1e-5"  configs/simcse_pp/adapt-minilm.yaml "${GENERAL[@]}"
row ifcl-own-text         "T 0.2, lr 1e-5"  configs/ifcl/adapt-minilm.yaml
# SimCSE++ and IFCL tuned on dev like SimCSE: a higher lr, a lower temperature (their other options as in the papers)
row simcse-pp-indomain-lr3e-5 "T 0.2, lr 3e-5" configs/simcse_pp/adapt-minilm.yaml "${INDOMAIN[@]}" train.lr=3e-5
row simcse-pp-indomain-t0.1   "T 0.1, lr 1e-5" configs/simcse_pp/adapt-minilm.yaml "${INDOMAIN[@]}" method_options.temperature=0.1
row ifcl-own-text-lr3e-5      "T 0.2, lr 3e-5" configs/ifcl/adapt-minilm.yaml train.lr=3e-5
row ifcl-own-text-t0.1        "T 0.1, lr 1e-5" configs/ifcl/adapt-minilm.yaml method_options.temperature=0.1
# dev preferred T 0.1 for IFCL (87.35 against 87.04 at T 0.2): one step further down, and a higher lr at T 0.1
row ifcl-own-text-t0.05       "T 0.05, lr 1e-5" configs/ifcl/adapt-minilm.yaml method_options.temperature=0.05
row ifcl-own-text-t0.1-lr2e-5 "T 0.1, lr 2e-5" configs/ifcl/adapt-minilm.yaml method_options.temperature=0.1 train.lr=2e-5
row tncse-indomain        "CLS, CPU settings" configs/tncse/adapt-minilm.yaml "${INDOMAIN[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-indomain
row jtcse-indomain        "CLS, CPU settings" configs/jtcse/adapt-minilm.yaml "${INDOMAIN[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-indomain
row tncse-general         "CLS, CPU settings" configs/tncse/adapt-minilm.yaml "${GENERAL[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-general
row jtcse-general         "CLS, CPU settings" configs/jtcse/adapt-minilm.yaml "${GENERAL[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-general
# the twins' dev still rose at their last stage-2 step (best step 200 of 200 on most seeds): a longer stage 2,
# then their +UC by python -m lab.adapt_protocol.adapt_uc tncse-indomain-400 (and jtcse-indomain-400)
row tncse-indomain-400    "CLS, CPU settings, 400 steps" configs/tncse/adapt-minilm.yaml "${INDOMAIN[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-indomain train.max_steps=400
row jtcse-indomain-400    "CLS, CPU settings, 400 steps" configs/jtcse/adapt-minilm.yaml "${INDOMAIN[@]}" \
    method_options.pipeline.stage1_dir=runs/adapt/twin-stage1-indomain train.max_steps=400
# +UC (after the twin rows): python -m lab.adapt_protocol.adapt_uc ROW adds ROW+uc-all-MiniLM-L6-v2 (w chosen on dev);
# then the ensemble of the in-domain JTCSE twin distilled into one mean-pooled MiniLM (-D)
row jtcse-indomain-uc-d   "+UC -> one MiniLM (MSE)" configs/distill/adapt-minilm-uc.yaml \
    method_options.teacher=runs/adapt/jtcse-indomain/stage2-uc-all-MiniLM-L6-v2
# the same for the 400-step TNCSE +UC (the best ensemble on b2), by MSE and onto chosen pairs (b2 is smaller than
# b1: 400 pair steps, dev every 50)
row tncse-indomain-400-uc-d "+UC (400 steps) -> one MiniLM (MSE)" configs/distill/adapt-minilm-uc.yaml \
    method_options.teacher=runs/adapt/tncse-indomain-400/stage2-uc-all-MiniLM-L6-v2
row tncse-indomain-400-uc-pairs-d "+UC (400 steps) -> one MiniLM onto chosen pairs" \
    configs/distill/adapt-minilm-pairs.yaml "${INDOMAIN[@]}" train.max_steps=400 train.eval_every=50 \
    method_options.teacher=runs/adapt/tncse-indomain-400/stage2-uc-all-MiniLM-L6-v2
# The -D rows below learn from the b1 SimCSE model of seed 2 and its +UC with all-mpnet-base-v2. On a machine without
# those run directories (their records are in $RESULTS, so `cselab seeds` and adapt_uc.py would skip them) they are
# rebuilt here by the same commands, the seed-2 record going to a scratch file (runs/adapt/rebuilt.jsonl); bf16
# kernels differ between CPUs, so a rebuilt model can differ from the recorded one by a few hundredths.
if [[ -z "$ONLY" || "$ONLY" == *mpnet-d* ]]; then
  if [[ ! -d runs/adapt/simcse-b1-seed2/best ]]; then
    python -m cselab.cli seeds --config configs/simcse/adapt-minilm.yaml --seeds 2 --results runs/adapt/rebuilt.jsonl \
      --variant "T 0.2, lr 1e-5" "${INDOMAIN_B1[@]}" train.output_dir=runs/adapt/simcse-b1
  fi
  if [[ ! -d runs/adapt/simcse-b1-seed2-uc-all-mpnet-base-v2-concat ]]; then
    python -m cselab.cli ensemble runs/adapt/simcse-b1-seed2/best all-mpnet-base-v2 --combine concat --weight dev \
      --output runs/adapt/simcse-b1-seed2-uc-all-mpnet-base-v2-concat
  fi
fi
# -D from a larger outside model: python -m lab.adapt_protocol.adapt_uc simcse-indomain-b1 --seed 2 --outside all-mpnet-base-v2
# --combine concat first (the score-level +UC of the b1 SimCSE model and all-mpnet-base-v2), then that ensemble's
# in-batch similarities distilled into one MiniLM on b1, at two learning rates (dev chooses)
row simcse-b1-uc-mpnet-d       "+UC mpnet (concat) -> one MiniLM (similarities), lr 3e-5" configs/distill/adapt-minilm-uc-mpnet.yaml
row simcse-b1-uc-mpnet-d-lr1e-4 "+UC mpnet (concat) -> one MiniLM (similarities), lr 1e-4" configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4
# the same -D with the student starting from the b1 SimCSE model (the teacher's own first member) instead of the checkpoint
row simcse-b1-uc-mpnet-d-from-simcse "+UC mpnet (concat) -> the b1 SimCSE MiniLM (similarities), lr 1e-4" \
    configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4 model.backbone=runs/adapt/simcse-b1-seed2/best
# the same student and teacher, matching each sentence's softmax over the batch's other cosines (KL, T 0.05) instead
# of every cosine's value (MSE): the ranking of its neighbours
row simcse-b1-uc-mpnet-dkl-from-simcse "+UC mpnet (concat) -> the b1 SimCSE MiniLM (similarity distributions, T 0.05), lr 1e-4" \
    configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4 model.backbone=runs/adapt/simcse-b1-seed2/best \
    method_options.target=similarity_distributions method_options.temperature=0.05
# the dev-chosen -D above with every batch of related sentences: 16 sentences each with its 3 nearest neighbours by the
# teacher's cosine (64 sentences a batch, as above)
row simcse-b1-uc-mpnet-d-from-simcse-nn3 "+UC mpnet (concat) -> the b1 SimCSE MiniLM (similarities, 3 neighbours), lr 1e-4" \
    configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4 model.backbone=runs/adapt/simcse-b1-seed2/best \
    method_options.neighbours=3 train.batch_size=16
# a stronger teacher for -D: all-mpnet-base-v2 itself adapted with SimCSE on b1 (its own mean pooling, the SimCSE
# protocol settings, dev every 50: its steps cost ~8x MiniLM's), then combined with the b1 SimCSE MiniLM (seed 2) by
# python -m lab.adapt_protocol.adapt_uc simcse-indomain-b1 --seed 2 --outside runs/adapt/simcse-mpnet-indomain-b1/best --combine concat
row simcse-mpnet-indomain-b1 "all-mpnet-base-v2, T 0.2, lr 1e-5" configs/simcse/adapt-minilm.yaml "${INDOMAIN_B1[@]}" \
    model.backbone=all-mpnet-base-v2 train.eval_every=50
# ... and that ensemble distilled into the b1 SimCSE MiniLM as the row simcse-b1-uc-mpnet-d-from-simcse above
# (rebuilt first where its run directories are missing: the mpnet SimCSE run's record goes to the scratch file)
if [[ -z "$ONLY" || "$ONLY" == *smpnet-d* ]]; then
  if [[ ! -d runs/adapt/simcse-mpnet-indomain-b1/best ]]; then
    python -m cselab.cli train --config configs/simcse/adapt-minilm.yaml --results runs/adapt/rebuilt.jsonl \
      "${INDOMAIN_B1[@]}" model.backbone=all-mpnet-base-v2 train.eval_every=50 train.output_dir=runs/adapt/simcse-mpnet-indomain-b1
  fi
  if [[ ! -d runs/adapt/simcse-b1-seed2-uc-simcse-mpnet-indomain-b1-concat ]]; then
    python -m cselab.cli ensemble runs/adapt/simcse-b1-seed2/best runs/adapt/simcse-mpnet-indomain-b1/best \
      --combine concat --weight dev --output runs/adapt/simcse-b1-seed2-uc-simcse-mpnet-indomain-b1-concat
  fi
fi
row simcse-b1-uc-smpnet-d-from-simcse "+UC SimCSE-mpnet (concat) -> the b1 SimCSE MiniLM (similarities), lr 1e-4" \
    configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4 model.backbone=runs/adapt/simcse-b1-seed2/best \
    method_options.teacher=runs/adapt/simcse-b1-seed2-uc-simcse-mpnet-indomain-b1-concat
row simcse-b1-uc-smpnet-d "+UC SimCSE-mpnet (concat) -> one MiniLM (similarities), lr 1e-4" \
    configs/distill/adapt-minilm-uc-mpnet.yaml train.lr=1e-4 \
    method_options.teacher=runs/adapt/simcse-b1-seed2-uc-simcse-mpnet-indomain-b1-concat
# -D onto chosen pairs (target pairs): the SimCSE-adapted mpnet above as the teacher, one MiniLM from the checkpoint
# learning its cosine of each b1 sentence with one of its 30 nearest b1 sentences and with a random one; the teacher
# is rebuilt first where its run directory is missing (as above)
if [[ -z "$ONLY" || "$ONLY" == *pairs* ]]; then
  if [[ ! -d runs/adapt/simcse-mpnet-indomain-b1/best ]]; then
    python -m cselab.cli train --config configs/simcse/adapt-minilm.yaml --results runs/adapt/rebuilt.jsonl \
      "${INDOMAIN_B1[@]}" model.backbone=all-mpnet-base-v2 train.eval_every=50 train.output_dir=runs/adapt/simcse-mpnet-indomain-b1
  fi
fi
row mpnet-pairs-d "SimCSE-mpnet -> one MiniLM (pairs, 30 neighbours), 1200 steps" configs/distill/adapt-minilm-pairs.yaml
# seeds 2 and 3, each student learning from the mpnet teacher of its own seed (rebuilt where missing; the teachers'
# records go to the scratch file, their recorded rows are the mpnet SimCSE seeds 2-3 in $RESULTS)
for seed in 2 3; do
  if [[ -z "$ONLY" || "$ONLY" == *pairs* ]] && [[ ! -d runs/adapt/simcse-mpnet-indomain-b1-seed$seed/best ]]; then
    python -m cselab.cli seeds --config configs/simcse/adapt-minilm.yaml --seeds $seed --results runs/adapt/rebuilt.jsonl \
      --variant "all-mpnet-base-v2, T 0.2, lr 1e-5" "${INDOMAIN_B1[@]}" model.backbone=all-mpnet-base-v2 \
      train.eval_every=50 train.output_dir=runs/adapt/simcse-mpnet-indomain-b1
  fi
  row mpnet-pairs-d-seed$seed "SimCSE-mpnet -> one MiniLM (pairs, 30 neighbours), 1200 steps" \
      configs/distill/adapt-minilm-pairs.yaml train.seed=$seed \
      method_options.teacher=runs/adapt/simcse-mpnet-indomain-b1-seed$seed/best
done
