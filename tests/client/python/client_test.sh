#!/usr/bin/env bash
# The Python client's tests on Debian's python3 (python3-grpcio, -numpy, -onnx):
# tensors_test alone, client_test against a kiln-server started here.
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
export PYTHONPATH="$PWD/client/python" PYTHONDONTWRITEBYTECODE=1
/usr/bin/python3 tests/client/python/tensors_test.py
# The same messages under another file name in protobuf's default pool, as
# Triton's client registers them.
# Triton's grpc_service.proto imports its model_config.proto from beside it.
mkdir -p "$work/foreign"
cp proto/model_config.proto "$work/foreign/"
sed 's|^import "proto/model_config.proto";|import "model_config.proto";|' proto/grpc_service.proto \
  > "$work/foreign/grpc_service.proto"
/usr/bin/protoc -I"$work/foreign" --python_out="$work/foreign" \
  "$work/foreign/model_config.proto" "$work/foreign/grpc_service.proto"
/usr/bin/python3 tests/client/python/coexist_test.py "$work/foreign"
source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log" --threads=1 --max-message-mb=1  # 1: see the upload test
KILN_SERVER="127.0.0.1:$port" /usr/bin/python3 tests/client/python/client_test.py
