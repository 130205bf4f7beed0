#!/usr/bin/env bash
# Kiln's main job, end to end: installs what is missing, builds, starts
# kiln-server on localhost, compiles the example model through the `kiln` CLI
# (twice: the second compile is served from the kernel cache), runs an
# inference with per-kernel profiling, and prints the reports.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bazel build //server:kiln-server //client:kiln 2>&1 | grep -vE 'linux-sandbox|^[0-9.]+: src/main/tools' | tail -3

port=${KILN_PORT:-50051}
server=bazel-bin/server/kiln-server
kiln=bazel-bin/client/kiln
out_dir=$(mktemp -d)
log="$out_dir/server.log"

"$server" --port="$port" >"$log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true' EXIT

for _ in $(seq 1 100); do
  grep -q "listening" "$log" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
echo "== $(head -1 "$log")"

echo; echo "== kiln info"
"$kiln" info --server "127.0.0.1:$port"

echo; echo "== kiln doctor   (reachable, versions, CPU, kernel cache health)"
"$kiln" doctor --server "127.0.0.1:$port" || true

echo; echo "== kiln compile examples/mlp.pbtxt --name mlp"
"$kiln" compile examples/mlp.pbtxt --name mlp --server "127.0.0.1:$port"

echo; echo "== kiln compile examples/mlp.pbtxt --name mlp_again   (every kernel from the cache)"
"$kiln" compile examples/mlp.pbtxt --name mlp_again --server "127.0.0.1:$port"

echo; echo "== kiln infer mlp --input x=examples/x.npy --profile"
"$kiln" infer mlp --input x=examples/x.npy --output-dir "$out_dir" --profile --server "127.0.0.1:$port"

echo; echo "== kiln stats cache"
"$kiln" stats cache --server "127.0.0.1:$port"

echo; echo "outputs written to $out_dir"
