#!/usr/bin/env bash
# Writes the object code and optimised LLVM IR of every kernel of the sample
# models into OUT_DIR/<model>_b<batch>/, so that two builds can be compared:
#   bench/dump_kernels.sh /tmp/before        # at the old commit
#   bench/dump_kernels.sh /tmp/after         # at the new one
#   diff -r /tmp/before /tmp/after && echo identical
# A change that promises unchanged kernels (a refactor) proves it this way.
# The models come from bench/models.py, exported once into /tmp/kiln-sample-models
# (same seed every time) and kept out of OUT_DIR so that only kernels compare.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/dump_kernels.sh OUT_DIR [MODEL...]}"
shift
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp resnet18 mobilenet_v2 transformer eltwise_chain)

bash scripts/setup.sh
bazel build //bench:kiln-bench 2>&1 | grep -vE 'linux-sandbox|^INFO|^Loading|^Analyzing' || true
models_dir=/tmp/kiln-sample-models
mkdir -p "$out" "$models_dir"
for m in "${models[@]}"; do
  [ -f "$models_dir/$m/model.onnx" ] || /usr/bin/python3 bench/models.py "$models_dir" "$m" >/dev/null
  for b in 1 8; do
    dir="$out/${m}_b$b"
    rm -rf "$dir" && mkdir -p "$dir"
    bazel-bin/bench/kiln-bench "$models_dir/$m/model.onnx" --batch "$b" --dump-objects "$dir"
  done
done
