#!/usr/bin/env bash
# What the benchmarks need beyond Kiln's own build, installed only when missing:
# Debian's OpenBLAS and oneDNN (in scripts/setup.sh's list), node and npm, and
# onnxruntime-node 1.30.0 in bench/node_modules. Its install script is skipped:
# the package ships the CPU library, and the script would download the GPU one.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
command -v node >/dev/null || extra+=(nodejs)
command -v npm >/dev/null || extra+=(npm)
bash scripts/setup.sh "${extra[@]}"
if [ ! -f bench/node_modules/onnxruntime-node/package.json ]; then
  echo "bench/setup.sh: installing onnxruntime-node 1.30.0 into bench/node_modules" >&2
  (cd bench && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >&2)
fi
