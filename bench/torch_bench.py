#!/usr/bin/python3
"""torch-bench: PyTorch 1.13 eager on one benchmark model, with the flags and
output of kiln-bench.

    /usr/bin/python3 bench/torch_bench.py MODEL [--batch B] [--threads T]
        [--iterations N] [--warmup W] [--json]

MODEL is a name from bench/models.py (mlp, resnet18, mobilenet_v2,
transformer, eltwise_chain) or the path of one of their ONNX files
(DIR/NAME/model.onnx): the module is rebuilt here the way the export built it,
same seed, so the weights are the ones the other runtimes load. Settings:
torch.set_num_threads(T), one inter-op thread, inference_mode.

Debian's PyTorch does its matrix products in Debian's OpenBLAS 0.3.21 (the
pthread build, with a pool of its own), which reads its settings when it loads,
so they are set before torch is imported, unless the environment has them:
OPENBLAS_NUM_THREADS=T (otherwise --threads 1 still multiplies on every core)
and OPENBLAS_CORETYPE=SkylakeX (otherwise it does not know this CPU and runs
SSE3 kernels 4-5x slower).
"""
import argparse
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch eager latency for one benchmark model")
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


ARGS = parse_args()
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
# Set, not defaulted: a preset Haswell (as on the build machines) halves it.
os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"

import torch  # noqa: E402  (after the OpenBLAS settings)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def model_name(arg):
    if arg in models.SAMPLE_SHAPES:
        return arg
    name = os.path.basename(os.path.dirname(os.path.abspath(arg)))
    if arg.endswith(".onnx") and name in models.SAMPLE_SHAPES:
        return name
    sys.exit(f"torch-bench: unknown model '{arg}' (names: {', '.join(models.ALL)}, "
             "or DIR/NAME/model.onnx)")


def summarize(ms):
    v = sorted(ms)
    pct = lambda q: v[min(len(v), max(1, math.ceil(q * len(v)))) - 1]  # nearest rank, as kiln-bench
    return {"p50": pct(0.5), "p90": pct(0.9), "p95": pct(0.95), "p99": pct(0.99),
            "mean": sum(v) / len(v), "min": v[0], "max": v[-1]}


def main():
    a = ARGS
    name = model_name(a.model)

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    t0 = time.perf_counter()
    model, _ = models.torch_model(name)
    build_ms = (time.perf_counter() - t0) * 1e3
    gen = torch.Generator().manual_seed(12345)
    x = torch.rand(a.batch, *models.SAMPLE_SHAPES[name], generator=gen) - 0.5

    with torch.inference_mode():
        t0 = time.perf_counter()
        model(x)
        first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(a.warmup - 1):
            model(x)
        ms = []
        start = time.perf_counter()
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
        wall_s = time.perf_counter() - start
    s = summarize(ms)
    throughput = a.iterations * a.batch / wall_s
    shape = f"float32[{','.join(str(d) for d in x.shape)}]"
    if a.json:
        print(json.dumps({
            "tool": "torch", "runtime": f"pytorch {torch.__version__} eager", "model": name,
            "inputs": shape, "batch": a.batch, "threads": a.threads, "iterations": a.iterations,
            "warmup": a.warmup, "build_ms": build_ms, "first_run_ms": first_ms,
            "p50_ms": s["p50"], "p90_ms": s["p90"], "p95_ms": s["p95"], "p99_ms": s["p99"],
            "mean_ms": s["mean"], "min_ms": s["min"], "max_ms": s["max"],
            "throughput_per_s": throughput,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "")}))
        return
    print(f"torch-bench {name}  inputs {shape}  threads {a.threads}  (pytorch {torch.__version__} "
          f"eager, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')})")
    print(f"  module build: {build_ms:.1f} ms")
    print(f"  first run: {first_ms:.3f} ms")
    print(f"  {a.iterations} inferences after {a.warmup} warm-up:")
    print(f"    latency  p50 {s['p50']:.3f} ms  p90 {s['p90']:.3f} ms  p95 {s['p95']:.3f} ms  "
          f"p99 {s['p99']:.3f} ms  (mean {s['mean']:.3f}, min {s['min']:.3f}, max {s['max']:.3f})")
    print(f"    throughput  {throughput:.1f} inferences/s")


if __name__ == "__main__":
    main()
