"""kiln and the bench tools run as a user runs them, against a real kiln-server.

Checked against references of their own: the versions against
common/version.h and llvm-config-16, --json output against the schema the
README documents, infer's values against examples/mlp_expected.npy (NumPy),
an ONNX model's input names against the model onnx.helper builds here.
Environment: KILN_SERVER (host:port of a running server), WORK (a scratch
directory); run from the runfiles root.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

KILN = "client/kiln"
BENCH_TOOLS = {"kiln-bench": "bench/kiln-bench", "gemm-bench": "bench/gemm-bench",
               "grpc-echo": "bench/grpc-echo", "stream": "bench/stream"}
# Every command kiln has; `kiln --help` must list exactly these.
COMMANDS = ["compile", "infer", "stats", "models", "unload", "info", "doctor", "onnx-test",
            "bench", "tune", "kernels", "call-kernel", "bench-kernel"]
SERVER = os.environ["KILN_SERVER"]
WORK = os.environ["WORK"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args, binary=KILN):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def kiln(*args):
    """A kiln command against the test's server."""
    return run(*args, "--server", SERVER)


def kiln_json(*args):
    r = kiln(*args, "--json")
    check(r.returncode == 0, f"kiln {' '.join(args)} --json: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


# --- help -----------------------------------------------------------------
def test_help():
    top = run("--help")
    check(top.returncode == 0 and top.stderr == "", f"kiln --help: {top.returncode} {top.stderr}")
    listed = re.search(r"^Subcommands:\n((?:  \S.*\n)+)", top.stdout, re.M)
    names = [l.split()[0] for l in listed.group(1).splitlines()] if listed else []
    check(names == COMMANDS, f"kiln --help lists {names}")
    for command in COMMANDS:
        r = run(command, "--help")
        check(r.returncode == 0, f"kiln {command} --help exit {r.returncode}")
        check(r.stderr == "", f"kiln {command} --help wrote to stderr: {r.stderr}")
        check(f"Usage: kiln {command} [OPTIONS]" in r.stdout, f"kiln {command} usage: {r.stdout}")
        check(f"Example:\n  kiln {command}" in r.stdout, f"kiln {command} has no example")
        check("--server HOST:PORT" in r.stdout, f"kiln {command} --help lacks --server")
    # A command's help is its own: compile's flags are not infer's.
    check("--input-shape" not in run("infer", "--help").stdout, "infer --help shows --input-shape")
    # `kiln` alone is a mistake: the overview on stderr, exit 2.
    bare = run()
    check(bare.returncode == 2 and "Subcommands:" in bare.stderr and bare.stdout == "",
          f"bare kiln: {bare.returncode}")
    for program, binary in BENCH_TOOLS.items():
        r = run("--help", binary=binary)
        check(r.returncode == 0 and r.stderr == "" and f"Usage: {program}" in r.stdout
              and "Example:" in r.stdout, f"{program} --help: {r.returncode} {r.stdout}")


# --- versions ----------------------------------------------------------------
def test_versions():
    kiln_version = re.search(r'kKilnVersion\[\] = "([^"]+)"',
                             open("common/version.h").read()).group(1)
    llvm = subprocess.run(["llvm-config-16", "--version"], capture_output=True,
                          text=True).stdout.strip()
    for program, binary in {"kiln": KILN, **BENCH_TOOLS}.items():
        r = run("--version", binary=binary)
        lines = r.stdout.splitlines()
        check(r.returncode == 0 and len(lines) == 3, f"{program} --version: {r.stdout!r}")
        if len(lines) == 3:
            check(lines[0] == f"{program} {kiln_version}", f"{program} --version: {lines[0]}")
            check(lines[1] == f"LLVM {llvm}", f"{program} LLVM line: {lines[1]} (want {llvm})")
            check(lines[2].startswith("build: C++17, "), f"{program} build line: {lines[2]}")
    return kiln_version


# --- command-line errors ---------------------------------------------------
def test_errors():
    r = run("compile", "examples/mlp.pbtxt", "--input-shap", "x=4x16")
    check(r.returncode == 2 and "unknown flag --input-shap (did you mean '--input-shape'?)"
          in r.stderr and r.stdout == "", f"misspelt flag: {r.returncode} {r.stderr}")
    r = run("infer", "mlp", "--input_sahpe", "x=4x16")  # the underscore form, misspelt
    check(r.returncode == 2 and "did you mean '--input-shape'" not in r.stderr
          and "unknown flag --input-sahpe" in r.stderr, f"infer's own flags: {r.stderr}")
    r = run("modles")
    check(r.returncode == 2 and "unknown command 'modles' (did you mean 'models'?)" in r.stderr,
          f"misspelt command: {r.stderr}")
    r = run("models", "--xyzzy")
    check(r.returncode == 2 and "unknown flag --xyzzy" in r.stderr
          and "did you mean" not in r.stderr, f"nothing close: {r.stderr}")
    r = run("--mibs", "8", binary=BENCH_TOOLS["stream"])
    check(r.returncode == 2 and "did you mean '--mib'" in r.stderr, f"stream: {r.stderr}")
    r = run("m.onnx", "--bacth", "2", binary=BENCH_TOOLS["kiln-bench"])
    check(r.returncode == 2 and "did you mean '--batch'" in r.stderr, f"kiln-bench: {r.stderr}")


def loaded_models():
    return {m["name"]: m for m in kiln_json("models")["models"]}


def make_onnx_model(path):
    """Relu of one [N, 4] input named input_ids; its only input."""
    x = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["input_ids"], ["y"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def make_onnx_case():
    """An ONNX test case (ONNX's layout) of the Relu model: input and expected output."""
    case = os.path.join(WORK, "relu_case")
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    make_onnx_model(os.path.join(case, "model.onnx"))
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    for name, array in (("input_0", x), ("output_0", np.maximum(x, 0))):
        with open(os.path.join(case, "test_data_set_0", name + ".pb"), "wb") as f:
            f.write(onnx.numpy_helper.from_array(array).SerializeToString())
    return case


# --- input names -------------------------------------------------------------
def test_input_names():
    r = kiln("compile", "examples/mlp.pbtxt", "--name", "bad_shape", "--input-shape", "y=4x16")
    # One letter from another one letter is no likely typo: no suggestion, the inputs listed.
    check(r.returncode == 1 and "--input-shape names input 'y', which the model does not have; "
          "its inputs: x" in r.stderr, f"kiln graph input: {r.stderr}")
    model = os.path.join(WORK, "relu.onnx")
    make_onnx_model(model)
    r = kiln("compile", model, "--name", "bad_shape", "--input_shape", "input_id=3x4")
    check(r.returncode == 1 and "(did you mean 'input_ids'?)" in r.stderr, f"onnx: {r.stderr}")
    check("bad_shape" not in loaded_models(), "a refused --input-shape compiled the model")
    # The right name is applied (the dim was symbolic).
    r = kiln("compile", model, "--name", "relu", "--input_shape", "input_ids=3x4")
    check(r.returncode == 0, f"compile relu: {r.stderr}")
    dims = loaded_models().get("relu", {}).get("inputs", [{}])[0].get("dims")
    check(dims == ["3", "4"], f"--input-shape input_ids=3x4 gave dims {dims}")
    r = kiln("infer", "relu", "--input", "input_id=examples/x.npy")
    check(r.returncode == 1 and "--input names input 'input_id'" in r.stderr
          and "(did you mean 'input_ids'?)" in r.stderr, f"infer input: {r.stderr}")
    kiln("unload", "relu")


# --- both spellings ----------------------------------------------------------
def test_spellings():
    for name, flags in (("dashes", ["--opt-level", "1", "--max-fuse-depth=2"]),
                        ("underscores", ["--opt_level", "1", "--max_fuse_depth=2"])):
        r = kiln("compile", "examples/mlp.pbtxt", "--name", name, *flags, "--json")
        check(r.returncode == 0, f"compile with {name}: {r.stderr}")
    models = loaded_models()
    check("dashes" in models and "underscores" in models, f"models: {list(models)}")
    check(models.get("dashes", {}).get("kernels") == models.get("underscores", {}).get("kernels"),
          "the two spellings compiled differently")
    # An underscore flag takes effect: --max_values caps what infer prints.
    out = kiln_json("infer", "dashes", "--input", "x=examples/x.npy", "--max_values", "3")
    check(len(out["outputs"][0]["values"]) == 3 and out["outputs"][0]["values_truncated"],
          f"--max_values 3: {out['outputs'][0]}")
    kiln("unload", "dashes")
    kiln("unload", "underscores")


# --- --json against the README's schema -------------------------------------
def readme_schema():
    text = open("README.md").read()
    m = re.search(r"<!-- kiln --json schema -->\n```json\n(.*?)\n```", text, re.S)
    return json.loads(m.group(1))


def conforms(value, spec, where):
    """Problems of `value` against a schema entry (see the README)."""
    if isinstance(spec, list):
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [p for i, v in enumerate(value) for p in conforms(v, spec[0], f"{where}[{i}]")]
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        problems = []
        for key, sub in spec.items():
            optional = key.endswith("?")
            key = key.rstrip("?")
            if key in value:
                problems += conforms(value[key], sub, f"{where}.{key}")
            elif not optional:
                problems.append(f"{where}.{key}: missing")
        known = {k.rstrip("?") for k in spec}
        problems += [f"{where}.{k}: not in the schema" for k in value if k not in known]
        return problems
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": number,
        "boolean": isinstance(value, bool),
        "int64": isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None,
        "object": isinstance(value, dict),
        "value": number or isinstance(value, bool)
                 or value in ("NaN", "Infinity", "-Infinity"),
    }[spec]
    return [] if ok else [f"{where}: {value!r} is not {spec}"]


def test_json(kiln_version):
    schema = readme_schema()
    check(schema["*"] == {"schema_version": "integer"}, "schema's common part")
    seen = {}

    def document(command, *args, expect_exit=0):
        r = kiln(*command.split(), *args, "--json")
        check(r.returncode == expect_exit, f"{command} --json: exit {r.returncode}: {r.stderr}")
        doc = json.loads(r.stdout)
        check(doc.get("schema_version") == 1, f"{command}: schema {doc.get('schema_version')}")
        check(list(doc)[0] == "schema_version", f"{command}: schema_version is not first")
        body = {k: v for k, v in doc.items() if k != "schema_version"}
        for p in conforms(body, schema[command], command):
            check(False, p)
        seen[command] = doc
        return doc

    compiled = document("compile", "examples/mlp.pbtxt", "--name", "mlp")
    check(compiled["model_name"] == "mlp", f"compile: {compiled['model_name']}")
    out = document("infer", "mlp", "--input", "x=examples/x.npy", "--profile")
    want = np.load("examples/mlp_expected.npy")
    got = out["outputs"][0]
    check(got["shape"] == list(want.shape) and got["element_count"] == want.size
          and not got["values_truncated"], f"infer output: {got['shape']}")
    check(np.allclose(np.array(got["values"], dtype=np.float32).reshape(want.shape), want,
                      rtol=1e-5, atol=1e-6), "infer --json values differ from mlp_expected.npy")
    check(len(out["kernels"]) > 0 and out["total_ns"] > 0, "infer --profile: no kernel times")
    capped = document("infer", "mlp", "--input", "x=examples/x.npy", "--max-values", "5")
    check(capped["outputs"][0]["values"] == got["values"][:5], "--max-values 5: not the first 5")
    document("stats cache")
    # The MLP's products are below the contraction schedule's minimum work,
    # so there is nothing to tune (tune_test.sh tunes a model that has some).
    tuned = document("tune", "examples/mlp.pbtxt", "--budget", "0.1")
    check(tuned["kind"] == "FINISHED" and tuned["records_written"] == 0
          and tuned["kernels"] == [], f"tune: {tuned}")
    document("stats timing", "mlp")
    check(any(m["name"] == "mlp" for m in document("models")["models"]), "models: no mlp")
    info = document("info")
    check(info["version"] == kiln_version, f"info version {info['version']}")
    kernels = document("kernels")["kernels"]
    key = kernels[0]["key"]
    x = os.path.join(WORK, "a.npy")
    kernel_args = kernels[0]["args"][:-1]
    for i, a in enumerate(kernel_args):
        np.save(os.path.join(WORK, f"arg{i}.npy"),
                np.full([int(d) for d in a.get("shape", [])], 0.5, dtype=np.float32))
    inputs = [f for i in range(len(kernel_args)) for f in ("--input", f"{WORK}/arg{i}.npy")]
    if all(a.get("datatype") == "FP32" for a in kernels[0]["args"]):
        document("call-kernel", key, *inputs)
    timed = document("bench-kernel", key[:12], "--repeat", "2")
    roof = timed["roofline"]
    check(roof["flops"] > 0 and int(roof["bytes"]) > 0 and roof["cpu_name"] == host_cpu_name()
          and roof["peak_gflops"] > 0 and roof["peak_gbps"] > 0, f"bench-kernel roofline: {roof}")
    check(close(roof["gflops"], roof["flops"] / timed["median_s"] / 1e9)
          and close(roof["fma_fraction"], roof["gflops"] / roof["peak_gflops"])
          and close(roof["bandwidth_fraction"], roof["gbps"] / roof["peak_gbps"]),
          f"bench-kernel roofline rates: {roof} at {timed['median_s']} s")
    document("bench", "--model", "mlp", "--iterations", "3", "--warmup", "1")
    # --exact compiles the file a second time with its symbolic batch fixed,
    # under the bench's own name: the second compile replaces the first.
    relu = os.path.join(WORK, "relu_exact.onnx")
    make_onnx_model(relu)
    exact = document("bench", relu, "--exact", "--batch", "3", "--iterations", "2",
                     "--warmup", "0")
    check(exact["batch"] == 3 and exact["p50_ms"] > 0, f"bench --exact --batch 3: {exact}")
    document("doctor")
    onnx_test = document("onnx-test", make_onnx_case())
    check(onnx_test["passed"] == 1 and onnx_test["cases"][0]["outcome"] == "PASS",
          f"onnx-test relu: {onnx_test}")
    check(document("unload", "mlp")["unloaded"] == "mlp", "unload --json")
    missing = set(schema) - {"*"} - set(seen)
    check(not missing, f"schema commands not run: {missing}")


# --- roofline (issue 23) -------------------------------------------------------
def host_cpu_name():
    """The reference: /proc/cpuinfo's first "model name"."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def close(a, b, rel=0.02, abs_tol=2e-3):
    return abs(a - b) <= max(abs_tol, rel * max(abs(a), abs(b)))


def test_kiln_bench_roofline():
    """kiln-bench --top K's roofline, parsed from --json and from the table.

    References: each dense kernel's FLOPs written out from examples/mlp.pbtxt
    (x 4x16; w1 32x16, w2 32x32, each with bias and relu), the CPU name from
    /proc/cpuinfo, and the rates and fractions recomputed from the printed
    counts, time and peaks. Nothing about speed is asserted.
    """
    bench = BENCH_TOOLS["kiln-bench"]
    args = ["examples/mlp.pbtxt", "--threads", "1", "--iterations", "5", "--warmup", "1",
            "--top", "10"]
    r = run(*args, "--json", binary=bench)
    check(r.returncode == 0, f"kiln-bench --top --json: exit {r.returncode}: {r.stderr}")
    doc = json.loads(r.stdout)
    check(doc["schema_version"] == 1, f"kiln-bench --json schema_version: {doc.get('schema_version')}")
    host = doc["host"]
    check(host["cpu"] == host_cpu_name(), f"kiln-bench host cpu {host['cpu']!r}")
    check(host["threads"] == 1 and close(host["peak_gflops"], host["fma_gflops_one_thread"])
          and close(host["peak_gbps"], host["stream_gbps_one_thread"]),
          f"kiln-bench peaks at 1 thread: {host}")
    check(host["peak_gflops"] > 0 and host["peak_gbps"] > 0, f"kiln-bench peaks: {host}")
    kernels = doc["top_kernels"]
    check(len(kernels) == doc["kernels"], f"--top 10 of {doc['kernels']}: {len(kernels)}")
    dense = lambda m, n, k: 2 * m * n * k + m * n + m * n  # 2MNK, bias add, relu
    flops = sorted(k["flops"] for k in kernels)
    for want in (dense(4, 32, 16), dense(4, 32, 32)):
        check(want in flops, f"kiln-bench: no kernel of {want} FLOPs in {flops}")
    check(doc["flops"] == sum(flops), f"kiln-bench flops {doc['flops']} != its kernels' {flops}")
    check(doc["flops"] >= dense(4, 32, 16) + dense(4, 32, 32), f"kiln-bench flops {doc['flops']}")
    for k in kernels:
        s = k["p50_ms"] / 1e3
        if s >= 1e-5:  # printed to 0.1 us: recompute only where rounding is small
            check(close(k["gflops"], k["flops"] / s / 1e9, rel=0.02),
                  f"{k['name']}: gflops {k['gflops']} != flops / p50")
            check(close(k["gbps"], k["bytes"] / s / 1e9, rel=0.02),
                  f"{k['name']}: gbps {k['gbps']} != bytes / p50")
        check(close(k["fma_fraction"], k["gflops"] / host["peak_gflops"]),
              f"{k['name']}: fma_fraction {k['fma_fraction']}")
        check(close(k["bandwidth_fraction"], k["gbps"] / host["peak_gbps"]),
              f"{k['name']}: bandwidth_fraction {k['bandwidth_fraction']}")
    text = run(*args, binary=bench)
    check(text.returncode == 0, f"kiln-bench --top: exit {text.returncode}: {text.stderr}")
    check(f"host: {host_cpu_name()} (" in text.stdout, f"kiln-bench --top: no host line")
    check(re.search(r"^\s+ms\s+share\s+GFLOPS\s+%FMA\s+GB/s\s+%BW\s+kernel", text.stdout, re.M),
          "kiln-bench --top: no roofline header")
    rows = re.findall(r"^\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%"
                      r"\s+(fused\S*)", text.stdout, re.M)
    check(len(rows) == doc["kernels"], f"kiln-bench --top rows: {rows}")
    check(abs(sum(float(r[1]) for r in rows) - 100) < 1, f"shares do not add up: {rows}")


def test_kiln_bench_dump_objects():
    """kiln-bench --dump-objects DIR makes DIR when missing and writes one .o (an
    ELF object) and one .ll (LLVM IR defining the kernel) per kernel of
    examples/mlp.pbtxt (two dense+relu kernels); a DIR that cannot be made is
    an error naming it, not a claim of kernels written."""
    bench = BENCH_TOOLS["kiln-bench"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "not", "yet")
        r = run("examples/mlp.pbtxt", "--dump-objects", out, binary=bench)
        check(r.returncode == 0, f"kiln-bench --dump-objects: exit {r.returncode}: {r.stderr}")
        names = sorted(os.listdir(out)) if os.path.isdir(out) else []
        objects = [n for n in names if n.endswith(".o")]
        check(len(objects) >= 2 and len(names) == 2 * len(objects)
              and f"{len(objects)} kernels written to {out}" in r.stdout,
              f"kiln-bench --dump-objects wrote {names}: {r.stdout}")
        for n in objects:
            with open(os.path.join(out, n), "rb") as f:
                check(f.read(4) == b"\x7fELF", f"{n} is not an ELF object")
            with open(os.path.join(out, n[:-2] + ".ll")) as f:
                kernel = n[4:-2]
                check(f"define void @{kernel}(" in f.read(), f"{n[:-2]}.ll does not define {kernel}")
        blocked = os.path.join(tmp, "file")
        open(blocked, "w").close()
        r = run("examples/mlp.pbtxt", "--dump-objects", os.path.join(blocked, "dir"), binary=bench)
        check(r.returncode != 0 and "--dump-objects" in r.stderr and "written" not in r.stdout,
              f"kiln-bench --dump-objects under a file: exit {r.returncode}: {r.stdout} {r.stderr}")


# --- doctor ------------------------------------------------------------------
def test_doctor(kiln_version):
    r = kiln("doctor")
    check(r.returncode == 0, f"doctor: exit {r.returncode}: {r.stdout}{r.stderr}")
    check(re.search(rf"^ok +reachable +{re.escape(SERVER)} answered", r.stdout, re.M)
          is not None, f"doctor reachable: {r.stdout}")
    check(re.search(rf"^ok +version +server and client are Kiln {re.escape(kiln_version)}",
                    r.stdout, re.M) is not None, f"doctor version: {r.stdout}")
    # The test's server runs with --cache-dir=none: a warning, not a failure.
    check(re.search(r"^warn +cache\.disk +no disk cache", r.stdout, re.M) is not None,
          f"doctor cache: {r.stdout}")
    doc = kiln_json("doctor")
    checks = {c["name"]: c for c in doc["checks"]}
    check(doc["ok"] and doc["server_info"]["version"] == kiln_version
          and checks["version"]["verdict"] == "ok" and checks["cpu"]["verdict"] == "ok"
          and doc["server_info"]["cpu"] in checks["cpu"]["detail"], f"doctor json: {doc}")
    # Nobody listens on a port just freed: FAIL, exit 1.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()
    r = run("doctor", "--server", closed)
    check(r.returncode == 1 and re.search(r"^FAIL +reachable", r.stdout, re.M) is not None,
          f"doctor unreachable: {r.returncode} {r.stdout}")


class CacheServer:
    """A kiln-server of its own with a disk kernel cache in `cache_dir`."""

    def __init__(self, cache_dir, *flags):
        self.log = os.path.join(WORK, "cache_server.log")
        self.proc = subprocess.Popen(
            ["server/kiln-server", "--port=0", f"--cache-dir={cache_dir}", "--threads=1", *flags],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        self.address = None
        for _ in range(100):
            m = re.search(r"listening on .*:(\d+)$", open(self.log).read(), re.M)
            if m:
                self.address = f"127.0.0.1:{m.group(1)}"
                break
            time.sleep(0.1)
        if self.address is None:
            self.stop()
            raise SystemExit("cache server did not start: " + open(self.log).read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def test_doctor_sees_corrupt_cache_entries():
    cache_dir = os.path.join(WORK, "cache")
    os.makedirs(cache_dir, exist_ok=True)
    server = CacheServer(cache_dir)
    try:
        r = run("compile", "examples/mlp.pbtxt", "--name", "mlp", "--server", server.address)
        check(r.returncode == 0, f"compile on the cache server: {r.stderr}")
        fresh = json.loads(run("doctor", "--json", "--server", server.address).stdout)
        verdicts = {c["name"]: c["verdict"] for c in fresh["checks"]}
        check(verdicts.get("cache.disk") == "ok" and verdicts.get("cache.writable") == "ok"
              and verdicts.get("cache.corrupt") == "ok", f"fresh disk cache: {verdicts}")
    finally:
        server.stop()
    entries = [f for f in os.listdir(cache_dir) if f.endswith(".kkc")]
    check(len(entries) > 0, "the compile wrote no cache entries")
    for f in entries:
        with open(os.path.join(cache_dir, f), "wb") as out:
            out.write(b"not a kernel" * 10)
    server = CacheServer(cache_dir)
    try:
        run("compile", "examples/mlp.pbtxt", "--name", "mlp", "--server", server.address)
        r = run("doctor", "--json", "--server", server.address)
        doc = json.loads(r.stdout)
        corrupt = {c["name"]: c for c in doc["checks"]}.get("cache.corrupt", {})
        check(r.returncode == 0 and corrupt.get("verdict") == "warn"
              and corrupt.get("detail", "").startswith(f"{len(entries)} corrupt entries")
              and doc["cache_stats"]["corrupt_entries"] == str(len(entries)),
              f"doctor after corrupting {len(entries)} entries: {corrupt}")
    finally:
        server.stop()


def test_doctor_sees_unavailable_remote_cache():
    # --remote-cache on a port nobody listens on: compiles go on, doctor warns.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    url = f"redis://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    server = CacheServer(os.path.join(WORK, "remote_cache"), f"--remote-cache={url}")
    try:
        r = run("compile", "examples/mlp.pbtxt", "--name", "mlp", "--server", server.address)
        check(r.returncode == 0, f"compile without its Redis: {r.stderr}")
        doc = json.loads(run("doctor", "--json", "--server", server.address).stdout)
        remote = {c["name"]: c for c in doc["checks"]}.get("cache.remote", {})
        stats = doc["cache_stats"].get("remote", {})
        check(remote.get("verdict") == "warn" and "unavailable" in remote.get("detail", "")
              and stats.get("address") == url + "/0" and not stats.get("available", False)
              and int(stats.get("errors", "0")) >= 1, f"doctor without Redis: {remote} {stats}")
    finally:
        server.stop()


def main():
    test_help()
    kiln_version = test_versions()
    test_errors()
    test_input_names()
    test_spellings()
    test_json(kiln_version)
    test_kiln_bench_roofline()
    test_kiln_bench_dump_objects()
    test_doctor(kiln_version)
    test_doctor_sees_corrupt_cache_entries()
    test_doctor_sees_unavailable_remote_cache()
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        return 1
    print("cli_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
