#!/usr/bin/env bash
# The model zoo: exports every model of tests/models/export_zoo.py (or the
# NAMEs given) from Debian's PyTorch, runs each through a kiln-server of its
# own (a crash or a hang stays with its model, and no kernel compiled for
# another model shortens its compile) and prints one line per model:
#   NAME  PASS|FAIL|UNSUPPORTED|CRASH|TIMEOUT  compile MS  (Kiln's reason)
# compile MS is the `kiln compile` report's total on a cold kernel cache; the
# verdict is `kiln onnx-test --model-tolerance`'s
# (max |kiln - torch| <= 1e-4 * max(1, max |torch|)), and for a mismatch the
# worst element with its |kiln - torch|.
# Usage: scripts/model_zoo.sh [NAME...]   (KILN_ZOO_TIMEOUT: seconds per model, 1800)
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
timeout_s=${KILN_ZOO_TIMEOUT:-1800}

bazel build //server:kiln-server //client:kiln 2>&1 \
  | grep -vE 'linux-sandbox|^[0-9.]+: src/main/tools' | tail -1
work=$(mktemp -d)
/usr/bin/python3 tests/models/export_zoo.py "$work/models" "$@" >"$work/export.log" 2>&1 \
  || { echo "export failed:"; tail -20 "$work/export.log"; exit 1; }
names=$(sed -n 's/^exported //p' "$work/export.log")

# onnx-test --json of one case -> "VERDICT<TAB>[category] detail"; a mismatch
# ("output_0[i]: got G, want W") gets its |kiln - torch|.
describe='
import json, re, sys
text = sys.stdin.read()
try:
    case = json.loads(text)["cases"][0]
except (ValueError, KeyError, IndexError):
    print("FAIL\t" + (text.strip().splitlines() or ["no output"])[-1])
    sys.exit()
detail = case.get("detail", "")
if case.get("category"):
    detail = "[%s] %s" % (case["category"], detail)
m = re.search(r"got (\S+), want (\S+)$", detail)
if m:
    detail += "; |kiln - torch| = %.3g" % abs(float(m.group(1)) - float(m.group(2)))
print("%s\t%s" % (case["outcome"], detail))
'

source tests/test_util/start_kiln_server.sh
cd bazel-bin  # start_kiln_server runs server/kiln-server
failures=0
for name in $names; do
  case_dir="$work/models/$name"
  log="$work/$name.server.log"
  : >"$log"
  start_kiln_server "$log" || { echo "$name  CRASH  (kiln-server did not start)"; continue; }
  server_pid=$!
  compile_ms=$(timeout "$timeout_s" client/kiln compile "$case_dir/model.onnx" --name "zoo_$name" \
                 --server "127.0.0.1:$port" 2>/dev/null | sed -n 's/^total \([0-9.]*\) ms.*/\1/p')
  client/kiln unload "zoo_$name" --server "127.0.0.1:$port" >/dev/null 2>&1
  result=$(timeout "$timeout_s" client/kiln onnx-test "$case_dir" --model-tolerance --json \
             --server "127.0.0.1:$port" 2>&1)
  status=$?
  if [ "$status" -eq 124 ]; then
    verdict=TIMEOUT detail="no verdict in ${timeout_s}s"
  elif ! kill -0 "$server_pid" 2>/dev/null; then
    verdict=CRASH detail="kiln-server died: $(grep -v listening "$log" | tail -1)"
  else
    IFS=$'\t' read -r verdict detail < <(/usr/bin/python3 -c "$describe" <<<"$result")
  fi
  [ "$verdict" = PASS ] || failures=$((failures + 1))
  printf '%-30s %-11s compile %10s ms%s\n' "$name" "$verdict" "${compile_ms:--}" \
    "${detail:+  ($detail)}"
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
done
cd "$repo"
rm -rf "$work"
exit $((failures > 0))
