#!/usr/bin/env bash
# Real models exported from Debian's PyTorch (resnet18, mobilenet_v2, an MLP
# and a transformer encoder; weights=None, fixed seed), compiled and run by a
# kiln-server, checked against PyTorch's own outputs:
# max |kiln - torch| <= 1e-4 * max(1, max |torch|).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
/usr/bin/python3 tests/models/export_models.py "$work/models" >/dev/null 2>&1

log="$work/server.log"
server/kiln-server --port=0 --cache-dir=none >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q listening "$log" && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
client/kiln onnx-test "$work"/models/{mlp,resnet18,mobilenet_v2,transformer} \
  --model-tolerance --server "localhost:$port"
