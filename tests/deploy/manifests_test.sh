#!/usr/bin/env bash
# deploy/'s manifests and Dockerfile, parsed with Debian's python3-yaml.
set -euo pipefail
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 tests/deploy/manifests_test.py \
  server/kiln-server deploy
