#!/usr/bin/python3
"""PyTorch eager latency for one benchmark model, as JSON on stdout.

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_bench.py NAME \
        --batch B --threads T [--iterations N] [--warmup W]
Run in its own process so its thread settings do not leak: torch.set_num_threads(T)
and one inter-op thread; inference_mode. Debian's OpenBLAS (used by linear
layers) needs OPENBLAS_CORETYPE=SkylakeX on this CPU (compare_models sets it).
"""
import argparse
import json
import time

import numpy as np
import torch

import models

p = argparse.ArgumentParser()
p.add_argument("name")
p.add_argument("--batch", type=int, default=1)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--iterations", type=int, default=100)
p.add_argument("--warmup", type=int, default=10)
a = p.parse_args()

torch.set_num_threads(a.threads)
torch.set_num_interop_threads(1)
model, _ = models.torch_model(a.name)
model.eval()
x = torch.randn(a.batch, *models.SAMPLE_SHAPES[a.name])
times = []
with torch.inference_mode():
    for _ in range(a.warmup):
        model(x)
    for _ in range(a.iterations):
        start = time.perf_counter()
        model(x)
        times.append((time.perf_counter() - start) * 1e3)
times.sort()
pct = lambda q: times[min(len(times) - 1, int(q / 100 * len(times)))]
print(json.dumps({"runtime": "pytorch " + torch.__version__, "p50_ms": pct(50),
                  "p90_ms": pct(90), "p95_ms": pct(95), "p99_ms": pct(99)}))
