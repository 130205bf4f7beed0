"""deploy/: every manifest parses and agrees with itself, the Dockerfile and kiln-server.

argv: the kiln-server binary, the deploy/ directory. The flags a manifest
passes must be flags kiln-server has (from its --helpfull); its probes must
point at ports the container exposes and that those flags open; the kernel
cache's volume must be mounted where --cache-dir points; nothing runs as root.
The scale-out cluster (kubernetes/cluster): replicas reach the Redis the
manifests run, gRPC is balanced per request, the HPA scales the Deployment on
a series kiln-server exports.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import unittest

import yaml

SERVER, DEPLOY = sys.argv[1], sys.argv[2]

def server_flags():
    help_text = subprocess.run([SERVER, "--helpfull"], capture_output=True, text=True).stdout
    flags = set(re.findall(r"^\s+--(\w+) \(", help_text, re.MULTILINE))
    assert "port" in flags and "cache_dir" in flags, help_text[:500]
    return flags


FLAGS = server_flags()


def parse_args(args):
    """{flag name with underscores: value} of ["--name=value", ...]; repeated flags as lists."""
    parsed = {}
    for arg in args:
        match = re.fullmatch(r"--([\w-]+)(?:=(.*))?", arg)
        assert match, "not a --flag: %r" % arg
        parsed[match.group(1).replace("-", "_")] = match.group(2)
    return parsed


def load(relative):
    with open(os.path.join(DEPLOY, relative)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(relative, kind):
    docs = [d for d in load(relative) if d["kind"] == kind]
    assert len(docs) == 1, "%s: %d %s" % (relative, len(docs), kind)
    return docs[0]


class ManifestCase(unittest.TestCase):
    def assertFlagsExist(self, flags, where):
        for name in flags:
            self.assertIn(name, FLAGS, "%s passes --%s, which kiln-server lacks" % (where, name))

    def assertProbePort(self, probe, ports, where):
        """The probe's port (a number or a port name) is one the container exposes; returns it."""
        handler = probe.get("grpc") or probe.get("httpGet") or probe.get("tcpSocket")
        self.assertIsNotNone(handler, where)
        port = handler["port"]
        if isinstance(port, str):
            self.assertIn(port, ports.values(), where)
            port = [n for n, name in ports.items() if name == port][0]
        self.assertIn(port, ports, "%s probes port %s, which the container lacks" % (where, port))
        return port


class YamlTest(ManifestCase):
    def test_every_manifest_parses_with_kind_and_name(self):
        kinds = set()
        for root, _, files in os.walk(DEPLOY):
            for name in files:
                if not name.endswith((".yaml", ".yml")):
                    continue
                path = os.path.relpath(os.path.join(root, name), DEPLOY)
                docs = load(path)
                self.assertTrue(docs, path)
                for doc in docs:
                    kinds.add(doc["kind"])
                    self.assertIn("apiVersion", doc, path)
                    self.assertIn("kind", doc, path)
                    if doc["kind"] != "Kustomization":
                        self.assertTrue(doc["metadata"]["name"], path)
        self.assertLessEqual({"Deployment", "Service", "PersistentVolumeClaim", "Kustomization",
                              "ServingRuntime", "InferenceService"}, kinds)

    def test_kustomization_lists_every_kubernetes_manifest(self):
        listed = set(one("kubernetes/kustomization.yaml", "Kustomization")["resources"])
        present = {f for f in os.listdir(os.path.join(DEPLOY, "kubernetes"))
                   if f.endswith(".yaml") and f != "kustomization.yaml"}
        self.assertEqual(listed, present)


class DeploymentTest(ManifestCase):
    def setUp(self):
        self.deployment = one("kubernetes/deployment.yaml", "Deployment")
        self.pod = self.deployment["spec"]["template"]["spec"]
        (self.container,) = self.pod["containers"]
        self.args = parse_args(self.container["args"])
        self.ports = {p["containerPort"]: p["name"] for p in self.container["ports"]}

    def test_flags_exist(self):
        self.assertFlagsExist(self.args, "deployment.yaml")

    def test_ports_are_the_flags_ports(self):
        self.assertEqual(self.args["address"], "0.0.0.0")
        self.assertEqual(set(self.ports), {8000, 8001, 8002})
        self.assertEqual(int(self.args["port"]), 8001)
        self.assertEqual(int(self.args["http_port"]), 8000)
        self.assertEqual(int(self.args["metrics_port"]), 8002)
        annotations = self.deployment["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(int(annotations["prometheus.io/port"]), int(self.args["metrics_port"]))

    def test_probes(self):
        c = self.container
        readiness = c["readinessProbe"]
        self.assertEqual(readiness["httpGet"]["path"], "/v2/health/ready")
        self.assertEqual(self.assertProbePort(readiness, self.ports, "readinessProbe"),
                         int(self.args["http_port"]))
        for name in ("livenessProbe", "startupProbe"):
            self.assertIn("grpc", c[name], name)
            self.assertEqual(self.assertProbePort(c[name], self.ports, name),
                             int(self.args["port"]))

    def test_non_root(self):
        security = self.pod["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        self.assertNotEqual(security["runAsUser"], 0)
        self.assertFalse(self.container["securityContext"]["allowPrivilegeEscalation"])

    def test_cache_dir_is_the_persistent_volume(self):
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in self.container["volumeMounts"]}
        for name in mounts.values():
            self.assertIn(name, volumes)
        cache = volumes[mounts[self.args["cache_dir"]]]
        claims = {d["metadata"]["name"]: d for d in load("kubernetes/pvc.yaml")
                  if d["kind"] == "PersistentVolumeClaim"}
        self.assertIn(cache["persistentVolumeClaim"]["claimName"], claims)
        self.assertIn(self.args["model_repository"], mounts)
        for volume in volumes.values():
            if "persistentVolumeClaim" in volume:
                self.assertIn(volume["persistentVolumeClaim"]["claimName"], claims)

    def test_resource_requests(self):
        requests = self.container["resources"]["requests"]
        self.assertIn("cpu", requests)
        self.assertIn("memory", requests)

    def test_service_reaches_the_pod(self):
        service = one("kubernetes/service.yaml", "Service")
        labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        for key, value in service["spec"]["selector"].items():
            self.assertEqual(labels.get(key), value)
        match_labels = self.deployment["spec"]["selector"]["matchLabels"]
        self.assertEqual(match_labels.items() - labels.items(), set())
        for port in service["spec"]["ports"]:
            target = port["targetPort"]
            self.assertIn(target, self.ports if isinstance(target, int) else self.ports.values())
        self.assertEqual({p["port"] for p in service["spec"]["ports"]}, {8000, 8001, 8002})


class KServeTest(ManifestCase):
    def setUp(self):
        self.runtime = one("kserve/serving-runtime.yaml", "ServingRuntime")
        (self.container,) = self.runtime["spec"]["containers"]
        self.args = parse_args(self.container["args"])
        self.ports = {p["containerPort"]: p["name"] for p in self.container["ports"]}

    def test_runtime_for_onnx_over_v2(self):
        self.assertEqual(self.runtime["apiVersion"], "serving.kserve.io/v1alpha1")
        formats = {f["name"] for f in self.runtime["spec"]["supportedModelFormats"]}
        self.assertIn("onnx", formats)
        self.assertLessEqual({"v2", "grpc-v2"}, set(self.runtime["spec"]["protocolVersions"]))
        self.assertEqual(self.container["name"], "kserve-container")  # KServe's name for it
        self.assertEqual(self.args["model_repository"], "/mnt/models")  # storage initializer

    def test_flags_ports_and_probe(self):
        self.assertFlagsExist(self.args, "serving-runtime.yaml")
        self.assertEqual(set(self.ports), {int(self.args["http_port"])})
        readiness = self.container["readinessProbe"]
        self.assertEqual(readiness["httpGet"]["path"], "/v2/health/ready")
        self.assertEqual(self.assertProbePort(readiness, self.ports, "readinessProbe"),
                         int(self.args["http_port"]))
        self.assertEqual(int(self.runtime["spec"]["annotations"]["prometheus.kserve.io/port"]),
                         int(self.args["metrics_port"]))

    def test_non_root(self):
        security = self.container["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        self.assertNotEqual(security["runAsUser"], 0)

    def test_inference_service_selects_it(self):
        service = one("kserve/inference-service.yaml", "InferenceService")
        model = service["spec"]["predictor"]["model"]
        self.assertEqual(model["modelFormat"]["name"], "onnx")
        self.assertEqual(model["runtime"], self.runtime["metadata"]["name"])
        self.assertIn(model.get("protocolVersion", "v1"), self.runtime["spec"]["protocolVersions"])


def named(relative, kind, name):
    docs = [d for d in load(relative) if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(docs) == 1, "%s: %d %s %s" % (relative, len(docs), kind, name)
    return docs[0]


def selects(service, pod_template):
    labels = pod_template["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in service["spec"]["selector"].items())


class ClusterTest(ManifestCase):
    DIR = "kubernetes/cluster"

    def setUp(self):
        self.deployment = one(self.DIR + "/deployment.yaml", "Deployment")
        self.pod = self.deployment["spec"]["template"]["spec"]
        (self.container,) = self.pod["containers"]
        self.args = parse_args(self.container["args"])
        self.ports = {p["containerPort"]: p["name"] for p in self.container["ports"]}

    def test_kustomization_lists_every_manifest(self):
        listed = set(one(self.DIR + "/kustomization.yaml", "Kustomization")["resources"])
        present = {f for f in os.listdir(os.path.join(DEPLOY, self.DIR))
                   if f.endswith(".yaml") and f != "kustomization.yaml"}
        self.assertEqual(listed, present)

    def test_replicas_share_the_redis_the_manifests_run(self):
        self.assertFlagsExist(self.args, "cluster/deployment.yaml")
        self.assertGreaterEqual(self.deployment["spec"]["replicas"], 2)
        service = named(self.DIR + "/redis.yaml", "Service", "kiln-redis")
        redis = one(self.DIR + "/redis.yaml", "StatefulSet")
        self.assertEqual(redis["spec"]["serviceName"], service["metadata"]["name"])
        self.assertTrue(selects(service, redis["spec"]["template"]))
        (port,) = service["spec"]["ports"]
        for flag in ("remote_cache", "model_store"):
            url = re.fullmatch(r"redis://([\w.-]+):(\d+)(?:/\d+)?", self.args[flag])
            self.assertIsNotNone(url, "--%s=%s" % (flag, self.args[flag]))
            self.assertEqual(url.group(1), service["metadata"]["name"])
            self.assertEqual(int(url.group(2)), port["port"])

    def test_redis_evicts_kernels_never_the_model_store(self):
        # Model store keys have no TTL; kernel entries do (engine/model_store.cc).
        (container,) = one(self.DIR + "/redis.yaml", "StatefulSet")["spec"]["template"]["spec"][
            "containers"]
        args = container["args"]
        self.assertEqual(args[args.index("--maxmemory-policy") + 1], "volatile-lru")
        self.assertEqual(args[args.index("--appendonly") + 1], "yes")

    def test_replicas_are_stateless(self):
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in self.container["volumeMounts"]}
        self.assertIn("emptyDir", volumes[mounts[self.args["cache_dir"]]])
        self.assertFalse([v for v in volumes.values() if "persistentVolumeClaim" in v])
        self.assertNotIn("model_repository", self.args)

    def test_grpc_is_balanced_per_request(self):
        grpc = named(self.DIR + "/service.yaml", "Service", "kiln-grpc")
        self.assertEqual(grpc["spec"]["clusterIP"], "None")  # headless: clients see every pod
        self.assertTrue(selects(grpc, self.deployment["spec"]["template"]))
        (port,) = grpc["spec"]["ports"]
        self.assertEqual(self.ports[port["port"]], port["targetPort"])
        self.assertEqual(port["port"], int(self.args["port"]))
        # Clients re-resolve when connections age out, so they find new pods.
        self.assertGreater(float(self.args["max_connection_age_s"]), 0)
        http = named(self.DIR + "/service.yaml", "Service", "kiln")
        self.assertTrue(selects(http, self.deployment["spec"]["template"]))
        self.assertEqual({p["port"] for p in http["spec"]["ports"]},
                         {int(self.args["http_port"]), int(self.args["metrics_port"])})

    def test_hpa_scales_the_deployment_on_a_kiln_series(self):
        hpa = one(self.DIR + "/hpa.yaml", "HorizontalPodAutoscaler")
        target = hpa["spec"]["scaleTargetRef"]
        self.assertEqual((target["kind"], target["name"]),
                         ("Deployment", self.deployment["metadata"]["name"]))
        self.assertLessEqual(hpa["spec"]["minReplicas"], self.deployment["spec"]["replicas"])
        self.assertLess(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        (pods,) = [m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
        # The adapter rule in hpa.yaml's comment turns a series kiln-server
        # exports into the metric the HPA reads.
        with open(os.path.join(DEPLOY, self.DIR, "hpa.yaml")) as f:
            text = f.read()
        series = re.search(r"seriesQuery: '(\w+)\{", text).group(1)
        rule = re.search(r'name: \{matches: "([^"]+)", as: "([^"]+)"\}', text)
        with open(SERVER, "rb") as f:
            self.assertIn(series.encode(), f.read(), "kiln-server exports no " + series)
        self.assertEqual(re.sub(rule.group(1), rule.group(2).replace("${1}", r"\1"), series),
                         pods["metric"]["name"])

    def test_non_root(self):
        self.assertTrue(self.pod["securityContext"]["runAsNonRoot"])
        redis = one(self.DIR + "/redis.yaml", "StatefulSet")["spec"]["template"]["spec"]
        self.assertTrue(redis["securityContext"]["runAsNonRoot"])


def dockerfile_instructions():
    """[(INSTRUCTION, arguments)] of deploy/Dockerfile, continuation lines joined."""
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


class DockerfileTest(ManifestCase):
    def setUp(self):
        self.instructions = dockerfile_instructions()

    def last(self, word):
        values = [rest for w, rest in self.instructions if w == word]
        self.assertTrue(values, "the Dockerfile has no " + word)
        return values[-1]

    def test_debian_12_built_with_the_projects_scripts(self):
        # Every stage starts from the BASE_IMAGE build-arg, whose default is debian:12.
        bases = [rest.split()[0] for w, rest in self.instructions if w == "FROM"]
        self.assertTrue(bases)
        self.assertTrue(all(b == "${BASE_IMAGE}" for b in bases), bases)
        self.assertEqual(self.instructions[0], ("ARG", "BASE_IMAGE=debian:12"))
        runs = " ".join(rest for w, rest in self.instructions if w == "RUN")
        self.assertIn("scripts/setup.sh", runs)
        self.assertIn("bazel build //server:kiln-server", runs)

    def test_expose_user_healthcheck_and_command_agree(self):
        exposed = {int(p.split("/")[0]) for p in self.last("EXPOSE").split()}
        self.assertEqual(exposed, {8000, 8001, 8002})
        user = self.last("USER").split(":")[0]
        self.assertNotIn(user, ("", "0", "root"))
        args = parse_args(json.loads(self.last("CMD")))
        self.assertFlagsExist(args, "Dockerfile CMD")
        self.assertEqual({int(args["port"]), int(args["http_port"]), int(args["metrics_port"])},
                         exposed)
        self.assertEqual(args["address"], "0.0.0.0")
        health = self.last("HEALTHCHECK")
        self.assertIn("CMD", shlex.split(health))
        url = re.search(r"http://[\w.]+:(\d+)(/\S*)", health)
        self.assertIsNotNone(url, health)
        self.assertEqual(int(url.group(1)), int(args["http_port"]))
        self.assertEqual(url.group(2), "/v2/health/ready")
        self.assertIn(args["cache_dir"], json.loads(self.last("VOLUME")))
        self.assertEqual(json.loads(self.last("ENTRYPOINT"))[0].rsplit("/", 1)[-1], "kiln-server")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
