#!/bin/bash
# A soup of two adaptations from one checkpoint: the default's model and the clustering recipe's (the teacher's whole
# vector of passages with general sentences) of the same domain and seed, their weights mixed half and half
# (`cselab ensemble --combine weights --weight 0.5`; the weight fixed before any score), scored on the domain and on
# STS-B test (the stsb domain) as the domain study scores every model. Records: lab/results/soups.jsonl.
#   bash lab/domain_study/soup.sh SEED bbc-news [DOMAIN ...]
set -euo pipefail
seed=$1; shift
DEFAULT=cselab-distill-sim-nb3-guarded-mixed-s$seed
VECTORS=cselab-distill-pca-cos-general-s$seed
selected() { python -m lab.domain_study.selected_model "$1"; }
for domain in "$@"; do
  out=runs/soups/$domain-default+vectors-general-s$seed
  [ -d "$out" ] || python -m cselab.cli ensemble "$(selected "runs/domains/$domain/$DEFAULT")" \
    "$(selected "runs/domains/$domain/$VECTORS")" --output "$out" --weight 0.5 --combine weights
  scored=$domain; [ "$domain" = stsb ] || scored=$domain,stsb
  python -m lab.domain_study.score_suite --threads 2 --domains "$scored" \
    --model "default+vectors-general-s$seed@$domain=$out" --results lab/results/soups.jsonl
done
