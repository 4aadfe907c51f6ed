#!/usr/bin/env bash
# Package directories in which sentence-transformers' OWN onnx and openvino backends run beside cselab's environment.
#
# Why: sentence-transformers' backends load through optimum (optimum-onnx for ONNX Runtime, optimum-intel for
# OpenVINO), and no release of either installs with cselab's transformers (5.x, here 5.24): every optimum-onnx
# release pins transformers<4.58, optimum-intel 2.2.0 (the newest) pins transformers<5.6 and huggingface-hub<1.22
# and pulls torchvision (hence a new torch). So they go into separate directories (`pip install --target`, no
# dependencies) that are put in front of the venv's site-packages with PYTHONPATH; torch, numpy, onnxruntime,
# openvino and nncf still come from the venv (`cselab[export]`), which this script never changes.
#
#   bash lab/speed/st_backend_envs.sh [DIR]     # default DIR: $CSELAB_HOME/st-backends (~/.cache/cselab/...)
#   PYTHONPATH=DIR/onnx python -c 'from sentence_transformers import SentenceTransformer; ...backend="onnx"'
#   python -m lab.speed.encode_backends --st-onnx-path DIR/onnx --st-openvino-path DIR/openvino
set -euo pipefail
PYTHON=${PYTHON:-python}
DIR=${1:-${CSELAB_HOME:-$HOME/.cache/cselab}/st-backends}
# ONNX Runtime: optimum-onnx 0.1.0 (the newest) needs transformers <4.58 and optimum 2.1; sentence-transformers
# 5.7.0 is the newest that accepts that transformers.
"$PYTHON" -m pip install --no-deps --target "$DIR/onnx" \
  sentence-transformers==5.7.0 transformers==4.57.6 tokenizers==0.22.2 huggingface_hub==0.36.2 \
  optimum==2.1.0 optimum-onnx==0.1.0 datasets==4.8.4 httpx==0.28.1 httpcore==1.0.9
# datasets 4.8.4 and httpx: what that huggingface_hub and sentence-transformers' calibration-set loader import.
# OpenVINO: optimum-intel 2.2.0 (the newest) needs transformers <5.6, huggingface-hub <1.22 and optimum 2.3.
"$PYTHON" -m pip install --no-deps --target "$DIR/openvino" \
  sentence-transformers==5.7.0 transformers==5.5.4 tokenizers==0.22.2 huggingface_hub==1.21.0 \
  optimum==2.3.0 optimum-intel==2.2.0 openvino-tokenizers==2026.4.1.0 datasets==4.8.4 httpx==0.28.1 httpcore==1.0.9
echo "ready: $DIR/onnx $DIR/openvino"
