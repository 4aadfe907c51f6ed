#!/usr/bin/env bash
# lab/gpu/gpu_check.sh on a lent GPU machine whose image has torch, but no `python` command that reaches it
# (a symlink to the venv's python3 loses the venv, so a wrapper is written) and, by its package list, no pydantic.
# Carry the wheels of the packages it lacks in .whl/ (pydantic, pydantic-core, annotated-types,
# typing-inspection, typing-extensions) and run, from the repository root, inside the machine's time limit:
#
#   bash lab/gpu/gpu_check_device.sh OUT_DIR [SECONDS]     # SECONDS (default 400) for the whole check
#
# Every line goes to OUT_DIR/gpu_check.log as it is printed, and the results to OUT_DIR/gpu_check.jsonl, so
# a run cut short still leaves what it did. bf16 runs every preset first; fp16 gets what time is left.
set -uo pipefail
out=${1:?OUT_DIR}; budget=${2:-400}
cd "$(dirname "$0")/../.."
end=$(($(date +%s) + budget))
left() { echo $((end - $(date +%s))); }
exec > >(tee -a "$out/gpu_check.log") 2>&1
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site
fi
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec %s "$@"\n' "$(python3 -c 'import sys; print(sys.executable)')" > /tmp/bin/python
chmod +x /tmp/bin/python && export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1 WORK=${WORK:-/tmp/gpu-check}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python -c "import torch, transformers, sentence_transformers as st; print('torch', torch.__version__, 'transformers', transformers.__version__, 'sentence-transformers', st.__version__)"
PRECISIONS=bf16 timeout -k 10 $(($(left) * 3 / 4)) bash lab/gpu/gpu_check.sh "$out/gpu_check.jsonl"; echo "bf16: exit $?"
PRECISIONS=fp16 EXPORT=0 timeout -k 10 $(($(left) - 15)) bash lab/gpu/gpu_check.sh "$out/gpu_check.jsonl"; echo "fp16: exit $?"
