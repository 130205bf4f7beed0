#!/usr/bin/python3
"""Kiln, ONNX Runtime and PyTorch on the same models, side by side.

    /usr/bin/python3 bench/compare_models.py [--models resnet18,mlp,...]
        [--batches 1,8] [--threads 1,2] [--iterations 50] [--models-dir DIR]

Run from the repository root after `bazel build //server:kiln-server
//client:kiln` (bench/run.sh does both). Prints a table of p50 latencies (ms)
and the ratios Kiln/ORT and Kiln/PyTorch (below 1: Kiln is faster).

Kiln runs in a kiln-server started here with --threads T and no disk cache;
`kiln bench` reports both the client's round trip and the server's own time
for the model run (executor + kernels), which is the in-process figure the
table compares. The cold compile time is Kiln's compile of the model (passes,
lowering, LLVM) through the server, with an empty cache.
ONNX Runtime: onnxruntime-node 1.30 (bench/node_modules), all graph
optimisations, intra-op threads = T, sequential. PyTorch 1.13 eager,
set_num_threads(T), one inter-op thread, OPENBLAS_CORETYPE=SkylakeX.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import models  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def stream_triad_gbs():
    """Single-thread STREAM-triad bandwidth (a = b + s*c on 3 x 64 MB), via numpy."""
    import numpy as np
    n = 16 * 1024 * 1024
    b, c, a = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - t)
    # numpy does the triad in two passes: 5 arrays' worth of traffic.
    return 5 * n * 4 / best / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default=",".join(models.ALL))
    p.add_argument("--batches", default="1,8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--models-dir", default="/tmp/kiln-bench-models")
    a = p.parse_args()
    names = a.models.split(",")
    batches = [int(b) for b in a.batches.split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                        "onnxruntime-node@1.30.0"], cwd=HERE, check=True)
    paths = {n: models.onnx_path(a.models_dir, n) for n in names}
    torch_env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
    rows = []
    for t in threads:
        port = free_port()
        server = subprocess.Popen(
            [os.path.join(ROOT, "bazel-bin/server/kiln-server"), f"--port={port}",
             f"--threads={t}", "--cache-dir=none"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        try:
            for n in names:
                for b in batches:
                    iters = max(5, a.iterations // b)
                    kiln = run_json([os.path.join(ROOT, "bazel-bin/client/kiln"),
                                     f"--server=localhost:{port}", "bench", paths[n],
                                     "--batch", str(b), "--iterations", str(iters),
                                     "--warmup", "3", "--json"])
                    shape = "x".join(str(d) for d in [b] + models.SAMPLE_SHAPES[n])
                    ort = run_json(["node", os.path.join(HERE, "ort_bench.js"), paths[n],
                                    "--shape", shape, "--threads", str(t),
                                    "--iterations", str(iters), "--warmup", "3"])
                    torch = run_json(["/usr/bin/python3", os.path.join(HERE, "torch_bench.py"),
                                      n, "--batch", str(b), "--threads", str(t),
                                      "--iterations", str(iters), "--warmup", "3"],
                                     env=torch_env)
                    rows.append((n, b, t, kiln, ort, torch))
                    print(f"  measured {n} b{b} t{t}", file=sys.stderr)
        finally:
            server.terminate()
            server.wait()

    print(f"{'model':<14}{'batch':>6}{'thr':>4}{'kiln ms':>10}{'(rtt)':>9}{'ort ms':>9}"
          f"{'torch ms':>10}{'kiln/ort':>10}{'kiln/torch':>11}{'compile ms':>12}")
    for n, b, t, kiln, ort, torch in rows:
        k = kiln["server_p50_ms"]
        print(f"{n:<14}{b:>6}{t:>4}{k:>10.3f}{kiln['p50_ms']:>9.3f}{ort['p50_ms']:>9.3f}"
              f"{torch['p50_ms']:>10.3f}{k / ort['p50_ms']:>10.2f}{k / torch['p50_ms']:>11.2f}"
              f"{kiln['compile_ms']:>12.1f}")
    if "eltwise_chain" in names:
        bw = stream_triad_gbs()
        print(f"\nSTREAM triad (numpy, 1 thread): {bw:.1f} GB/s")
        for n, b, t, kiln, ort, torch in rows:
            if n != "eltwise_chain":
                continue
            moved = 2 * b * 64 * 56 * 56 * 4  # read the input once, write the output once
            got = moved / (kiln["server_p50_ms"] * 1e-3) / 1e9
            print(f"eltwise_chain b{b} t{t}: Kiln moves {got:.1f} GB/s = "
                  f"{100 * got / bw:.0f}% of triad bandwidth")


if __name__ == "__main__":
    main()
