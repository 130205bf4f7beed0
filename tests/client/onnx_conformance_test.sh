#!/usr/bin/env bash
# ONNX's own backend node tests, generated here by Debian's python3-onnx, run
# through a kiln-server by `kiln onnx-test`: every case whose operators Kiln
# supports must pass (the runner exits non-zero on any FAIL).
set -euo pipefail
kiln=client/kiln
work="${TEST_TMPDIR:-$(mktemp -d)}"
cases="$work/onnx_cases"

# onnx 1.12's generator still uses NumPy aliases that NumPy 1.24 removed.
/usr/bin/python3 - "$cases" <<'PY' >/dev/null
import sys
import numpy
for alias, target in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if not hasattr(numpy, alias):
        setattr(numpy, alias, target)
from onnx.backend.test.cmd_tools import main
sys.argv = ["onnx", "generate-data", "-o", sys.argv[1]]
main()
PY

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log" --threads=1
"$kiln" onnx-test "$cases"/node/test_* --server "localhost:$port" | tee "$work/results.txt" | grep -E '^(FAIL|[0-9]+ passed)'
# And no supported case may quietly become unsupported: the count only grows.
min_passed=513
passed=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' "$work/results.txt" | tail -1)
if [ "${passed:-0}" -lt "$min_passed" ]; then
  echo "only ${passed:-0} cases passed; at least $min_passed did before" >&2
  exit 1
fi
