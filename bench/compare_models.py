#!/usr/bin/python3
"""Kiln, ONNX Runtime and PyTorch on the same models, side by side.

    bench/compare_models.sh [--models resnet18,mlp,...] [--batches 1,8] [--threads 1,2]
        [--iterations 50] [--warmup 5] [--rounds R] [--runtimes kiln,ort,torch]
        [--models-dir DIR] [--json] [--roofline]

(compare_models.sh builds the tools and installs onnxruntime-node first; this
script expects them.) Each measurement is its own process, one after another:
  kiln   bazel-bin/bench/kiln-bench: in process, cold compile in a fresh process
         (memory-only kernel cache), then latency of CompiledModel::Run
  ort    bench/ort_bench.js: onnxruntime-node 1.30, optimisation 'all', sequential,
         intra-op threads = T, one inter-op thread
  torch  bench/torch_bench.py: PyTorch 1.13 eager, set_num_threads(T),
         OPENBLAS_CORETYPE=SkylakeX
All read the same files (bench/models.py, exported once into --models-dir) and
report p50 latency; ratios below 1 mean Kiln is faster. Then Kiln's cold
compile time per model, and for the elementwise chain Kiln's achieved
bandwidth (bytes its kernels read and write / kernel time) against a
single-thread STREAM triad (bazel-bin/bench/stream).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import models  # noqa: E402

KILN_BENCH = os.path.join(ROOT, "bazel-bin", "bench", "kiln-bench")
STREAM = os.path.join(ROOT, "bazel-bin", "bench", "stream")


def run_json(cmd, env=None):
    """The last line of `cmd`'s stdout as JSON, or {"error": ...}."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def p50(result):
    return None if result is None or "error" in result else result["p50_ms"]


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def roofline(rows):
    """How far each cell is from the FMA limit: the model's FLOPs (its ops'
    declared costs, as kiln-bench counts them) over p50 against T x the
    host's measured one-thread FMA peak. A goal of r x ORT needs Kiln at
    ORT's fraction / r: above 100% it cannot be met by kernels alone."""
    print("\nFMA roofline: model GFLOP per run over p50, as a fraction of T x this host's "
          "one-thread FMA peak")
    print(f"{'model':<14}{'batch':>6}{'thr':>4}{'GFLOP':>8}{'peak GF/s':>10}{'kiln %':>8}"
          f"{'ort %':>8}{'0.85 needs':>11}{'0.75 needs':>11}")
    for r in rows:
        k = r["kiln"]
        host = k.get("host")
        if not host or not k.get("flops"):
            continue
        peak = host["fma_gflops_one_thread"] * r["threads"]
        gflop = k["flops"] / 1e9

        def frac(ms):
            return None if ms is None else 100 * gflop / (ms * 1e-3) / peak

        o = p50(r.get("ort"))
        need = [None if o is None else frac(o * f) for f in (0.85, 0.75)]
        print(f"{r['model']:<14}{r['batch']:>6}{r['threads']:>4}{gflop:>8.2f}{peak:>10.0f}"
              f"{fmt(frac(k['p50_ms']), '.0f'):>8}{fmt(frac(o), '.0f'):>8}"
              f"{fmt(need[0], '.0f'):>11}{fmt(need[1], '.0f'):>11}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(models.ALL),
                   help="comma-separated, from: " + ", ".join(models.ALL))
    p.add_argument("--batches", default="1,8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--iterations", type=int, default=50,
                   help="timed runs at batch 1; batch B runs max(5, N/B)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every cell R times, keep each runtime's best p50")
    p.add_argument("--runtimes", default="kiln,ort,torch")
    p.add_argument("--models-dir", default="/tmp/kiln-bench-models")
    p.add_argument("--json", action="store_true", help="also print every raw result as JSON")
    p.add_argument("--roofline", action="store_true",
                   help="also each cell's FLOPs against this host's measured FMA peak: the "
                        "fraction Kiln and ORT reach, and what 0.85 and 0.75 x ORT would need")
    a = p.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in models.SAMPLE_SHAPES]
    if unknown:
        p.error(f"unknown models {unknown}; known: {models.ALL}")
    batches = [int(b) for b in a.batches.split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    runtimes = set(a.runtimes.split(","))
    if not os.path.exists(KILN_BENCH):
        sys.exit("compare_models: build first: bazel build //bench:kiln-bench //bench:stream "
                 "(or run bench/compare_models.sh)")

    paths = {n: models.onnx_path(a.models_dir, n) for n in names}
    # Every cell once per round; with several rounds a cell keeps the round
    # with its runtime's lowest p50, so a slow spell of the machine (a VM)
    # does not decide a ratio.
    cells = [(n, b, t) for n in names for b in batches for t in threads]
    best = {}
    for rnd in range(a.rounds):
        for n, b, t in cells:
            iters = max(5, a.iterations // b)
            flags = ["--batch", str(b), "--iterations", str(iters), "--warmup", str(a.warmup),
                     "--threads", str(t), "--json"]
            res = {}
            if "kiln" in runtimes:
                # --top 1 adds the host's measured peaks to the JSON.
                res["kiln"] = run_json([KILN_BENCH, paths[n]] + flags +
                                       (["--top", "1"] if a.roofline else []))
            if "ort" in runtimes:
                res["ort"] = run_json(["node", os.path.join(HERE, "ort_bench.js"), paths[n]] + flags)
            if "torch" in runtimes:
                res["torch"] = run_json(
                    ["/usr/bin/python3", os.path.join(HERE, "torch_bench.py"), paths[n]] + flags,
                    env=dict(os.environ, OPENBLAS_CORETYPE="SkylakeX"))
            row = best.setdefault((n, b, t), {"model": n, "batch": b, "threads": t,
                                              "iterations": iters})
            for rt, r in res.items():
                if "error" in r:
                    print(f"  {rt} {n} b{b} t{t}: {r['error']}", file=sys.stderr)
                if rt not in row or (p50(r) is not None and
                                     (p50(row[rt]) is None or p50(r) < p50(row[rt]))):
                    row[rt] = r
            print(f"  round {rnd + 1}: {n} batch {b} threads {t}: "
                  + ", ".join(f"{rt} {fmt(p50(r), '.3f')} ms" for rt, r in res.items()),
                  file=sys.stderr, flush=True)
    rows = [best[c] for c in cells]

    print(f"\np50 latency (ms){', best of %d rounds' % a.rounds if a.rounds > 1 else ''}; "
          "ratios < 1: Kiln faster. kiln-bench in process, onnxruntime-node 1.30, "
          "PyTorch 1.13 eager")
    print(f"{'model':<14}{'batch':>6}{'thr':>4}{'iters':>6}{'kiln ms':>10}{'ort ms':>10}"
          f"{'torch ms':>10}{'kiln/ort':>10}{'kiln/torch':>11}")
    for r in rows:
        k, o, t = p50(r.get("kiln")), p50(r.get("ort")), p50(r.get("torch"))
        print(f"{r['model']:<14}{r['batch']:>6}{r['threads']:>4}{r['iterations']:>6}"
              f"{fmt(k, '.3f'):>10}{fmt(o, '.3f'):>10}{fmt(t, '.3f'):>10}"
              f"{fmt(ratio(k, o), '.2f'):>10}{fmt(ratio(k, t), '.2f'):>11}")

    kiln_rows = [r for r in rows if "kiln" in r and "error" not in r["kiln"]]
    if kiln_rows:
        print("\nKiln cold compile (fresh process, memory-only kernel cache; import + passes + "
              "lowering + LLVM + JIT), vs ORT session creation")
        print(f"{'model':<14}{'batch':>6}{'thr':>4}{'kernels':>8}{'compile ms':>12}{'codegen ms':>12}"
              f"{'ort create':>12}")
        for r in kiln_rows:
            k, o = r["kiln"], r.get("ort") or {}
            print(f"{r['model']:<14}{r['batch']:>6}{r['threads']:>4}{k['kernels']:>8}"
                  f"{k['compile_ms']:>12.1f}{k['codegen_ms']:>12.1f}"
                  f"{fmt(o.get('compile_ms'), '.1f'):>12}")

    if a.roofline:
        roofline(kiln_rows)

    chain = [r for r in kiln_rows if r["model"] == "eltwise_chain"]
    if chain:
        stream = run_json([STREAM, "--threads", "1", "--json"])
        if "error" in stream:
            print(f"\nSTREAM triad failed: {stream['error']}")
        else:
            bw = stream["best_gb_per_s"]
            print(f"\nSTREAM triad, 1 thread, 3 x {stream['array_mib']} MiB: {bw:.2f} GB/s")
            for r in chain:
                k = r["kiln"]
                moved = k["kernel_arg_bytes"]  # every kernel argument read or written once
                kern = moved / (k["kernels_p50_ms"] * 1e-3) / 1e9
                run = moved / (k["p50_ms"] * 1e-3) / 1e9
                print(f"eltwise_chain batch {r['batch']} threads {r['threads']}: {k['kernels']} "
                      f"kernel(s), {moved / 1e6:.1f} MB read+written; kernels {kern:.2f} GB/s = "
                      f"{kern / bw:.2f} x triad; whole Run {run:.2f} GB/s = {run / bw:.2f} x triad")
            print("(the chain's working set, 1.6 MB per sample, stays in L2/L3: a fraction above "
                  "1 means cache, not DRAM, bandwidth)")
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
