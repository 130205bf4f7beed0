#!/usr/bin/env bash
# Real models exported from Debian's PyTorch (resnet18, mobilenet_v2, an MLP
# and a transformer encoder; weights=None, fixed seed), compiled and run by a
# kiln-server, checked against PyTorch's own outputs:
# max |kiln - torch| <= 1e-4 * max(1, max |torch|).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
/usr/bin/python3 tests/models/export_models.py "$work/models" >/dev/null 2>&1

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log"
client/kiln onnx-test "$work"/models/{mlp,resnet18,mobilenet_v2,transformer} \
  --model-tolerance --server "127.0.0.1:$port"
