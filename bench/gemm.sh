#!/usr/bin/env bash
# float32 GEMM GFLOPS: Kiln vs OpenBLAS (cblas_sgemm) vs oneDNN (dnnl_sgemm), in
# one process (see gemm_bench.cc):
#   bench/gemm.sh [--threads 1,2] [--shapes square,inference|MxKxN,...] [--repeats R]
#                 [--min-repeat-ms MS] [--stat median|min] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh  # libopenblas-dev, libdnnl-dev among the rest
bazel build //bench:gemm-bench
# Debian's OpenBLAS 0.3.21 does not recognise this CPU and would fall back to
# SSE3 kernels (4-5x slower); it reads this when it loads. Set, not
# defaulted: the build machines preset OPENBLAS_CORETYPE=Haswell, which halves
# OpenBLAS here (100 against 190 GFLOPS at 2048^3) and flattered Kiln.
export OPENBLAS_CORETYPE=SkylakeX
exec bazel-bin/bench/gemm-bench "$@"
