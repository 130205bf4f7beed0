#!/usr/bin/env bash
# make_certs.sh DIR: a CA, a server certificate for localhost/127.0.0.1 and a
# client certificate signed by it, and a tokens file (one infer, one admin token).
set -euo pipefail
cd "$1"
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"; }
signed() {  # name, extensions
  key "$1"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
  printf '%s\n' "$2" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
}
key ca
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj "/CN=ca"
signed server "subjectAltName=DNS:localhost,IP:127.0.0.1"
signed client "extendedKeyUsage=clientAuth"
printf 'infer-token-0123456789 infer\nadmin-token-0123456789 admin\n' > tokens
