#!/usr/bin/env bash
# The README's analysis figures, drawn from the CPU-protocol models (lab/protocol/run_protocol.sh trains them;
# a model not trained yet is left out with a message). Everything is STS-B test data, read-only: no model is
# selected here.
#   bash lab/protocol/figures.sh            # writes docs/figures/
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-docs/figures}
P=runs/protocol
cselab() { python -m cselab.cli "$@"; }

models=() labels=()
add() {  # add LABEL MODEL
  if [[ "$2" == all-MiniLM-L6-v2 || -d "$2" ]]; then models+=("$2"); labels+=("$1"); else echo "== left out $1: no $2"; fi
}
add "MiniLM untrained (mean)" all-MiniLM-L6-v2
add SimCSE         $P/simcse-bf16/best
add SimCSE++       $P/simcse-pp/best
add CoT-BERT       $P/cot-bert/best
add IFCL           $P/ifcl/best
add TNCSE          $P/tncse-dropout-0.1/stage2/best
add JTCSE          $P/jtcse-dropout-0.1/stage2/best
add JTCSE-D        $P/jtcse-distilled/best
joined=$(IFS=,; echo "${labels[*]}")

echo "== alignment and uniformity"
cselab analyze align-uniform "${models[@]}" --labels "$joined" --output "$OUT"
echo "== similarity density by gold group (the untrained start, the baseline and the twins: a readable row)"
dm=() dl=()
for i in "${!labels[@]}"; do
  case "${labels[$i]}" in MiniLM*|SimCSE|JTCSE|JTCSE-D) dm+=("${models[$i]}"); dl+=("${labels[$i]}");; esac
done
cselab analyze density "${dm[@]}" --labels "$(IFS=,; echo "${dl[*]}")" --output "$OUT"
for name in simcse-bf16:SimCSE jtcse-dropout-0.1:JTCSE; do
  run=${name%%:*} label=${name#*:}
  dir=$P/$run/best; [[ -d $dir ]] || dir=$P/$run/stage2/best
  if [[ -d $dir ]]; then
    echo "== attention: $label"
    cselab analyze attention "$dir" --label "$label" --output "$OUT/attention-$run"
  fi
done
echo "== inference cost (GMACs at 64 tokens)"
for i in "${!models[@]}"; do echo -n "${labels[$i]}: "; cselab analyze cost "${models[$i]}" --seq-len 64 | sed 's/.*: //'; done
