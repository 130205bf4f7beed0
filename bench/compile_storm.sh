#!/usr/bin/env bash
# Inference latency while models compile (issue 20's admission goal: MLP
# inference p99 within 2x of idle while 24 distinct models compile).
#   bench/compile_storm.sh [--models N] [--iterations N]
# For --compile-nice 10 (the default) and 0 (compiles at inference's
# priority): the MLP's p50/p99 with one client and no compiles, then again
# while N distinct resnet18 compiles (batch 1..N, so no kernel is shared
# across them... mostly) are sent at once; compiles past --max-concurrent-
# compiles wait their turn.
set -euo pipefail
cd "$(dirname "$0")/.."

count=24 iterations=3000 rounds=500
while [ $# -gt 0 ]; do
  case "$1" in
    --models) count="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    *) echo "usage: bench/compile_storm.sh [--models N] [--iterations N]" >&2; exit 2 ;;
  esac
done

bazel build //server:kiln-server //client:kiln >/dev/null 2>&1
models=/tmp/kiln-bench-models
resnet=$(/usr/bin/python3 bench/models.py "$models" resnet18 | tail -1)

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=""
start_server() {
  [ -n "$server_pid" ] && { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  bazel-bin/server/kiln-server --port=0 --cache-dir=none --max-models=64 "$@" \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$work/server.log" | head -1)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "compile_storm.sh: kiln-server did not start" >&2
  cat "$work/server.log" >&2
  exit 1
}
kiln() { bazel-bin/client/kiln "$@" --server "127.0.0.1:$port"; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
echo "CPU: $cpu, $(nproc) cores; MLP inference, 1 client, $iterations calls; $count resnet18 compiles"
printf '%-14s %-10s %10s %10s %12s\n' "compile-nice" "while" "p50 ms" "p99 ms" "compiles s"
for nice in 10 0; do
  start_server --compile-nice="$nice"
  kiln compile examples/mlp.pbtxt --name mlp >/dev/null
  idle=$(kiln bench --model mlp --iterations "$iterations" --json)
  printf '%-14s %-10s %10.3f %10.3f %12s\n' "$nice" "idle" "$(echo "$idle" | field p50_ms)" \
    "$(echo "$idle" | field p99_ms)" "-"
  storm_start=$(date +%s.%N)
  pids=()
  for i in $(seq 1 "$count"); do
    kiln compile "$resnet" --name "r$i" --input-shape "input=${i}x3x224x224" >/dev/null 2>&1 &
    pids+=($!)
  done
  sleep 0.5
  # Rounds of calls for as long as any compile runs; the medians over rounds.
  : >"$work/rounds"
  while kill -0 "${pids[@]}" 2>/dev/null; do
    kiln bench --model mlp --iterations "$rounds" --json >>"$work/rounds"
    echo >>"$work/rounds"
  done
  for p in "${pids[@]}"; do wait "$p" || echo "a compile failed" >&2; done
  storm_s=$(/usr/bin/python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$storm_start" "$(date +%s.%N)")
  read -r p50 p99 n <<<"$(/usr/bin/python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(statistics.median(r["p50_ms"] for r in rows), statistics.median(r["p99_ms"] for r in rows), len(rows))
' "$work/rounds")"
  printf '%-14s %-10s %10.3f %10.3f %12.1f   (%s rounds of %s)\n' "$nice" "compiling" "$p50" "$p99" \
    "$storm_s" "$n" "$rounds"
done
