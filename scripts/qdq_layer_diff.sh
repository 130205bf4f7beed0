#!/usr/bin/env bash
# Where a QDQ model's quantised tensors first leave the float64 fake-quant
# reference (tests/models/export_zoo.py's fake_quant_reference): every
# QuantizeLinear output becomes a graph output, the model runs through a
# kiln-server of its own on its test input, and one line per tensor says how
# many of its integers differ and by how much at most.
# Usage: scripts/qdq_layer_diff.sh CASE_DIR [kiln compile flags...]
#   CASE_DIR: an exported zoo case (model.onnx, test_data_set_0/input_0.pb),
#   e.g. from /usr/bin/python3 tests/models/export_zoo.py OUT qdq_resnet18.
set -euo pipefail
case_dir=$(realpath "$1")
shift
cd "$(dirname "$0")/.."
repo=$PWD
bazel build //server:kiln-server //client:kiln 2>&1 | tail -1
work=$(mktemp -d)
/usr/bin/python3 - "$case_dir" "$work" <<'PY'
import sys
import numpy as np
import onnx
import torch
from onnx import numpy_helper
sys.path.insert(0, "tests/models")
import export_zoo
case, work = sys.argv[1], sys.argv[2]
model = onnx.load(case + "/model.onnx")
shapes = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
for node in model.graph.node:
    if node.op_type == "QuantizeLinear":
        model.graph.output.append(shapes[node.output[0]])
onnx.save(model, work + "/model.onnx")
x = numpy_helper.to_array(onnx.load_tensor(case + "/test_data_set_0/input_0.pb"))
np.save(work + "/input_0.npy", x)
with torch.no_grad():
    outputs = export_zoo.fake_quant_reference(model, (torch.from_numpy(x.copy()),))
names = [o.name.replace("/", "_") for o in model.graph.output]
for name, value in zip(names, outputs):
    np.save(work + "/want_" + name + ".npy", value.numpy())
open(work + "/names.txt", "w").write("\n".join(names))
PY
source tests/test_util/start_kiln_server.sh
cd bazel-bin
start_kiln_server "$work/server.log"
client/kiln compile "$work/model.onnx" --name layers --server "127.0.0.1:$port" "$@" >/dev/null
mkdir "$work/got"
client/kiln infer layers --input input_0="$work/input_0.npy" --output-dir "$work/got" \
  --server "127.0.0.1:$port" >/dev/null
kill "$server_pid"
cd "$repo"
/usr/bin/python3 - "$work" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
for name in open(work + "/names.txt").read().split("\n"):  # in graph order
    want, got = np.load(work + "/want_" + name + ".npy"), np.load(work + "/got/" + name + ".npy")
    if want.dtype.kind == "f":
        continue  # the model's own outputs: the model zoo compares those
    d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    print("%-50s %6d of %7d differ, by up to %d" % (name, int((d > 0).sum()), d.size,
                                                    int(d.max())))
PY
rm -rf "$work"
