#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
# Ends with the line "N passed, N failed" (counted over GoogleTest cases).
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

bazel test //... 2>&1 | grep -vE 'linux-sandbox|^[0-9.]+: src/main/tools' 
status=${PIPESTATUS[0]}

# Count test cases from the JUnit XML every cc_test writes.
counts=$(find -L bazel-testlogs/ -name test.xml 2>/dev/null | xargs -r cat | \
  /usr/bin/python3 -c '
import re, sys
text = sys.stdin.read()
tests = sum(int(n) for n in re.findall(r"<testsuites[^>]*\btests=\"(\d+)\"", text))
failures = sum(int(n) for n in re.findall(r"<testsuites[^>]*\bfailures=\"(\d+)\"", text))
errors = sum(int(n) for n in re.findall(r"<testsuites[^>]*\berrors=\"(\d+)\"", text))
print(tests - failures - errors, failures + errors)
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
