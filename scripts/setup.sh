#!/usr/bin/env bash
# Installs the Debian packages Kiln builds against, only those that are missing.
# Idempotent: a machine that has everything runs no apt command at all.
# Extra package names given as arguments are installed too (bench/run.sh
# adds the peers it compares against).
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms bazel-rules-java
  llvm-16-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev
  libonnx-dev python3-onnx python3-numpy python3-torch python3-torchvision
  zlib1g-dev libzstd-dev libtinfo-dev libxml2-dev libedit-dev libffi-dev
  libopenblas-dev libdnnl-dev  # peers //bench:gemm-bench links against
  openssl  # tests/server:auth_test makes its TLS certificates
  libssl-dev  # libcrypto's SHA-256 (cache keys, upload checksums)
  libcpp-httplib-dev nlohmann-json3-dev  # server/http: KServe v2 REST, /metrics, their tests
  clang-16 libfuzzer-16-dev libclang-rt-16-dev  # fuzz/ (scripts/fuzz.sh): compiler, sanitizers
  python3-grpcio python3-yaml  # client/python (Python client) and deploy/ (manifest test)
  libcli11-dev  # CLI11, the argument parser of kiln and the bench tools (header-only)
  libhiredis-dev redis-server  # the remote kernel cache tier (--remote-cache) and its tests
  nginx  # deploy/nginx: grpc_pass in front of replicas (tests/server:cluster_test)
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
