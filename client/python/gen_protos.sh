#!/usr/bin/env bash
# Generates the Python messages and gRPC stubs of Kiln's protos into OUT_DIR
# (a Python package: kiln/_proto). Bazel runs it (client/python:protos); run it
# by hand to use the client from a checkout:
#   client/python/gen_protos.sh client/python/kiln/_proto
# Debian's protoc and grpc_python_plugin (protobuf-compiler-grpc) generate
# code for the python3-protobuf and python3-grpcio of the same release.
# protoc writes `from proto import graph_pb2` for the protos' own imports;
# the package is kiln._proto, so those become relative imports. And the
# messages go into a descriptor pool of the package's own, not protobuf's
# default one: Triton's client registers the same `inference.*` messages
# there (from its own grpc_service.proto), and two files defining one symbol
# in one pool fail at import, so `import tritonclient.grpc, kiln` would.
set -euo pipefail

out=${1:?usage: gen_protos.sh OUT_DIR [REPO_ROOT]}
root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && /usr/bin/protoc -I. --python_out="$tmp" --grpc_python_out="$tmp" \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  proto/graph.proto proto/model_config.proto proto/grpc_service.proto proto/kiln_service.proto)

mkdir -p "$out"
for f in graph_pb2.py graph_pb2_grpc.py model_config_pb2.py grpc_service_pb2.py \
         grpc_service_pb2_grpc.py kiln_service_pb2.py kiln_service_pb2_grpc.py; do
  sed -e 's/^from proto import /from . import /' \
      -e 's/_descriptor_pool\.Default()/_descriptor_pool.POOL/' \
      -e 's/^from google\.protobuf import descriptor_pool as /from . import _pool as /' \
      "$tmp/proto/$f" > "$out/$f"
done
cat > "$out/_pool.py" <<'PY'
"""The descriptor pool Kiln's generated messages live in (see gen_protos.sh)."""
from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
PY
echo '"""Generated from proto/*.proto by client/python/gen_protos.sh."""' > "$out/__init__.py"
