#!/usr/bin/env bash
# Kiln vs ONNX Runtime vs PyTorch on the benchmark models (see compare_models.py):
#   bench/compare_models.sh [--models resnet18,mlp] [--batches 1,8] [--threads 1,2]
#                           [--iterations 50] [--warmup 5] [--rounds R] [--runtimes kiln,ort,torch] [--json]
# Slow: every cell is a fresh process that compiles the model cold.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/setup.sh
bazel build //bench:kiln-bench //bench:stream
exec /usr/bin/python3 bench/compare_models.py "$@"
