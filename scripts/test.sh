#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
# Ends with the line "N passed, N failed" (counted over GoogleTest cases).
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
echo "${passed} passed, ${failed} failed"
exit "$status"
