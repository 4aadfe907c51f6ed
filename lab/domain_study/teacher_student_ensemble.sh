#!/bin/bash
# Beyond the teacher: the untouched teacher and the student the default adapted on a domain (seed 1, the step its
# guard kept), concatenated at w 0.5 (cosine = the mean of the two models' cosines; w fixed before any score), each
# ensemble scored on its own domain as the domain study scores every model. Records: lab/results/moonshot.jsonl.
#   bash lab/domain_study/teacher_student_ensemble.sh tweets linux-man stsb bbc-news
set -euo pipefail
TEACHER=${CSELAB_HOME:-$HOME/.cache/cselab}/models/all-mpnet-base-v2
STUDENT=cselab-distill-sim-nb3-guarded-mixed-s1
for domain in "$@"; do
  out=runs/moonshot/$domain-mpnet+mixed-s1
  student=$(python -m lab.domain_study.selected_model "runs/domains/$domain/$STUDENT")
  [ -d "$out" ] || python -m cselab.cli ensemble "$TEACHER" "$student" --output "$out" \
    --weight 0.5 --combine concat
  python -m lab.domain_study.score_suite --threads 2 --domains "$domain" \
    --model "all-mpnet-base-v2+mixed-s1@$domain=$out" --results lab/results/moonshot.jsonl
done
