#!/usr/bin/env bash
# Prints, one a line, the Debian packages that hold the shared libraries the
# given binaries load: what deploy/Dockerfile's runtime stage installs, so the
# image carries the libraries (libLLVM, gRPC, protobuf, Abseil, libonnx, ...)
# and none of the -dev packages, compilers or Bazel the build needed.
set -euo pipefail

owner() {
  # dpkg knows a file by the path its package ships; with merged /usr the
  # loader may name it by the other prefix, so the real path goes first.
  local lib=$1 real
  real=$(readlink -f "$lib")
  for path in "$real" "$lib" "${real#/usr}" "/usr$real"; do
    if dpkg -S "$path" >/dev/null 2>&1; then
      dpkg -S "$path" | head -1 | cut -d: -f1
      return
    fi
  done
  echo "runtime_packages: no Debian package holds $lib" >&2
  return 1
}

for binary in "$@"; do
  [ -x "$binary" ] || { echo "runtime_packages: $binary is not an executable" >&2; exit 1; }
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do owner "$lib"; done
done | sort -u
