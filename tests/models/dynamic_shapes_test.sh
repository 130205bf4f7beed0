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

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log"
client/kiln onnx-test "$work"/models/{mlp,resnet18,transformer} \
  --model-tolerance --server "127.0.0.1:$port"
