"""A Kiln cluster on loopback: Redis, three kiln-server replicas (each its own
--cache-dir, all sharing Redis as --remote-cache and --model-store) and nginx
in front of them (deploy/nginx/kiln-grpc.conf.template). Run by
cluster_test.sh; each check prints one line, a failure exits non-zero.

  python3 cluster_test.py TEMPLATE KILN_SERVER KILN_CLI GRAPH X_NPY EXPECTED_NPY
      [--requests N] [--bench SECONDS [--bench-model MODEL.onnx]]

--bench: instead of the checks, the figures of issue 24's note for
--bench-model (default: GRAPH): a cold compile on three replicas at once, a
new replica's warm start with Redis populated, and the throughput through
nginx with 1, 2 and 3 replicas, each for SECONDS.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from kiln import client as kiln_client
from kiln._proto import grpc_service_pb2

RETRIES = 5  # per request, on UNAVAILABLE only (gRPC's retryable code)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, what, proc, log, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit("%s did not start on port %d:\n%s" % (what, port, open(log).read()))


def read_npy(path):
    return np.load(path)


class Cluster:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.procs = []
        self.redis_port = free_port()
        self.replicas = {}  # index -> (process, port, log)

    def start_redis(self):
        log = os.path.join(self.tmp, "redis.log")
        proc = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.tmp],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.procs.append(proc)
        wait_for_port(self.redis_port, "redis-server", proc, log)

    def redis_url(self):
        return "redis://127.0.0.1:%d" % self.redis_port

    def start_replica(self, i, cache_dir=None):
        port = free_port()
        cache_dir = cache_dir or os.path.join(self.tmp, "cache%d" % i)
        log = os.path.join(self.tmp, "replica%d.%d.log" % (i, len(self.procs)))
        proc = subprocess.Popen(
            [self.args.kiln_server, "--address=127.0.0.1", "--port=%d" % port,
             "--cache-dir=" + cache_dir, "--remote-cache=" + self.redis_url(),
             "--model-store=" + self.redis_url(), "--threads=1"],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.procs.append(proc)
        wait_for_port(port, "kiln-server replica %d" % i, proc, log)
        self.replicas[i] = (proc, port, log)
        return port

    def start_nginx(self, ports):
        prefix = os.path.join(self.tmp, "nginx")
        os.makedirs(prefix, exist_ok=True)
        self.nginx_port = free_port()
        servers = "\n    ".join(
            "server 127.0.0.1:%d max_fails=1 fail_timeout=2s;" % p for p in ports)
        conf = open(self.args.template).read()
        conf = (conf.replace("@PREFIX@", prefix)
                .replace("@LISTEN@", "127.0.0.1:%d" % self.nginx_port)
                .replace("@UPSTREAM_SERVERS@", servers))
        path = os.path.join(prefix, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        log = os.path.join(prefix, "stderr.log")
        proc = subprocess.Popen(["nginx", "-p", prefix, "-c", path, "-g", "daemon off;"],
                                stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.nginx = proc
        self.procs.append(proc)
        wait_for_port(self.nginx_port, "nginx", proc, log)
        return self.nginx_port

    def stop_nginx(self):
        self.nginx.terminate()
        self.nginx.wait()

    def kill_replica(self, i, sig=signal.SIGKILL):
        proc = self.replicas[i][0]
        proc.send_signal(sig)
        proc.wait()

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def cache_stats(cli, port):
    """`kiln stats cache --json` of one replica."""
    out = subprocess.run([cli, "stats", "cache", "--json", "--server", "127.0.0.1:%d" % port],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def counter(stats, *path):
    """An int64 of `kiln stats cache --json` (proto JSON spells them as strings; 0 is absent)."""
    for key in path:
        stats = stats.get(key, {})
    return int(stats or 0)


def inference_count(port, name):
    """Successful inferences of `name` on one replica (KServe ModelStatistics)."""
    c = kiln_client.Client("127.0.0.1:%d" % port)
    try:
        r = c._inference.ModelStatistics(
            grpc_service_pb2.ModelStatisticsRequest(name=name), timeout=10)
        return sum(s.inference_stats.success.count for s in r.model_stats)
    finally:
        c.close()


def infer_with_retries(c, x, stats):
    """One request, retried on UNAVAILABLE with backoff; returns the output."""
    for attempt in range(RETRIES):
        try:
            return c.infer("mlp", {"x": x})
        except kiln_client.KilnError as e:
            if e.code != "UNAVAILABLE" or attempt == RETRIES - 1:
                raise
            with stats["lock"]:
                stats["retries"] += 1
            time.sleep(0.05 * 2 ** attempt)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        raise SystemExit(1)


def run_checks(args, cluster, x, expected):
    ports = [cluster.start_replica(i) for i in range(3)]
    nginx = cluster.start_nginx(ports)
    lb = kiln_client.Client("127.0.0.1:%d" % nginx, timeout=120)

    t = time.time()
    compiled = lb.compile(args.graph, "mlp")
    keys = {k.key for k in compiled.report.kernels}
    check(len(keys) > 1, "compiled mlp through nginx: %d kernels in %.0f ms"
          % (len(keys), (time.time() - t) * 1000))

    # Round robin sends these to every replica; the two that did not compile
    # load the model from the store at their first request.
    for _ in range(12):
        out = lb.infer("mlp", {"x": x})
        np.testing.assert_allclose(out["probs"], expected, rtol=1e-5, atol=1e-6)
    counts = [inference_count(p, "mlp") for p in ports]
    check(all(n > 0 for n in counts),
          "every replica served mlp through nginx (inferences per replica: %s)" % counts)

    stats = [cache_stats(args.kiln_cli, p) for p in ports]
    compiles = [counter(s, "compiles") for s in stats]
    check(sum(compiles) == len(keys) and sorted(compiles) == [0, 0, len(keys)],
          "each kernel compiled once in the cluster (compiles per replica: %s)" % compiles)
    hits = [counter(s, "remote", "hits") for s, n in zip(stats, compiles) if n == 0]
    check(all(h >= len(keys) for h in hits),
          "the other replicas read every kernel from Redis (remote hits: %s)" % hits)

    # Load with a replica killed half way; the client retries UNAVAILABLE.
    n = args.requests
    victim = compiles.index(0)
    state = {"lock": threading.Lock(), "retries": 0, "done": 0}
    killed = threading.Event()

    def one(_):
        out = infer_with_retries(lb, x, state)
        np.testing.assert_allclose(out["probs"], expected, rtol=1e-5, atol=1e-6)
        with state["lock"]:
            state["done"] += 1
            if state["done"] == n // 3 and not killed.is_set():
                killed.set()
                cluster.kill_replica(victim)

    t = time.time()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(one, i) for i in range(n)]:
            try:
                f.result()
            except Exception as e:  # a lost request: report all of them
                failures.append(repr(e))
    elapsed = time.time() - t
    check(killed.is_set(), "replica %d was SIGKILLed after %d of %d requests" % (victim, n // 3, n))
    check(not failures, "%d requests through nginx, none lost (%d retried on UNAVAILABLE, "
          "%.0f requests/s): %s" % (n, state["retries"], n / elapsed, failures[:3]))

    # The killed replica back, with an empty cache directory: its first
    # request (straight to it) loads the model from the store and every
    # kernel from Redis, compiling nothing.
    port = cluster.start_replica(victim, cache_dir=os.path.join(cluster.tmp, "fresh"))
    direct = kiln_client.Client("127.0.0.1:%d" % port, timeout=120)
    t = time.time()
    out = direct.infer("mlp", {"x": x})
    first_ms = (time.time() - t) * 1000
    np.testing.assert_allclose(out["probs"], expected, rtol=1e-5, atol=1e-6)
    s = cache_stats(args.kiln_cli, port)
    check(counter(s, "compiles") == 0 and counter(s, "remote", "hits") == len(keys),
          "the restarted replica's first request: %.0f ms, %d compiles, %d remote hits"
          % (first_ms, counter(s, "compiles"), counter(s, "remote", "hits")))

    # Unload through nginx reaches every replica (after its 1 s view).
    lb.unload("mlp")
    time.sleep(1.2)
    gone = 0
    for p in [cluster.replicas[i][1] for i in range(3)]:
        try:
            kiln_client.Client("127.0.0.1:%d" % p).infer("mlp", {"x": x})
        except kiln_client.KilnError as e:
            gone += e.code == "NOT_FOUND"
    check(gone == 3, "unloaded through nginx: NOT_FOUND on %d of 3 replicas" % gone)


def throughput(lb, name, inputs, seconds, threads=4):
    stop = time.time() + seconds
    count = [0]
    lock = threading.Lock()

    def loop():
        while time.time() < stop:
            lb.infer(name, inputs)
            with lock:
                count[0] += 1

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return count[0] / seconds


def bench_inputs(c, name):
    """Random inputs at the model's shapes (-1 dims as 1)."""
    metadata = c.model_metadata(name)
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if d > 0 else 1 for d in i.shape]).astype(np.float32)
            for i in metadata.inputs}


def run_bench(args, cluster):
    """The figures of issue 24's note, for --bench-model (default: the MLP)."""
    model = args.bench_model or args.graph
    ports = [cluster.start_replica(i) for i in range(3)]
    clients = [kiln_client.Client("127.0.0.1:%d" % p, timeout=3600) for p in ports]

    # Cold, cluster-wide: the three replicas compile the model at once.
    results = [None] * 3

    def compile_on(i):
        t = time.time()
        results[i] = (clients[i].compile(model, "bench"), time.time() - t)

    t = time.time()
    threads = [threading.Thread(target=compile_on, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.time() - t
    kernels = len({k.key for k in results[0][0].report.kernels})
    compiles = [counter(cache_stats(args.kiln_cli, p), "compiles") for p in ports]
    print("cold compile on 3 replicas at once: %.1f s wall (per replica %s s), %d kernels, "
          "compiles per replica %s" % (wall, ["%.1f" % r[1] for r in results], kernels, compiles),
          flush=True)
    inputs = bench_inputs(clients[0], "bench")

    # Warm start: a fourth replica, empty disk cache, Redis populated.
    t = time.time()
    port = cluster.start_replica(3, cache_dir=os.path.join(cluster.tmp, "warm"))
    listening = time.time() - t
    fresh = kiln_client.Client("127.0.0.1:%d" % port, timeout=3600)
    fresh.infer("bench", inputs)
    first = time.time() - t
    s = cache_stats(args.kiln_cli, port)
    print("warm start of a new replica: listening after %.2f s, first answer after %.2f s "
          "(%d compiles, %d remote hits)" % (listening, first, counter(s, "compiles"),
                                            counter(s, "remote", "hits")), flush=True)
    fresh.close()
    cluster.kill_replica(3, signal.SIGTERM)

    for replicas in (1, 2, 3):
        nginx = cluster.start_nginx(ports[:replicas])
        lb = kiln_client.Client("127.0.0.1:%d" % nginx, timeout=600)
        for _ in range(3 * replicas):
            lb.infer("bench", inputs)
        print("throughput through nginx, %d replica(s): %.1f requests/s"
              % (replicas, throughput(lb, "bench", inputs, args.bench)), flush=True)
        lb.close()
        cluster.stop_nginx()
    direct = throughput(clients[0], "bench", inputs, args.bench)
    print("throughput straight to one replica: %.1f requests/s" % direct, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("template")
    parser.add_argument("kiln_server")
    parser.add_argument("kiln_cli")
    parser.add_argument("graph")
    parser.add_argument("x")
    parser.add_argument("expected")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--bench", type=float, default=0)
    parser.add_argument("--bench-model", default="")
    args = parser.parse_args()
    x = read_npy(args.x)
    expected = read_npy(args.expected)
    tmp = tempfile.mkdtemp(prefix="kiln_cluster_test")
    cluster = Cluster(args, tmp)
    try:
        cluster.start_redis()
        if args.bench > 0:
            run_bench(args, cluster)
        else:
            run_checks(args, cluster, x, expected)
    except BaseException:
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".log"):
                print("--- %s (last lines)" % name)
                print("".join(open(os.path.join(tmp, name)).readlines()[-15:]))
        raise
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
