#!/usr/bin/env bash
# NonZero, Compress and Unique end to end through a kiln-server: value_shape_cases.py
# writes node-test cases with NumPy's results (zero-size outputs, results
# feeding other ops, a folded constant), `kiln onnx-test` runs them, and
# every one must pass (none unsupported).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
/usr/bin/python3 tests/server/value_shape_cases.py "$work/cases"

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log" --threads=1
# 127.0.0.1, not localhost: another process may hold the port on ::1.
client/kiln onnx-test "$work"/cases/* --server "127.0.0.1:$port" | tee "$work/results.txt"
want=$(ls "$work/cases" | wc -l)
grep -qx "$want passed, 0 failed, 0 unsupported" "$work/results.txt" || {
  echo "expected all $want cases to pass" >&2
  exit 1
}
