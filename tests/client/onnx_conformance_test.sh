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

# And cases ONNX 1.12 lacks, with ONNX's reference (or PyTorch's) as expected data.
/usr/bin/python3 tests/client/extra_onnx_cases.py "$cases/extra"

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log" --threads=1
# Left out: two cases whose expected data is ONNX 1.12's reference, not the
# operator as ONNX Runtime and PyTorch run it. Resize with align_corners and
# scales that do not give a whole output length (4 x 0.6): the reference
# divides by the unfloored 2.4, ORT, PyTorch and Kiln by the output's 2.
diverging="test_resize_downsample_scales_cubic_align_corners
test_resize_downsample_scales_linear_align_corners"
run=()
for c in "$cases"/node/test_* "$cases"/extra/test_*; do
  grep -qx "$(basename "$c")" <<<"$diverging" || run+=("$c")
done
"$kiln" onnx-test "${run[@]}" --server "127.0.0.1:$port" | tee "$work/results.txt" | grep -E '^(FAIL|[0-9]+ passed)'
# And no supported case may quietly become unsupported: the count only grows.
min_passed=842
passed=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' "$work/results.txt" | tail -1)
if [ "${passed:-0}" -lt "$min_passed" ]; then
  echo "only ${passed:-0} cases passed; at least $min_passed did before" >&2
  exit 1
fi

# --json: every unsupported case carries a reason category, and the tally
# matches the cases.
"$kiln" onnx-test "$cases"/node/test_add* "$cases"/node/test_adam "$cases"/node/test_loop11 \
  "$cases"/node/test_cast_FLOAT_to_STRING --json --server "127.0.0.1:$port" > "$work/results.json"
/usr/bin/python3 - "$work/results.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
unsupported = [c for c in report["cases"] if c["outcome"] == "UNSUPPORTED"]
assert unsupported, "expected unsupported cases"
assert all(c.get("category") for c in unsupported), unsupported
assert sum(report["unsupported_by_category"].values()) == report["unsupported"] == len(unsupported)
assert report["passed"] == sum(c["outcome"] == "PASS" for c in report["cases"]) > 0
PY
