#!/usr/bin/env bash
# `kiln tune` through a kiln-server process with a cache directory
# (tune_test.py): tune, compile with the records, then forge the records'
# CPU and check a restarted server ignores them.
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
export PYTHONDONTWRITEBYTECODE=1
export WORK="$work" CACHE_DIR="$work/cache"
source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server1.log" --threads=1 --cache-dir="$CACHE_DIR"
KILN_SERVER="127.0.0.1:$port" /usr/bin/python3 tests/client/tune_test.py tune
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
start_kiln_server "$work/server2.log" --threads=1 --cache-dir="$CACHE_DIR"
KILN_SERVER="127.0.0.1:$port" /usr/bin/python3 tests/client/tune_test.py forged
