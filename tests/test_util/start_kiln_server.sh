# Sourced by the shell tests: start_kiln_server LOG [FLAG...] starts
# server/kiln-server on a free loopback port (memory-only kernel cache),
# waits until it listens, sets `port` and `server_pid` and stops it when the
# test exits (a second call's server replaces the first in that: stop the
# first yourself).
start_kiln_server() {
  local log="$1"
  shift
  server/kiln-server --port=0 --cache-dir=none "$@" >"$log" 2>&1 &
  local pid=$!
  server_pid=$pid
  trap "kill $pid 2>/dev/null || true" EXIT
  for _ in $(seq 1 100); do
    grep -q listening "$log" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
  if [ -z "$port" ]; then
    echo "kiln-server did not start:" >&2
    cat "$log" >&2
    return 1
  fi
}
