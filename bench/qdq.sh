#!/usr/bin/env bash
# The quantised resnet18 (issue 21): Kiln on the QDQ file against Kiln on the
# float32 resnet18 of the same size, and ONNX Runtime on both files, p50 at
# batch 1 on 1 and 2 threads. The QDQ model is the model zoo's qdq_resnet18
# (torchvision's quantisable resnet18, qnnpack, 112x112); the float32 one is
# the same network unquantised, exported at the same size.
#   bench/qdq.sh [--iterations N]
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=50
[ "${1:-}" = "--iterations" ] && iterations="$2"
bash bench/setup.sh >/dev/null
bazel build //bench:kiln-bench >/dev/null 2>&1
work=$(mktemp -d)
/usr/bin/python3 tests/models/export_zoo.py "$work" qdq_resnet18 >/dev/null 2>&1
/usr/bin/python3 - "$work" <<'PY' >/dev/null 2>&1
import os, sys, torch, torchvision
out = os.path.join(sys.argv[1], "fp32_resnet18")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).eval()
torch.onnx.export(model, (torch.randn(1, 3, 112, 112),), os.path.join(out, "model.onnx"),
                  opset_version=13, input_names=["input_0"], output_names=["output_0"])
PY
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "CPU: $cpu; batch 1; p50 ms over $iterations iterations"
printf '%-16s %-8s %10s %10s\n' model threads kiln ort
for name in fp32_resnet18 qdq_resnet18; do
  for threads in 1 2; do
    k=$(bazel-bin/bench/kiln-bench "$work/$name/model.onnx" --threads "$threads" \
          --iterations "$iterations" --json | /usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["p50_ms"])')
    o=$(node bench/ort_bench.js "$work/$name/model.onnx" --threads "$threads" \
          --iterations "$iterations" --json | /usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["p50_ms"])')
    printf '%-16s %-8s %10s %10s\n' "$name" "$threads" "$k" "$o"
  done
done
rm -rf "$work"
