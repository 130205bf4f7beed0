#!/usr/bin/env bash
# kiln and the bench tools as subprocesses (cli_test.py) against a kiln-server
# started here, and the help text in README.md and bench/README.md against
# the binaries' real --help (cli_docs.py --check).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
export PYTHONDONTWRITEBYTECODE=1
/usr/bin/python3 tests/client/cli_docs.py --check kiln=client/kiln \
  kiln-bench=bench/kiln-bench gemm-bench=bench/gemm-bench grpc-echo=bench/grpc-echo \
  stream=bench/stream -- README.md bench/README.md
source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log" --threads=1
KILN_SERVER="127.0.0.1:$port" WORK="$work" /usr/bin/python3 tests/client/cli_test.py
