#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
# Ends with the line "N passed, N failed" (counted over GoogleTest cases and
# sh_tests, plus one per fuzz target in the libFuzzer smoke at the end).
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

# Tests always run: a cached pass would hide a machine that lost a package.
bazel test --nocache_test_results //... 2>&1 | grep -vE 'linux-sandbox|^[0-9.]+: src/main/tools' 
status=${PIPESTATUS[0]}

# Count test cases from the JUnit XML every cc_test writes.
counts=$(find -L bazel-testlogs/ -name test.xml 2>/dev/null | /usr/bin/python3 -c '
import re, sys
passed = failed = 0
for path in sys.stdin.read().split():
    text = open(path, errors="replace").read()
    # GoogleTest writes totals on <testsuites>; Bazel writes the XML of other
    # tests (sh_test) has them only on <testsuite>.
    top = re.search(r"<testsuites[^>]*\btests=\"(\d+)\"[^>]*>", text)
    scope = [top.group(0)] if top else re.findall(r"<testsuite\b[^>]*>", text)
    for tag in scope:
        t = int((re.search(r"\btests=\"(\d+)\"", tag) or [0, 0])[1])
        f = sum(int(m) for m in re.findall(r"\b(?:failures|errors)=\"(\d+)\"", tag))
        passed += t - f
        failed += f
print(passed, failed)
')
passed=${counts% *}
failed=${counts#* }
passed=${passed:-0}
failed=${failed:-0}
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # The build or a test binary failed before reporting cases.
  failed=1
fi

# libFuzzer smoke (README: "Fuzzing and sanitizers"): every fuzz target fuzzed
# for KILN_FUZZ_SECONDS (0 skips it) under ASan + UBSan from its seed corpus,
# each counted as one test. Work dirs go to a temporary directory, kept only
# when a target crashed (fuzz.sh printed its reproducer's path in it).
fuzz_seconds=${KILN_FUZZ_SECONDS:-45}
if [ "$fuzz_seconds" -gt 0 ]; then
  fuzz_work=$(mktemp -d /tmp/kiln-fuzz-smoke.XXXXXX)
  KILN_FUZZ_WORK=$fuzz_work KILN_FUZZ_JOBS=2 bash scripts/fuzz.sh all "$fuzz_seconds" 2>&1 |
    tee "$fuzz_work/smoke.log"
  fuzz_status=${PIPESTATUS[0]}
  targets=$(ls fuzz/*_fuzzer.cc | wc -l)
  # fuzz.sh prints "<target>: N executions, ..." for each target it ran and
  # "<target>: CRASH ..." for each that failed; a failed build runs none.
  ran=$(grep -cE '^[a-z_]+_fuzzer: [0-9?]+ executions' "$fuzz_work/smoke.log")
  crashed=$(grep -cE '^[a-z_]+_fuzzer: CRASH' "$fuzz_work/smoke.log")
  passed=$((passed + ran - crashed))
  failed=$((failed + targets - ran + crashed))
  if [ "$fuzz_status" -ne 0 ] || [ $((ran - crashed)) -ne "$targets" ]; then
    echo "fuzz smoke failed; its work dirs are kept in $fuzz_work"
    [ "$status" -ne 0 ] || status=1
  else
    rm -rf "$fuzz_work"
  fi
fi
echo "${passed} passed, ${failed} failed"
exit "$status"
