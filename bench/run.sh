#!/usr/bin/env bash
# The side-by-side benchmarks, by hand (they are not tests):
#   bench/run.sh models [compare_models.py flags]   Kiln vs ONNX Runtime vs PyTorch
#   bench/run.sh gemm   [gemm_gflops.py flags]      GEMM GFLOPS: Kiln, OpenBLAS, oneDNN
# Installs what the peers need (OpenBLAS, oneDNN, node), builds Kiln, runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh libopenblas-dev libdnnl-dev nodejs npm
bazel build //server:kiln-server //client:kiln
what="${1:-models}"
shift || true
case "$what" in
  models) exec /usr/bin/python3 bench/compare_models.py "$@" ;;
  gemm) exec /usr/bin/python3 bench/gemm_gflops.py "$@" ;;
  *) echo "usage: bench/run.sh models|gemm [flags]" >&2; exit 2 ;;
esac
