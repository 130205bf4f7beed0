#!/usr/bin/env bash
# The benchmarks, by hand (they are not tests); each installs what it needs and builds:
#   bench/run.sh models [flags]   Kiln vs ONNX Runtime vs PyTorch      (compare_models.sh)
#   bench/run.sh gemm   [flags]   GEMM GFLOPS: Kiln, OpenBLAS, oneDNN  (gemm.sh)
#   bench/run.sh server [flags]   kiln-server's overhead per request   (server_overhead.sh)
#   bench/run.sh shapes [flags]   shapes on demand, dynamic batching   (shapes.sh)
#   bench/run.sh compile-storm    inference p99 while models compile   (compile_storm.sh)
set -euo pipefail
here="$(dirname "$0")"
what="${1:-models}"
shift || true
case "$what" in
  models) exec "$here/compare_models.sh" "$@" ;;
  gemm) exec "$here/gemm.sh" "$@" ;;
  server) exec "$here/server_overhead.sh" "$@" ;;
  shapes) exec "$here/shapes.sh" "$@" ;;
  compile-storm) exec "$here/compile_storm.sh" "$@" ;;
  *) echo "usage: bench/run.sh models|gemm|server|shapes|compile-storm [flags]" >&2; exit 2 ;;
esac
