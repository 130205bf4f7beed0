"""`kiln tune` end to end against a kiln-server with a cache directory.

Run by tune_test.sh in two phases, each against a server it started on
CACHE_DIR (KILN_SERVER). Phase "tune": a tune with a tiny budget
writes one record per contraction kernel into CACHE_DIR/tuning_records.tsv;
a compile after it follows every record (the report counts them) and its
output matches NumPy; `kiln stats cache` lists the tuned kernels with their
gain; then the records' CPU name is forged. Phase "forged" (a restarted
server): a compile follows none of them.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

KILN = "client/kiln"
WORK = os.environ["WORK"]
CACHE_DIR = os.environ["CACHE_DIR"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def server():
    return os.environ["KILN_SERVER"]


def kiln_json(*args):
    r = subprocess.run([KILN, *args, "--server", server(), "--json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"kiln {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


rng = np.random.default_rng(0)
x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
b = rng.standard_normal(16).astype(np.float32)
dw = rng.standard_normal((16 * 12 * 12, 32)).astype(np.float32)
db = rng.standard_normal(32).astype(np.float32)


def reference():
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((1, 16, 12, 12), np.float64)
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("oc,nchw->nohw", w[:, :, kh, kw], xp[:, :, kh:kh + 12, kw:kw + 12])
    y = np.maximum(y + b[None, :, None, None], 0)
    return y.reshape(1, -1) @ dw + db


def write_model(path):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "dw", "db"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "tunable",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [numpy_helper.from_array(a, n) for a, n in [(w, "w"), (b, "b"), (dw, "dw"), (db, "db")]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def compile_and_check(model, label):
    report = kiln_json("compile", model, "--name", "tunable", "--replace")["report"]
    np.save(os.path.join(WORK, "x.npy"), x)
    out_dir = os.path.join(WORK, "out")
    os.makedirs(out_dir, exist_ok=True)
    kiln_json("infer", "tunable", "--input", "x=" + os.path.join(WORK, "x.npy"),
              "--output-dir", out_dir)
    y = np.load(os.path.join(out_dir, "y.npy"))
    check(np.allclose(y, reference(), rtol=1e-3, atol=1e-3),
          f"{label}: output differs from NumPy by {np.abs(y - reference()).max()}")
    return report


def tune_phase(model):
    write_model(model)
    tuned = kiln_json("tune", model, "--budget", "0.2", "--max-candidates", "2",
                      "--min-gain", "0")
    kernels = tuned.get("kernels", [])
    check(len(kernels) == 2, f"tune reports {len(kernels)} kernel structures, not 2: {tuned}")
    check(int(tuned.get("records_written", 0)) == 2, f"tune wrote {tuned.get('records_written')}")
    check(all(k.get("recorded") and k.get("best_override") for k in kernels),
          f"every kernel recorded: {kernels}")
    check(all(int(k.get("candidates", 0)) >= 2 for k in kernels), f"candidates: {kernels}")
    records = os.path.join(CACHE_DIR, "tuning_records.tsv")
    with open(records) as f:
        lines = f.read().splitlines()
    check(lines[0] == "kiln-tuning-records\t1" and len(lines) == 3, f"records file: {lines}")

    report = compile_and_check(model, "tuned compile")
    check(report.get("tuned_kernels") == 2, f"tuned compile follows {report.get('tuned_kernels')}")
    followed = sorted(k["tuned"] for k in report["kernels"] if k.get("tuned"))
    check(followed == sorted(k["best_override"] for k in kernels),
          f"kernels follow {followed}, tuned {[k['best_override'] for k in kernels]}")
    stats = kiln_json("stats", "cache")
    check(stats.get("tuning_records") == "2" and int(stats.get("tuning_uses", 0)) >= 2,
          f"stats cache tuning counts: {stats}")
    gains = [e["tuned_gain"] for e in stats.get("entry", []) if e.get("tuned")]
    check(len(gains) >= 2 and all(g > 0 for g in gains), f"stats cache tuned entries {gains}")
    text = subprocess.run([KILN, "stats", "cache", "--server", server()], capture_output=True,
                          text=True).stdout
    check("tuning: 2 records for this CPU" in text and "tuned: layout=" in text,
          f"stats cache text: {text}")

    # The same records claimed by another CPU: never used.
    with open(records) as f:
        content = f.read().splitlines()
    forged = [content[0]]
    for line in content[1:]:
        fields = line.split("\t")
        fields[1] = "forged-cpu"
        forged.append("\t".join(fields))
    with open(records, "w") as f:
        f.write("\n".join(forged) + "\n")


def forged_phase(model):
    report = compile_and_check(model, "compile on a forged CPU's records")
    check(report.get("tuned_kernels", 0) == 0, f"forged records followed: {report}")
    stats = kiln_json("stats", "cache")
    check(stats.get("tuning_records", "0") == "0" and stats.get("tuning_records_total") == "2",
          f"stats on forged records: {stats}")


def main():
    model = os.path.join(WORK, "tunable.onnx")
    {"tune": tune_phase, "forged": forged_phase}[sys.argv[1]](model)
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
