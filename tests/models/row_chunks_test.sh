#!/usr/bin/env bash
# A batch served as slices (engine/row_chunks.h), end to end: two models
# exported from PyTorch with a dynamic batch axis (tests/models/export_zoo.py:
# a mobilenet_v3_small at batch 8 of 224x224 images, a BERT-style encoder
# with a padding mask at batch 16), loaded at their batch-1 shape and asked
# for the whole batch; and the same two exported with their batch baked in
# (fixed_b8, fixed_b16: the graph at one row is GraphAtRows's). Each must
# match PyTorch's outputs, and the server's timing must show the batch ran
# as one slice per row.
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
models=(mobilenet_v3_small_b8 bert_encoder_b16 mobilenet_v3_small_fixed_b8 bert_encoder_fixed_b16)
/usr/bin/python3 tests/models/export_zoo.py "$work/models" "${models[@]}" >/dev/null 2>&1

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log"
client/kiln onnx-test "${models[@]/#/$work/models/}" --model-tolerance \
  --server "127.0.0.1:$port" | tee "$work/result.txt"
grep -qx "${#models[@]} passed, 0 failed, 0 unsupported" "$work/result.txt"

# The same batches through compile and infer, then the timing.
/usr/bin/python3 - "$work" "${models[@]}" <<'PY'
import os, sys
import numpy as np
import onnx
from onnx import numpy_helper
work = sys.argv[1]
for name in sys.argv[2:]:
    data = os.path.join(work, "models", name, "test_data_set_0")
    for f in sorted(os.listdir(data)):
        if f.startswith("input_"):
            t = onnx.TensorProto()
            with open(os.path.join(data, f), "rb") as fh:
                t.ParseFromString(fh.read())
            np.save(os.path.join(work, "%s_%s.npy" % (name, f[:-3])), numpy_helper.to_array(t))
PY
for name in "${models[@]}"; do
  client/kiln compile "$work/models/$name/model.onnx" --name "$name" \
    --server "127.0.0.1:$port" >/dev/null
  inputs=()
  for f in "$work/${name}"_input_*.npy; do
    input=$(basename "$f" .npy)
    inputs+=(--input "${input#${name}_}=$f")
  done
  client/kiln infer "$name" "${inputs[@]}" --server "127.0.0.1:$port" >/dev/null
done
client/kiln stats timing --server "127.0.0.1:$port" | tee "$work/timing.txt"
grep -q "input_0=\[8,3,224,224\] .*(as 8 slices)" "$work/timing.txt"
grep -q "input_0=\[16,64\] input_1=\[16,64\] .*(as 16 slices)" "$work/timing.txt"
grep -q "^model mobilenet_v3_small_fixed_b8: 1 inferences.*(as 8 slices)$" "$work/timing.txt"
grep -q "^model bert_encoder_fixed_b16: 1 inferences.*(as 16 slices)$" "$work/timing.txt"
echo "row chunks: ok"
