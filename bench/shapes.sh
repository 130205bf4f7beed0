#!/usr/bin/env bash
# Shapes on demand, measured (issue 19's figures): one kiln-server, memory-only
# kernel cache, models exported by bench/models.py (symbolic batch).
#   bench/shapes.sh [--max-batch N] [--iterations N] [--model NAME] [--skip SECTION]...
# Sections, each a table:
#   sweep      batch 1..N on one loaded model (default resnet18): the first
#              request of each new size (compile on the request path, with
#              --exact-shapes-only), its steady p50, and the p50 of a model
#              compiled for exactly that shape (`kiln bench --exact`); the
#              compiles the sweep needed.
#   padded     the first request of each size that is not a power of two when
#              the powers of two are loaded at start: served from the next
#              larger one, padded, while the size compiles in the background.
#   throughput 16 concurrent batch-1 clients on the MLP and resnet18, dynamic
#              batching off and on (max 16, preferred 4/8/16, delay 500 us /
#              2000 us).
#   cold       resnet18's cold compile in process (kiln-bench), phase by phase.
set -euo pipefail
cd "$(dirname "$0")/.."

max_batch=32 iterations=20 model=resnet18
skip=()
usage="usage: bench/shapes.sh [--max-batch N] [--iterations N] [--model NAME] [--skip sweep|padded|throughput|cold]..."
while [ $# -gt 0 ]; do
  case "$1" in
    --max-batch) max_batch="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --skip) skip+=("$2"); shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
skipped() { [[ " ${skip[*]} " == *" $1 "* ]]; }

bazel build //server:kiln-server //client:kiln //bench:kiln-bench >/dev/null 2>&1
models=/tmp/kiln-bench-models
file=$(/usr/bin/python3 bench/models.py "$models" "$model" | tail -1)
mlp=$(/usr/bin/python3 bench/models.py "$models" mlp | tail -1)
resnet=$(/usr/bin/python3 bench/models.py "$models" resnet18 | tail -1)

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A fresh server (cold kernel cache) for each section.
port=""
restart_server() {
  [ -n "$server_pid" ] && { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  bazel-bin/server/kiln-server --port=0 --cache-dir=none --max-shape-variants=64 \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$work/server.log" | head -1)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "shapes.sh: kiln-server did not start" >&2
  cat "$work/server.log" >&2
  exit 1
}
kiln() { bazel-bin/client/kiln "$@" --server "127.0.0.1:$port"; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
echo "CPU: $cpu, $(nproc) cores; model $model"

if ! skipped sweep; then
  restart_server
  kiln compile "$file" --name sym --exact-shapes-only >/dev/null
  echo
  echo "sweep: one loaded $model, batch 1..$max_batch"
  printf "%6s %14s %12s %12s %8s\n" batch "first req ms" "p50 ms" "exact ms" ratio
  for b in $(seq 1 "$max_batch"); do
    sym=$(kiln bench --model sym --batch "$b" --iterations "$iterations" --warmup 2 --json)
    exact=$(kiln bench "$file" --exact --batch "$b" --iterations "$iterations" --warmup 2 --json)
    first=$(field first_request_ms <<<"$sym")
    p50=$(field p50_ms <<<"$sym")
    ep50=$(field p50_ms <<<"$exact")
    printf "%6d %14.1f %12.3f %12.3f %8.3f\n" "$b" "$first" "$p50" "$ep50" \
      "$(/usr/bin/python3 -c "print($p50 / $ep50)")"
  done
  kiln stats timing sym | grep "shapes:"
fi

if ! skipped padded; then
  restart_server
  eager=()
  for ((b = 1; b <= max_batch; b *= 2)); do eager+=(--eager-shape "batch=$b"); done
  kiln compile "$file" --name pad "${eager[@]}" >/dev/null
  echo
  echo "padded: $model loaded at powers of two up to $max_batch; the first request of each"
  echo "other size (served from the next loaded batch while it compiles; each compile"
  echo "lands before the next size is asked for)"
  printf "%6s %14s\n" batch "first req ms"
  for b in $(seq 1 "$max_batch"); do
    ((b & (b - 1))) || continue
    r=$(kiln bench --model pad --batch "$b" --iterations 1 --warmup 0 --json)
    printf "%6d %14.1f\n" "$b" "$(field first_request_ms <<<"$r")"
    for _ in $(seq 1 600); do
      kiln stats timing pad --json | grep -q "input=\[$b," && break
      sleep 0.1
    done
  done
  kiln stats timing pad | grep "shapes:\|padded"
fi

if ! skipped throughput; then
  echo
  echo "throughput: 16 concurrent clients, batch 1"
  printf "%-10s %-34s %12s %10s %10s %12s\n" model batching "rows/s" "p50 ms" "p99 ms" "mean batch"
  for m in mlp resnet18; do
    f=$mlp iters=1000 delay=500
    [ "$m" = resnet18 ] && f=$resnet iters=10 delay=2000
    for mode in off on; do
      restart_server
      extra=()
      [ "$mode" = on ] && extra=(--max-batch-size 16 --preferred-batch-size 4 \
        --preferred-batch-size 8 --preferred-batch-size 16 --max-queue-delay-us "$delay")
      r=$(kiln bench "$f" --concurrency 16 --iterations "$iters" --warmup 3 --json "${extra[@]}")
      printf "%-10s %-34s %12.1f %10.3f %10.3f %12.2f\n" "$m" \
        "$([ "$mode" = on ] && echo "max 16, pref 4/8/16, ${delay} us" || echo off)" \
        "$(field throughput_per_s <<<"$r")" "$(field p50_ms <<<"$r")" \
        "$(field p99_ms <<<"$r")" "$(field mean_server_batch <<<"$r")"
    done
  done
fi

if ! skipped cold; then
  echo
  echo "cold compile: resnet18 in process, memory-only cache, 3 runs"
  for _ in 1 2 3; do
    bazel-bin/bench/kiln-bench "$resnet" --iterations 1 --warmup 0 | grep -i "compile" | head -2
  done
fi
