#!/usr/bin/env bash
# What kiln-server adds to a model run: `kiln bench` through a local kiln-server
# (client round trip) against kiln-bench in process (CompiledModel::Run), and a
# bare gRPC ModelInfer round trip of the same payload (grpc-echo: its server a
# process of its own like kiln-server, its client the CLI's KilnClient, as
# `kiln bench` uses it), once answering at once and once after spinning as long
# as the model's Run takes (gRPC's threads sleep meanwhile and wake late).
#   bench/server_overhead.sh [MODEL] [--batch B] [--threads T] [--iterations N]
#                            [--warmup W] [--rounds R] [--inference-cpus LIST]
#                            [--infer-spin-us US]
# MODEL defaults to the MLP of tests/models/export_models.py (exported by
# bench/models.py into /tmp/kiln-bench-models). Every figure is a p50, the best
# of R rounds (default 3), the four measurements taking turns in each round.
# --inference-cpus binds kiln-server's inference threads there (its
# --inference_cpus) and runs the echo servers under taskset on the same CPUs;
# default: unbound. kiln-server is measured twice: as it starts by default
# (ModelInfer on its own thread polling 100 us after each call, which also
# skips the wake-up the echo pays) and with --infer_spin_us US (default 0:
# ModelInfer on gRPC's sync threads, which sleep between calls).
set -euo pipefail
cd "$(dirname "$0")/.."

model="" batch=1 threads=1 iterations=1000 warmup=50 rounds=3
cpus="" spin_us=0
usage="usage: bench/server_overhead.sh [MODEL] [--batch B] [--threads T] [--iterations N] [--warmup W] [--rounds R] [--inference-cpus LIST] [--infer-spin-us US]"
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --inference-cpus) cpus="$2"; shift 2 ;;
    --infer-spin-us) spin_us="$2"; shift 2 ;;
    --*) echo "$usage" >&2; exit 2 ;;
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
# on HOST:PORT" in its output and sets server_port.
server_port=""
start_server() {
  local log="$work/$1.log"
  shift
  "$@" >"$log" 2>&1 &
  pids+=("$!")
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
inproc() { bazel-bin/bench/kiln-bench "$model" "${common[@]}" --threads "$threads"; }
inproc >"$work/inproc.0.json"
# The payload's shapes, and the Run time the busy echo spins for.
read -r input output busy_us < <(/usr/bin/python3 -c '
import json, re, sys
r = json.load(open(sys.argv[1]))
dims = lambda t: "x".join(re.search(r"\[(.*)\]", t).group(1).split(","))
print(r["input_names"].split()[0] + "=" + dims(r["inputs"].split()[0]),
      dims(r["outputs"].split()[0]), round(r["p50_ms"] * 1e3))
' "$work/inproc.0.json")

on_cpus=()
[ -n "$cpus" ] && on_cpus=(taskset -c "$cpus")
start_server kiln bazel-bin/server/kiln-server --port=0 --cache-dir=none --threads="$threads" \
  --inference_cpus="$cpus"
kiln_port=$server_port
start_server kiln_alt bazel-bin/server/kiln-server --port=0 --cache-dir=none \
  --threads="$threads" --inference_cpus="$cpus" --infer_spin_us="$spin_us"
kiln_alt_port=$server_port
start_server echo "${on_cpus[@]}" bazel-bin/bench/grpc-echo --serve --output "$output"
echo_port=$server_port
start_server busy "${on_cpus[@]}" bazel-bin/bench/grpc-echo --serve --output "$output" \
  --busy-us "$busy_us"
busy_port=$server_port
echo_client() {
  bazel-bin/bench/grpc-echo --server "127.0.0.1:$1" --input "$input" --iterations "$iterations" \
    --warmup "$warmup" --json
}
for r in $(seq 1 "$rounds"); do
  bazel-bin/client/kiln bench "$model" --server "127.0.0.1:$kiln_port" "${common[@]}" \
    >"$work/server.$r.json"
  bazel-bin/client/kiln bench "$model" --server "127.0.0.1:$kiln_alt_port" "${common[@]}" \
    >"$work/alt.$r.json"
  inproc >"$work/inproc.$r.json"
  echo_client "$echo_port" >"$work/echo.$r.json"
  echo_client "$busy_port" >"$work/busy.$r.json"
done

/usr/bin/python3 - "$work" "$model" "$batch" "$threads" "$iterations" "$rounds" "$input" \
  "$output" "$busy_us" "$cpus" "$spin_us" <<'PY'
import glob, json, sys
work, model, batch, threads, iterations, rounds, input_, output, busy_us, cpus, spin_us = sys.argv[1:]
def best(name):
    runs = [json.load(open(p)) for p in glob.glob(f"{work}/{name}.[1-9]*.json")]
    return min(runs, key=lambda r: r["p50_ms"])
inproc, server, echo, busy = best("inproc"), best("server"), best("echo"), best("busy")
alt = best("alt")
us = lambda ms: ms * 1e3
rtt, run, bare, slow = (us(server["p50_ms"]), us(inproc["p50_ms"]), us(echo["p50_ms"]),
                        us(busy["p50_ms"]))
print(f"{model}: batch {batch}, threads {threads}; input {input_}, output {output}; "
      f"p50 of {iterations} calls, best of {rounds} rounds")
print(f"  servers' inference threads on CPUs {cpus} (kiln-server --inference_cpus, echo under "
      f"taskset)" if cpus else "  servers unbound (no --inference_cpus)")
line = lambda label, value, note="": print(f"  {label:<50}{value:9.1f} us" + (f"   ({note})" if note else ""))
line("kiln bench through kiln-server, client round trip", rtt,
     f"server's own kernel time {us(server['server_p50_ms']):.1f} us")
line(f"same, kiln-server --infer_spin_us={spin_us}", us(alt["p50_ms"]),
     f"server's own kernel time {us(alt['server_p50_ms']):.1f} us")
line("kiln-bench in process, CompiledModel::Run", run,
     f"kernels alone {us(inproc['kernels_p50_ms']):.1f} us")
line("difference: what serving over gRPC adds", rtt - run)
line("bare gRPC ModelInfer round trip (grpc-echo)", bare)
line(f"same, the handler spinning {busy_us} us first", slow,
     f"gRPC waking after a busy handler: {slow - bare - float(busy_us):.1f} us")
print(f"server overhead over bare gRPC round trip: {rtt - run - bare:.1f} us")
print(f"server overhead over a gRPC call whose handler takes as long as Run: {rtt - slow:.1f} us")
print(f"with --infer_spin_us={spin_us}: over bare gRPC round trip "
      f"{us(alt['p50_ms']) - run - bare:.1f} us, over the busy handler {us(alt['p50_ms']) - slow:.1f} us")
PY
