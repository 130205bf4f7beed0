#!/usr/bin/env bash
# What kiln-server adds to a model run: `kiln bench` through a local kiln-server
# (client round trip) against kiln-bench in process (CompiledModel::Run), and a
# bare gRPC ModelInfer round trip of the same payload (grpc-echo, its server a
# process of its own like kiln-server's, the client the CLI's KilnClient).
#   bench/server_overhead.sh [MODEL] [--batch B] [--threads T] [--iterations N] [--warmup W]
# MODEL defaults to the MLP of tests/models/export_models.py (exported by
# bench/models.py into /tmp/kiln-bench-models). p50s are compared.
set -euo pipefail
cd "$(dirname "$0")/.."

model="" batch=1 threads=1 iterations=1000 warmup=50
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --*) echo "usage: bench/server_overhead.sh [MODEL] [--batch B] [--threads T] [--iterations N] [--warmup W]" >&2; exit 2 ;;
    *) model="$1"; shift ;;
  esac
done

bazel build //server:kiln-server //client:kiln //bench:kiln-bench //bench:grpc-echo
if [ -z "$model" ]; then
  model=$(/usr/bin/python3 bench/models.py /tmp/kiln-bench-models mlp | tail -1)
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# start_server NAME CMD...: starts CMD in the background, waits for "listening
# on HOST:PORT" in its output and sets server_port (and server_pid).
server_port="" server_pid=""
start_server() {
  local log="$work/$1.log"
  shift
  "$@" >"$log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 100); do
    if grep -q listening "$log"; then
      server_port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
      return 0
    fi
    sleep 0.1
  done
  echo "server_overhead.sh: $* did not start:" >&2
  cat "$log" >&2
  return 1
}

common=(--batch "$batch" --iterations "$iterations" --warmup "$warmup" --json)
bazel-bin/bench/kiln-bench "$model" "${common[@]}" --threads "$threads" >"$work/inproc.json"

start_server kiln bazel-bin/server/kiln-server --port=0 --cache-dir=none --threads="$threads"
bazel-bin/client/kiln bench "$model" --server "localhost:$server_port" "${common[@]}" \
  >"$work/server.json"
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true

read -r input output < <(/usr/bin/python3 -c '
import json, re, sys
r = json.load(open(sys.argv[1]))
dims = lambda t: "x".join(re.search(r"\[(.*)\]", t).group(1).split(","))
print(r["input_names"].split()[0] + "=" + dims(r["inputs"].split()[0]), dims(r["outputs"].split()[0]))
' "$work/inproc.json")
start_server echo bazel-bin/bench/grpc-echo --serve --output "$output"
bazel-bin/bench/grpc-echo --server "localhost:$server_port" --input "$input" \
  --iterations "$iterations" --warmup "$warmup" --json >"$work/echo.json"

/usr/bin/python3 - "$work" "$model" "$batch" "$threads" "$iterations" "$input" "$output" <<'PY'
import json, sys
work, model, batch, threads, iterations, input_, output = sys.argv[1:]
load = lambda n: json.load(open(f"{work}/{n}.json"))
inproc, server, echo = load("inproc"), load("server"), load("echo")
us = lambda ms: ms * 1e3
rtt, run, bare = us(server["p50_ms"]), us(inproc["p50_ms"]), us(echo["p50_ms"])
print(f"{model}: batch {batch}, threads {threads}, {iterations} calls each, p50 "
      f"(input {input_}, output {output})")
print(f"  kiln bench through kiln-server, client round trip  {rtt:9.1f} us"
      f"   (server's own kernel time {us(server['server_p50_ms']):.1f} us)")
print(f"  kiln-bench in process, CompiledModel::Run          {run:9.1f} us"
      f"   (kernels alone {us(inproc['kernels_p50_ms']):.1f} us)")
print(f"  difference (what serving over gRPC adds)           {rtt - run:9.1f} us")
print(f"  bare gRPC ModelInfer round trip (grpc-echo)        {bare:9.1f} us")
print(f"server overhead over bare gRPC round trip: {rtt - run - bare:.1f} us")
PY
