#!/usr/bin/env bash
# Shapes on demand with real models: the MLP and resnet18 exported with a
# symbolic batch, the transformer with a symbolic batch and sequence length,
# each loaded once and run at several sizes (1, a prime, the largest:
# export_models.py SAMPLE_SIZES), checked against PyTorch at every one:
# max |kiln - torch| <= 1e-4 * max(1, max |torch|).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
/usr/bin/python3 tests/models/export_models.py "$work/models" --shapes mlp resnet18 transformer \
  >/dev/null 2>&1

log="$work/server.log"
server/kiln-server --port=0 --cache-dir=none >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q listening "$log" && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
client/kiln onnx-test "$work"/models/{mlp,resnet18,transformer} \
  --model-tolerance --server "localhost:$port"
