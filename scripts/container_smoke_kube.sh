# Sourced by scripts/container_smoke.sh, in the clean clone, after the image is built: plays
# deploy/kubernetes and the KServe ServingRuntime's container with `podman kube play` (podman 4.3
# plays Pods and Deployments, makes volumes of PersistentVolumeClaims, ignores Services) and runs
# each probe's check by hand. Uses that script's check, note, image, work, repo_dir, snippets.

kube="$work/kube"
rm -rf "$kube" && mkdir -p "$kube"
podman tag "$image" localhost/kiln:latest  # the manifests' `image: kiln:latest`

render() {  # render DIR OUT: kubectl kustomize, or the kustomization's resources concatenated.
  if command -v kubectl >/dev/null; then
    kubectl kustomize "$1" >"$2"
  else
    "$py" - "$1" >"$2" <<'PY'
import os, sys, yaml
d = sys.argv[1]
k = yaml.safe_load(open(os.path.join(d, "kustomization.yaml")))
print("\n---\n".join(open(os.path.join(d, r)).read() for r in k["resources"]))
PY
  fi
}

split_kinds() {  # split_kinds IN PREFIX: PREFIX-KIND.yaml per kind; prints the kinds.
  "$py" - "$1" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for kind in sorted({d["kind"] for d in docs}):
    with open(f"{sys.argv[2]}-{kind}.yaml", "w") as f:
        yaml.safe_dump_all([d for d in docs if d["kind"] == kind], f)
    print(kind, " ".join(d["metadata"]["name"] for d in docs if d["kind"] == kind))
PY
}

without_ports() {  # without_ports FILE: drops the containers' ports from its Deployments.
  # podman 4.3 publishes every containerPort on the host, where Kubernetes publishes none: a
  # port in use there would fail the play. They only name targets for Services (not played).
  "$py" - "$1" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
for d in docs:
    for c in d["spec"]["template"]["spec"]["containers"]:
        c.pop("ports", None)
yaml.safe_dump_all(docs, open(sys.argv[1], "w"))
PY
}

pod_ip() {  # pod_ip POD: the pod's address on podman's bridge.
  podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
    "$(podman pod inspect --format '{{.InfraContainerID}}' "$1")"
}

grpc_health() {  # grpc_health HOST:PORT: grpc.health.v1.Health/Check("") is SERVING, as the probe.
  "$py" - "$1" <<'PY'
import sys, grpc
# HealthCheckRequest{service: ""} is the empty message; HealthCheckResponse{status: SERVING (1)}
# is field 1, varint 1: the bytes 08 01.
check = grpc.insecure_channel(sys.argv[1]).unary_unary("/grpc.health.v1.Health/Check")
reply = check(b"", timeout=3)
print("Health/Check:", reply.hex())
sys.exit(0 if reply == b"\x08\x01" else 1)
PY
}

wait_exec_ready() {  # wait_exec_ready CONTAINER URL SECONDS
  local i
  for i in $(seq 1 "$3"); do
    podman exec "$1" curl -fsS -o /dev/null "$2" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}

infer_in() {  # infer_in CONTAINER PORT: the README's JSON infer inside the pod, checked.
  podman exec -i "$1" curl -fsS -H 'Content-Type: application/json' -d @- \
    "http://127.0.0.1:$2/v2/models/mlp/infer" <"$snippets/x.json" >"$kube/infer.json" &&
    "$py" -c "
import json, sys, numpy as np
o = json.load(open('$kube/infer.json'))['outputs'][0]
d = np.abs(np.array(o['data'], np.float32).reshape(o['shape'])
           - np.load('examples/mlp_expected.npy')).max()
print('max diff', d); sys.exit(0 if d < 1e-5 else 1)"
}

# --- deploy/kubernetes: one replica with its cache and model claims --------------------------
check "kustomize deploy/kubernetes" render deploy/kubernetes "$kube/base.yaml"
split_kinds "$kube/base.yaml" "$kube/base" | tee -a "$log" >"$kube/base.kinds"
podman pod rm -f -a --filter label=app.kubernetes.io/name=kiln >/dev/null 2>&1
podman pod rm -f kiln-pod-0 kiln-pod >/dev/null 2>&1
podman volume rm -f kiln-cache kiln-models tmp >/dev/null 2>&1
check "kube play: PersistentVolumeClaims kiln-cache, kiln-models become volumes" \
  podman kube play "$kube/base-PersistentVolumeClaim.yaml"
# What a `kubectl cp` into the models claim would do.
check "fill the kiln-models volume with the README's repository" podman run --rm \
  -v kiln-models:/models -v "$repo_dir:/src:ro" "$base_image" cp -r /src/. /models/
without_ports "$kube/base-Deployment.yaml"
check "kube play: the Deployment" podman kube play "$kube/base-Deployment.yaml"
pod=$(podman pod ps --format '{{.Name}}' --filter label=app.kubernetes.io/name=kiln | head -1)
[ -n "$pod" ] || pod=$(podman pod ps --format '{{.Name}}' | grep '^kiln' | head -1)
ctr="$pod-kiln"
echo "pod $pod, container $ctr" | tee -a "$log"
check "Deployment pod: ready within 120 s (readinessProbe's GET /v2/health/ready, podman exec)" \
  wait_exec_ready "$ctr" http://127.0.0.1:8000/v2/health/ready 120
ip=$(pod_ip "$pod")
check "Deployment pod: startup/liveness gRPC probe by hand (Health/Check on $ip:8001)" \
  grpc_health "$ip:8001"
check "Deployment pod: infer on the model from the kiln-models claim equals mlp_expected.npy" \
  infer_in "$ctr" 8000
check "Deployment pod: metrics on 8002 (the prometheus.io annotations' port)" bash -c \
  "podman exec $ctr curl -fsS http://127.0.0.1:8002/metrics | grep -q '^kiln_models_loaded 1'"
security_context() {  # uid 10001, no capabilities, a read-only root but for the volumes.
  local seen
  seen=$(podman exec "$ctr" sh -c 'id -u; grep Cap[EP] /proc/self/status' | tr '\n\t' '  ')
  echo "$seen"
  grep -qE '^10001 CapPrm: +0+ CapEff: +0+ $' <<<"$seen" &&
    ! podman exec "$ctr" touch /usr/local/bin/x && podman exec "$ctr" touch /tmp/x
}
check "Deployment pod: securityContext applied (uid 10001, read-only root, no capabilities)" \
  security_context
check "Deployment pod: the models claim is read-only there (pvc.yaml: fill it elsewhere)" \
  bash -c "! podman exec $ctr touch /models/x"
check "Deployment pod: kernels written to the kiln-cache claim" bash -c \
  "podman exec $ctr find /var/cache/kiln -type f | grep -q ."
note "podman applied: $(podman inspect --format 'memory limit {{.HostConfig.Memory}}, cpu shares
  {{.HostConfig.CpuShares}}, healthcheck {{json .Config.Healthcheck}}' "$ctr" | tr -s '\n ' ' ')"
check "Deployment pod: SIGTERM (podman pod stop) exits 0" bash -c "
  podman pod stop -t 30 $pod >/dev/null &&
  [ \"\$(podman inspect --format '{{.State.ExitCode}}' $ctr)\" = 0 ]"
played='^(Deployment|PersistentVolumeClaim) '
note "not checked by podman: $(grep -v -E "$played" "$kube/base.kinds" | tr '\n' ';') probe" \
  "timing, resources as a scheduler sees them, fsGroup on a real volume"
if [ "${KILN_SMOKE_KEEP:-0}" != 1 ]; then
  podman pod rm -f "$pod" >/dev/null 2>&1
  podman volume rm -f kiln-cache kiln-models tmp >/dev/null 2>&1
fi

# --- deploy/kserve: the ServingRuntime's container as KServe would run it --------------------
# KServe is a controller: podman plays the runtime's container in a Pod, the storage
# initializer's work (the model repository at /mnt/models) done by a read-only mount.
"$py" - deploy/kserve/serving-runtime.yaml "$repo_dir" >"$kube/kserve-pod.yaml" <<'PY'
import sys, yaml
rt = yaml.safe_load(open(sys.argv[1]))
containers = rt["spec"]["containers"]
containers[0].pop("ports")  # as without_ports does
containers[0].setdefault("volumeMounts", []).append(
    {"name": "models", "mountPath": "/mnt/models", "readOnly": True})
print(yaml.safe_dump({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kiln-kserve"},
    "spec": {"containers": containers, "volumes": [
        {"name": "models", "hostPath": {"path": sys.argv[2], "type": "Directory"}}]}}))
PY
podman pod rm -f kiln-kserve >/dev/null 2>&1
check "kube play: the ServingRuntime's container (as a Pod, model at /mnt/models)" \
  podman kube play "$kube/kserve-pod.yaml"
kctr=kiln-kserve-kserve-container
check "ServingRuntime pod: ready within 120 s (its readinessProbe, port 8080)" \
  wait_exec_ready "$kctr" http://127.0.0.1:8080/v2/health/ready 120
check "ServingRuntime pod: v2 REST infer on 8080 equals mlp_expected.npy" infer_in "$kctr" 8080
check "ServingRuntime pod: grpc-v2 on 9000 (Health/Check)" grpc_health "$(pod_ip kiln-kserve):9000"
if [ "${KILN_SMOKE_KEEP:-0}" != 1 ]; then
  # The image's VOLUME (/var/cache/kiln), unmounted by the runtime: an anonymous volume.
  anonymous=$(podman inspect --format '{{range .Mounts}}{{.Name}} {{end}}' "$kctr")
  podman pod rm -f kiln-kserve >/dev/null 2>&1
  [ -z "${anonymous// /}" ] || podman volume rm -f $anonymous >/dev/null 2>&1
fi

