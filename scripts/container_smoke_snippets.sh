# Sourced by scripts/container_smoke.sh: the README's "Model control" and "Model versions"
# blocks run against the image, each as written but for three substitutions: the block's
# `bazel-bin/server/kiln-server FLAGS &` is the image's container with those flags (its model
# repository bind-mounted at the same path, --address=0.0.0.0, the HTTP port published on a free
# loopback port), `bazel-bin/client/kiln` is the image's kiln run inside that container, and
# /tmp/ is a directory of the smoke test's. Uses that script's check, readme_block, image,
# snippets, py.

split_at_server() {  # split_at_server BLOCK DIR: DIR/before, DIR/server (to its `&`), DIR/after.
  awk -v d="$2" '
    !state && /^bazel-bin\/server\/kiln-server/ { state = 1 }
    !state { print > (d "/before"); next }
    state == 1 { print > (d "/server"); if (/&[[:space:]]*$/) state = 2; next }
    { print > (d "/after") }' <<<"$1"
  touch "$2/before" "$2/server" "$2/after"
}

# run_server_block NAME HEADING [DIR]: the block's stdout in $snippets/NAME.out; DIR, if given,
# is copied into its /tmp/ first (what the README's blocks before it left there).
run_server_block() {
  local name=$1 dir="$snippets/$1" before server after flags repo port=""
  rm -rf "$dir" && mkdir -p "$dir"
  [ -z "${3:-}" ] || cp -r "$3" "$dir"/
  split_at_server "$(readme_block "$2" sh | sed -e "s#/tmp/#$dir/#g")" "$dir"
  before=$(cat "$dir/before") server=$(cat "$dir/server") after=$(cat "$dir/after")
  flags=$(tr '\n' ' ' <<<"$server" | sed -e 's#\\ # #g' -e 's#^bazel-bin/server/kiln-server##' \
    -e 's#&[[:space:]]*$##')
  repo=$(grep -oE -- '--model-repository[ =][^ ]+' <<<"$flags" | sed 's/^--model-repository.//')
  publish=()
  if grep -qE -- '--http-port[ =]' <<<"$flags"; then
    local inside
    inside=$(grep -oE -- '--http-port[ =][0-9]+' <<<"$flags" | grep -oE '[0-9]+$')
    port=$(free_port)
    publish=(-p "127.0.0.1:$port:$inside")
    after=$(sed "s#localhost:$inside#localhost:$port#g" <<<"$after")
  fi
  after=$(sed "s#bazel-bin/client/kiln#podman exec kiln-smoke-$name kiln#g" <<<"$after")
  echo "README $name block: kiln-server$flags" >>"$log"
  (PATH=/usr/bin:$PATH bash -euxc "$before") >>"$log" 2>&1 || return 1
  podman rm -f -v "kiln-smoke-$name" >/dev/null 2>&1
  # The flags as the README writes them: a word split by the shell, as there.
  eval "set -- $flags"
  podman run -d --name "kiln-smoke-$name" "${publish[@]}" -v "$repo:$repo:ro" "$image" \
    --address=0.0.0.0 "$@" >>"$log" 2>&1 || return 1
  local i
  for i in $(seq 1 120); do
    podman logs "kiln-smoke-$name" 2>&1 | grep -q 'kiln-server listening' && break
    sleep 1
  done
  [ -z "$port" ] || wait_ready "http://127.0.0.1:$port/v2/health/ready" 120
  (PATH=/usr/bin:$PATH bash -euxc "$after") >"$snippets/$name.out" 2>>"$log"
  local rc=$?
  cat "$snippets/$name.out" >>"$log"
  [ "${KILN_SMOKE_KEEP:-0}" = 1 ] || podman rm -f -v "kiln-smoke-$name" >/dev/null 2>&1
  return $rc
}

# /tmp/kiln-repo as the HTTP block left it: mlp.
check "README Model control block (poll mode) runs" \
  run_server_block control '### Model control' "$repo_dir"
check "Model control: mlp2 added to the repository is loaded by the poll" bash -c \
  "grep -qE '^mlp ' '$snippets/control.out' && grep -qE '^mlp2 ' '$snippets/control.out'"

check "README Model versions block runs" run_server_block versions '### Model versions'
check "Model versions: the answers the README's comments give" \
  "$py" - "$snippets/versions.out" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
# The curl answers follow one another on one line; kiln's model lines close the output.
answers, at, decoder = [], 0, json.JSONDecoder()
while at < len(text) and text[at] in "{[":
    value, at = decoder.raw_decode(text, at)
    answers.append(value)
print(answers)
print(text[at:])
metadata, latest, v2, v1, index = answers[:5]
ok = metadata["versions"] == ["2", "3"]
ok &= latest["model_version"] == "3" and latest["outputs"][0]["data"][:3] == [3.0, 4.0, 5.0]
ok &= v2["model_version"] == "2" and v2["outputs"][0]["data"][:3] == [2.0, 3.0, 4.0]
ok &= v1 == {"error": "model 'add' has no version '1'; it serves versions 2, 3"}
ok &= [(e["version"], e["state"]) for e in index] == [("1", "UNAVAILABLE"), ("2", "READY"),
                                                      ("3", "READY")]
ok &= index[0]["reason"] == "version_policy (latest 2) does not select it"
# After the load: versions 3 and 4 served, 2 gone.
ok &= sorted(re.findall(r"^add +version=(\d+)", text[at:], re.M)) == ["3", "4"]
sys.exit(0 if ok else 1)
PY
