# Sourced by scripts/container_smoke.sh after container_smoke_kube.sh (whose helpers it uses):
# deploy/kubernetes/cluster, replicas sharing Redis. podman 4.3 plays the Deployment (every
# replica, a pod each) but not the StatefulSet, the Services or the HPA: Redis plays as one pod
# named after its Service (on a network of its own podman's DNS answers pod names, as cluster DNS
# answers the Service's), its claim template as a claim.

check "kustomize deploy/kubernetes/cluster" render deploy/kubernetes/cluster "$kube/cluster.yaml"
split_kinds "$kube/cluster.yaml" "$kube/cluster" | tee -a "$log" >"$kube/cluster.kinds"
"$py" - "$kube" >>"$log" <<'PY'
import sys, yaml
kube = sys.argv[1]
ss = yaml.safe_load(open(kube + "/cluster-StatefulSet.yaml"))
redis = ss["spec"]["template"]["spec"]
docs = []
for t in ss["spec"].get("volumeClaimTemplates", []):
    claim = "%s-%s-0" % (t["metadata"]["name"], ss["metadata"]["name"])
    docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": claim}, "spec": t["spec"]})
    redis.setdefault("volumes", []).append(
        {"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}})
docs.append({"apiVersion": "v1", "kind": "Pod", "spec": redis, "metadata": {
    "name": ss["spec"]["serviceName"], "labels": ss["spec"]["template"]["metadata"]["labels"]}})
yaml.safe_dump_all(docs, open(kube + "/redis-pod.yaml", "w"))
# podman 4.3 publishes every containerPort on the host (Kubernetes does not): the replicas
# would collide on 8000. The ports only name targets for the Services, which podman ignores.
# And it makes an emptyDir a volume named as the pod spec names it, one for all replicas: each
# replica plays as a Deployment of one with its emptyDirs renamed, so each has its own disk tier.
deployment = yaml.safe_load(open(kube + "/cluster-Deployment.yaml"))
replicas = deployment["spec"]["replicas"]
pod = deployment["spec"]["template"]["spec"]
for c in pod["containers"]:
    c.pop("ports", None)
copies, pods, volumes = [], [], []
for i in range(replicas):
    copy = yaml.safe_load(yaml.safe_dump(deployment))
    copy["metadata"]["name"] = "%s-r%d" % (deployment["metadata"]["name"], i)
    copy["spec"]["replicas"] = 1
    spec = copy["spec"]["template"]["spec"]
    for v in spec.get("volumes", []):
        if "emptyDir" in v:
            old, v["name"] = v["name"], "%s-%s" % (copy["metadata"]["name"], v["name"])
            volumes.append(v["name"])
            for c in spec["containers"]:
                for m in c.get("volumeMounts", []):
                    if m["name"] == old:
                        m["name"] = v["name"]
    copies.append(copy)
    pods.append(copy["metadata"]["name"] + "-pod-0")
yaml.safe_dump_all(copies, open(kube + "/cluster-replicas.yaml", "w"))
with open(kube + "/cluster.env", "w") as f:
    f.write("replicas=%d\n" % replicas)
    f.write("replica_pods='%s'\n" % " ".join(pods))
    f.write("replica_volumes='%s'\n" % " ".join(volumes))
    f.write("redis_image=%s\n" % redis["containers"][0]["image"])
    f.write("redis_pod=%s\n" % ss["spec"]["serviceName"])
PY
source "$kube/cluster.env"
if ! podman image exists "$redis_image"; then
  # No registry: Debian's redis-server under that name, /data owned by uid 999 as in the
  # official image (a new volume starts as a copy of what the image has there).
  note "$redis_image here is Debian's redis-server built on $base_image (no registry)"
  cat >"$kube/Containerfile.redis" <<REDIS
FROM $base_image
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server redis-tools \
 && rm -rf /var/lib/apt/lists/* && mkdir /data && chown 999:999 /data
WORKDIR /data
REDIS
  podman build -t "localhost/$redis_image" -f "$kube/Containerfile.redis" "$kube" >>"$log" 2>&1
fi

net=kiln-smoke-cluster
podman pod rm -f "$redis_pod" $replica_pods >/dev/null 2>&1
podman volume rm -f "data-$redis_pod-0" $replica_volumes >/dev/null 2>&1
podman network exists "$net" || podman network create "$net" >>"$log"
check "kube play: Redis (the StatefulSet's pod and claim)" \
  podman kube play --network "$net" "$kube/redis-pod.yaml"
check "Redis: readinessProbe by hand (podman exec redis-cli ping)" bash -c "
  for i in \$(seq 1 30); do
    [ \"\$(podman exec $redis_pod-redis redis-cli ping)\" = PONG ] && exit 0; sleep 1
  done; exit 1"
check "kube play: the Deployment ($replicas replicas)" \
  podman kube play --network "$net" "$kube/cluster-replicas.yaml"
addresses=()
for pod in $replica_pods; do
  check "$pod: ready within 120 s (GET /v2/health/ready, podman exec)" \
    wait_exec_ready "$pod-kiln" http://127.0.0.1:8000/v2/health/ready 120
  addresses+=("$(pod_ip "$pod"):8001")
done
check "${replica_pods%% *}: startup/liveness gRPC probe by hand (Health/Check)" \
  grpc_health "${addresses[0]}"
# As tests/server:cluster_test: mlp compiled through replica 0 is served by all, its kernels
# compiled there only (the model from the model store, the kernels from the remote cache).
check "cluster: mlp compiled on one replica answers on all $replicas, compiled once in all" \
  env PYTHONPATH=client/python "$py" - "${addresses[@]}" <<'PY'
import sys, numpy as np, kiln
x, expected = np.load("examples/x.npy"), np.load("examples/mlp_expected.npy")
kiln.Client(sys.argv[1]).compile("examples/mlp.pbtxt", "mlp")
ok = True
for i, address in enumerate(sys.argv[1:]):
    c = kiln.Client(address)
    d = np.abs(c.infer("mlp", {"x": x})["probs"] - expected).max()
    s = c.cache_stats()
    print("replica %d: max diff %g, compiles %d, remote hits %d, remote errors %d"
          % (i, d, s.compiles, s.remote.hits, s.remote.errors))
    ok &= bool(d < 1e-5) and s.remote.errors == 0 and (s.compiles > 0) == (i == 0)
    ok &= i == 0 or s.remote.hits > 0
sys.exit(0 if ok else 1)
PY
note "cluster/ not played: $(grep -v -E '^(Deployment|StatefulSet) ' "$kube/cluster.kinds" |
  tr '\n' ';') rolling updates"
if [ "${KILN_SMOKE_KEEP:-0}" != 1 ]; then
  podman pod rm -f "$redis_pod" $replica_pods >/dev/null 2>&1
  podman volume rm -f "data-$redis_pod-0" $replica_volumes >/dev/null 2>&1
  podman network rm "$net" >/dev/null 2>&1
fi
