#!/usr/bin/env bash
# The deployment files, run for real with podman (not in CI: a cold image build takes the better
# part of an hour on two cores). From a clean clone of this checkout's HEAD it
#   1. makes a Debian 12 base image with debootstrap (no registry needed) unless one exists,
#   2. builds deploy/Dockerfile with `podman build`, as a Docker user would build it,
#   3. runs the image and the README's "Use it like Triton" curl and Python snippets against it,
#   4. plays deploy/kubernetes (rendered by `kubectl kustomize`), the KServe ServingRuntime's
#      container and deploy/kubernetes/cluster (Redis and three replicas) with `podman kube
#      play`, runs the probes' checks by hand and serves a model through each,
# then prints one PASS/FAIL line per check and exits 1 if any failed.
#
#   scripts/container_smoke.sh            (as root; installs podman, runc, debootstrap if missing)
#
# Environment: KILN_SMOKE_DIR (work directory, default /var/tmp/kiln-smoke), KILN_BASE_IMAGE
# (default localhost/debian:bookworm, made when missing), KILN_SMOKE_IMAGE (an image built
# before: skip the build), KILN_SMOKE_KEEP=1 (leave the containers and pods running).
# kubectl (for kustomize) is optional: without it the kustomizations' resources are concatenated.
#
# Podman on this kind of host (cgroup v1 with a cgroup2 hierarchy mounted too, no
# CAP_SYS_RESOURCE): crun 1.8 refuses hybrid cgroups, and podman's default rlimits (nofile 1M,
# nproc 4M) exceed the hard ones; podman 4.3 also lowers its own RLIMIT_NPROC to 32768 when it
# starts (strace shows it), so its runtime cannot set more than that either. podman_config()
# finds a runtime and limits that work and writes them to a containers.conf of its own
# (CONTAINERS_CONF), leaving the host's configuration alone.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${KILN_SMOKE_DIR:-/var/tmp/kiln-smoke}
base_image=${KILN_BASE_IMAGE:-localhost/debian:bookworm}
image=localhost/kiln:smoke
py=/usr/bin/python3
mkdir -p "$work"
log="$work/smoke.log"
: >"$log"

results=()
check() {  # check NAME COMMAND...: runs COMMAND (output to the log), records PASS or FAIL.
  local name=$1
  shift
  echo "=== check: $name" >>"$log"
  if "$@" >>"$log" 2>&1; then
    results+=("PASS  $name")
  else
    results+=("FAIL  $name")
  fi
  echo "${results[-1]}"
}
note() { results+=("NOTE  $*"); echo "NOTE  $*"; }
summary() {
  echo
  echo "container_smoke summary (details: $log)"
  printf '  %s\n' "${results[@]}"
  local failed
  failed=$(printf '%s\n' "${results[@]}" | grep -c '^FAIL')
  echo "  $failed failed"
  [ "$failed" -eq 0 ]
}
die() { echo "container_smoke: $*" >&2; results+=("FAIL  $*"); summary; exit 1; }

free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- 0. podman that can run a container here -----------------------------------------------
podman_config() {
  export CONTAINERS_CONF="$work/containers.conf"
  local nofile nproc runtime err
  nofile=$(ulimit -Hn)
  for runtime in crun runc; do
    command -v "$runtime" >/dev/null || continue
    for nproc in "$(ulimit -Hu)" 32768 4096; do
      [ "$nproc" = unlimited ] && nproc=1048576
      printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
        "$nofile" "$nofile" "$nproc" "$nproc" >"$CONTAINERS_CONF"
      printf '[engine]\nruntime = "%s"\n' "$runtime" >>"$CONTAINERS_CONF"
      if err=$(podman run --rm "$1" true 2>&1); then
        echo "podman: runtime $runtime, nofile $nofile, nproc $nproc" | tee -a "$log"
        return 0
      fi
      echo "podman with $runtime nproc=$nproc: $err" | tee -a "$log"
    done
  done
  return 1
}

# --- 1. a Debian 12 base image, made locally ---------------------------------------------------
make_base_image() {
  local root="$work/rootfs" mirror
  # The mirror this machine's apt uses (deb822 or one-line sources).
  mirror=$(grep -h -m1 -E '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '{print $2}' | head -1)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' \
    /etc/apt/sources.list 2>/dev/null)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "debootstrap bookworm from $mirror" | tee -a "$log"
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >>"$log" 2>&1 || return 1
  # apt as in the official debian:12 image: bookworm, -updates and -security, no caches kept.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian*}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # A snapshot mirror's Release files are past their Valid-Until: do as the host's apt does.
  if apt-config dump | grep -q 'Acquire::Check-Valid-Until "false"'; then
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99snapshot-mirror"
  fi
  printf 'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n' \
    >"$root/etc/apt/apt.conf.d/docker-clean"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | podman import --change 'CMD ["bash"]' - "$base_image" >>"$log" 2>&1 ||
    return 1
  rm -rf "$root"
}

# The container tools are not Kiln's build dependencies: setup.sh installs them for this only.
bash "$repo/scripts/setup.sh" podman runc debootstrap curl >>"$log" 2>&1 ||
  die "scripts/setup.sh podman runc debootstrap curl failed (see $log)"
[ "$(id -u)" -eq 0 ] || note "not root: rootless podman is untested here"

if ! podman image exists "$base_image"; then
  command -v debootstrap >/dev/null || die "no $base_image and no debootstrap to make it"
  make_base_image || die "could not make $base_image (see $log)"
fi
podman_config "$base_image" || die "no runtime/limits combination runs a container (see $log)"
results+=("PASS  podman runs a container ($(grep -m1 '^podman: runtime' "$log"))")

# --- 2. the image, from a clean clone ---------------------------------------------------------
src="$work/src"
rm -rf "$src"
git clone --quiet --no-checkout "$repo" "$src" && git -C "$src" checkout --quiet \
  "$(git -C "$repo" rev-parse HEAD)" || die "git clone of $repo failed"
echo "clean clone of $(git -C "$src" rev-parse --short HEAD) in $src" | tee -a "$log"
[ -z "$(git -C "$repo" status --porcelain)" ] ||
  note "the checkout has uncommitted changes; the smoke test uses HEAD without them"
cd "$src" || exit 1

if [ -n "${KILN_SMOKE_IMAGE:-}" ]; then
  image=$KILN_SMOKE_IMAGE
  note "no build: KILN_SMOKE_IMAGE=$image"
else
  build_start=$(date +%s)
  # As the README builds it (podman build --format docker, here without a Docker daemon).
  check "deploy/build_image.sh (podman build deploy/Dockerfile)" env KILN_BUILDER=podman \
    deploy/build_image.sh "$image" --build-arg BASE_IMAGE="$base_image"
  note "build took $(($(date +%s) - build_start)) s"
fi
podman image exists "$image" || die "no image was built (see $log)"
note "image size $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec)"

# --- 3. the container and the README's snippets -----------------------------------------------
readme_block() {  # readme_block HEADING LANG: the first ```LANG block after the heading.
  "$py" - "$1" "$2" <<'PY'
import re, sys
text = open("README.md").read()
after = text[text.index("\n" + sys.argv[1] + "\n"):]
print(re.search(r"```" + sys.argv[2] + r"\n(.*?)```", after, re.S).group(1), end="")
PY
}

wait_ready() {  # wait_ready URL SECONDS
  local i
  for i in $(seq 1 "$2"); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}

http=$(free_port) grpc=$(free_port) metrics=$(free_port)
snippets="$work/readme"
rm -rf "$snippets" && mkdir -p "$snippets"
podman rm -f -v kiln-smoke kiln-smoke-py >/dev/null 2>&1
podman volume rm -f kiln-smoke-cache >/dev/null 2>&1

# The curl block: its commands before the server start, the server as the image's container
# (the README's flags, the ports published on loopback), then the rest; /tmp/ is $snippets/.
curl_block=$(readme_block '### HTTP/REST and Prometheus (`--http-port`, `--metrics-port`)' sh |
  sed -e "s#/tmp/#$snippets/#g" -e "s#localhost:8000#localhost:$http#g" \
    -e "s#localhost:8002#localhost:$metrics#g")
before=$(sed -n '1,/^bazel-bin\/server\/kiln-server/p' <<<"$curl_block" | sed '$d')
server=$(sed -n '/^bazel-bin\/server\/kiln-server/,/&$/p' <<<"$curl_block")
after=$(sed -n '/^bazel-bin\/server\/kiln-server/,$p' <<<"$curl_block" | sed '1,/&$/d')
echo "README server command: $server" >>"$log"
check "README curl block: set-up commands" bash -euxc "$before"
repo_dir=$(grep -o "$snippets[^ ]*kiln-repo" <<<"$before" | head -1)
start_http() {
  podman run -d --name kiln-smoke -p "127.0.0.1:$http:8000" -p "127.0.0.1:$grpc:8001" \
    -p "127.0.0.1:$metrics:8002" -v "$repo_dir:/models:ro" -v kiln-smoke-cache:/var/cache/kiln \
    "$image" --address=0.0.0.0 --port=8001 --http-port=8000 --metrics-port=8002 \
    --cache-dir=/var/cache/kiln --model-repository=/models --model-control-mode=explicit \
    --load-model='*'
}
check "container starts (README's flags: explicit, --load-model '*')" start_http
check "ready within 120 s" wait_ready "http://127.0.0.1:$http/v2/health/ready" 120
check "runs as uid 10001" bash -c "[ \"\$(podman exec kiln-smoke id -u)\" = 10001 ]"
check "HEALTHCHECK passes (podman healthcheck run)" podman healthcheck run kiln-smoke

# Its output (stdout: the answers, one after another) and its trace (stderr) go apart.
out="$snippets/curl_block.out"
PATH=/usr/bin:$PATH bash -euxc "$after" >"$out" 2>"$snippets/curl_block.trace"
curl_rc=$?
cat "$snippets/curl_block.trace" "$out" >>"$log"
check "README curl block runs to the end (exit $curl_rc)" [ "$curl_rc" = 0 ]
check "curl /v2/health/ready: 200" grep -q '^HTTP/1.1 200' "$out"
check "curl /v2: name kiln" grep -q '"name":"kiln"' "$out"
check "curl /v2/models/mlp/config and /stats answer" \
  bash -c "grep -q '\"max_batch_size\"' '$out' && grep -q '\"model_stats\"' '$out'"
check "curl /v2/models/mlp/infer (JSON): probs equal examples/mlp_expected.npy" \
  "$py" -c "
import json, sys, numpy as np
text = open('$out').read()
answer = json.JSONDecoder().raw_decode(text, text.index('{\"model_name\":\"mlp\"'))[0]
o = answer['outputs'][0]
y = np.array(o['data'], np.float32).reshape(o['shape'])
d = np.abs(y - np.load('examples/mlp_expected.npy')).max(); print('max diff', d)
sys.exit(0 if o['name'] == 'probs' and d < 1e-5 else 1)"
check "curl /v2/models/mlp/infer (binary extension): probs equal mlp_expected.npy" \
  "$py" -c "
import json, re, sys, numpy as np
n = int(re.search(r'(?i)^inference-header-content-length: *(\d+)', open('$out').read(), re.M)[1])
body = open('$snippets/y.bin', 'rb').read()
h = json.loads(body[:n]); print(n, h)
y = np.frombuffer(body[n:], '<f4').reshape(h['outputs'][0]['shape'])
d = np.abs(y - np.load('examples/mlp_expected.npy')).max(); print('max diff', d)
sys.exit(0 if d < 1e-5 else 1)"
check "curl /metrics: two successful requests counted" \
  grep -q '^kiln_inference_request_success_total{model="mlp",version="1"} 2$' "$out"
check "curl repository index: mlp READY" grep -q '"name":"mlp","state":"READY"' "$out"

# The kernel cache volume: a restarted container compiles nothing, its kernels are disk hits.
podman restart kiln-smoke >>"$log" 2>&1
wait_ready "http://127.0.0.1:$http/v2/health/ready" 120
check "restart: kernels come from the cache volume (disk hits > 0, 0 compiles)" bash -c "
  m=\$(curl -fsS 127.0.0.1:$metrics/metrics)
  echo \"\$m\" | grep -E '^kiln_(compiles|kernel_cache_hits)_total'
  echo \"\$m\" | grep -qE '^kiln_kernel_cache_hits_total\{tier=\"disk\"\} [1-9]' &&
  echo \"\$m\" | grep -qE '^kiln_compiles_total 0$'"
check "SIGTERM (podman stop): exit code 0" bash -c "
  podman stop -t 30 kiln-smoke >/dev/null
  [ \"\$(podman inspect --format '{{.State.ExitCode}}' kiln-smoke)\" = 0 ]"

# The Python snippet against the image's default command (the README starts a bare server).
start_py() {
  podman run -d --name kiln-smoke-py -p "127.0.0.1:$grpc:8001" -p "127.0.0.1:$http:8000" "$image"
}
check "container with the image's default CMD starts" start_py
check "default CMD: ready within 60 s" wait_ready "http://127.0.0.1:$http/v2/health/ready" 60
check "client/python/gen_protos.sh" client/python/gen_protos.sh client/python/kiln/_proto
readme_block '### Python' python | sed "s/localhost:8001/localhost:$grpc/g" >"$snippets/client.py"
PYTHONPATH=client/python "$py" "$snippets/client.py" >"$snippets/python.out" 2>&1
echo "python exit $?" >>"$snippets/python.out"
cat "$snippets/python.out" >>"$log"
check "README Python snippet runs" grep -q '^python exit 0$' "$snippets/python.out"
check "Python: infer equals mlp_expected.npy, models listed, NOT_FOUND raised" "$py" -c "
import sys
lines = open('$snippets/python.out').read().split('\n')
print(lines)
ok = float(lines[0]) < 1e-5 and \"['mlp', 'mlp_again'] 1\" in lines and 'NOT_FOUND' in lines
sys.exit(0 if ok else 1)"
if [ "${KILN_SMOKE_KEEP:-0}" != 1 ]; then
  podman rm -f -v kiln-smoke kiln-smoke-py >/dev/null 2>&1
  podman volume rm -f kiln-smoke-cache >/dev/null 2>&1
fi

# --- 4. Kubernetes manifests with podman kube play -------------------------------------------
source "$repo/scripts/container_smoke_kube.sh"
source "$repo/scripts/container_smoke_cluster.sh"
source "$repo/scripts/container_smoke_snippets.sh"

summary
