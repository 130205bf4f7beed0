#!/usr/bin/python3
"""float32 GEMM GFLOPS: Kiln, OpenBLAS and oneDNN side by side.

    /usr/bin/python3 bench/gemm_gflops.py [--threads 1,2] [--sizes 256,512,...]

C[M,N] = A[M,K] @ B[K,N], B constant (a dense layer's weights: Kiln packs it
at compile time; the libraries get it row-major and unpacked). Each figure is
the best of 5 repeats of a timed batch (median for Kiln, via the server's
BenchmarkKernel / time_evaluator). OpenBLAS runs with OPENBLAS_CORETYPE=
SkylakeX (Debian's 0.3.21 does not recognise this CPU) and
openblas_set_num_threads; oneDNN's dnnl_sgemm with OMP_NUM_THREADS. Each
library runs in a child process per thread count so settings cannot leak.
"""
import argparse
import ctypes
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = [(s, s, s) for s in (256, 512, 1024, 2048)] + [(1, 768, 768), (64, 768, 3072),
                                                        (128, 512, 512)]


def time_call(fn, flops):
    fn()
    reps = max(1, int(2e8 / flops))
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps)
    return flops / best / 1e9


def library_child(lib, threads):
    """Runs in a child: prints {shape: gflops} for `lib`."""
    out = {}
    for m, k, n in SHAPES:
        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        c = np.zeros((m, n), np.float32)
        ptr = lambda x: x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if lib == "openblas":
            so = ctypes.CDLL("libopenblas.so.0")
            so.openblas_set_num_threads(threads)
            # cblas_sgemm(RowMajor=101, NoTrans=111, NoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
            so.cblas_sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
            fn = lambda: so.cblas_sgemm(101, 111, 111, m, n, k, 1.0, ptr(a), k, ptr(b), n, 0.0,
                                        ptr(c), n)
        else:
            so = ctypes.CDLL("libdnnl.so.2")
            # dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), row-major
            so.dnnl_sgemm.argtypes = [ctypes.c_char, ctypes.c_char, ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
                                      ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
            fn = lambda: so.dnnl_sgemm(b"N", b"N", m, n, k, 1.0, ptr(a), k, ptr(b), n, 0.0,
                                       ptr(c), n)
        fn()
        assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-2), f"{lib} wrong at {m}x{k}x{n}"
        out[f"{m}x{k}x{n}"] = time_call(fn, 2.0 * m * k * n)
    print(json.dumps(out))


def library(lib, threads):
    env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX", OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, __file__, "--child", lib, "--threads", str(threads)],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def matmul_model(path, m, k, n):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.random((k, n), dtype=np.float32), "B")
    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])], [b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def kiln(threads, work_dir):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([os.path.join(ROOT, "bazel-bin/server/kiln-server"),
                               f"--port={port}", f"--threads={threads}", "--cache-dir=none"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli = [os.path.join(ROOT, "bazel-bin/client/kiln"), f"--server=localhost:{port}"]
    out = {}
    try:
        time.sleep(1.0)
        for m, k, n in SHAPES:
            name = f"gemm_{m}x{k}x{n}"
            path = os.path.join(work_dir, name + ".onnx")
            if not os.path.exists(path):
                matmul_model(path, m, k, n)
            report = subprocess.run(cli + ["compile", path, "--name", name, "--json"],
                                    check=True, capture_output=True, text=True).stdout
            key = json.loads(report)["report"]["kernels"][0]["key"]
            reps = max(1, int(2e8 / (2.0 * m * k * n)))
            bench = json.loads(subprocess.run(
                cli + ["bench-kernel", key, "--number", str(reps), "--repeat", "5", "--json"],
                check=True, capture_output=True, text=True).stdout)
            out[f"{m}x{k}x{n}"] = 2.0 * m * k * n / bench["median_s"] / 1e9
    finally:
        server.terminate()
        server.wait()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1,2")
    p.add_argument("--child")
    p.add_argument("--work-dir", default="/tmp/kiln-gemm-bench")
    a = p.parse_args()
    if a.child:
        library_child(a.child, int(a.threads))
        return
    os.makedirs(a.work_dir, exist_ok=True)
    print(f"{'M x K x N':<16}{'thr':>4}{'kiln':>9}{'openblas':>10}{'onednn':>9}{'kiln/best':>11}")
    for t in [int(x) for x in a.threads.split(",")]:
        k, ob, dn = kiln(t, a.work_dir), library("openblas", t), library("onednn", t)
        for shape in k:
            best = max(ob[shape], dn[shape])
            print(f"{shape:<16}{t:>4}{k[shape]:>9.1f}{ob[shape]:>10.1f}{dn[shape]:>9.1f}"
                  f"{k[shape] / best:>11.2f}")


if __name__ == "__main__":
    main()
