#!/usr/bin/env bash
# tls_auth_test.py against two kiln-servers started here: TLS with bearer
# tokens, and mutual TLS. Certificates from make_certs.sh (openssl).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
certs="$work/certs"
mkdir -p "$certs"
tests/client/python/make_certs.sh "$certs"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
start() {  # LOG FLAG...: starts kiln-server, prints its port
  local log=$1
  shift
  server/kiln-server --port=0 --cache-dir=none --threads=1 --tls-cert="$certs/server.pem" \
    --tls-key="$certs/server.key" "$@" >"$log" 2>&1 &
  pids+=($!)
}
port_of() {
  for _ in $(seq 1 100); do
    grep -q listening "$1" 2>/dev/null && break
    sleep 0.1
  done
  sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$1" | head -1
}
start "$work/tls.log" --auth-tokens="$certs/tokens"
start "$work/mtls.log" --tls-client-ca="$certs/ca.pem"
tls_port=$(port_of "$work/tls.log")
mtls_port=$(port_of "$work/mtls.log")
if [ -z "$tls_port" ] || [ -z "$mtls_port" ]; then
  cat "$work/tls.log" "$work/mtls.log" >&2
  exit 1
fi

export PYTHONPATH="$PWD/client/python" PYTHONDONTWRITEBYTECODE=1 CERTS="$certs"
KILN_TLS_SERVER="127.0.0.1:$tls_port" KILN_MTLS_SERVER="127.0.0.1:$mtls_port" \
  /usr/bin/python3 tests/client/python/tls_auth_test.py
