#!/usr/bin/env bash
# Builds kiln-server's image from deploy/Dockerfile:
#   deploy/build_image.sh [TAG]        (default kiln:latest, and kiln:<git commit>)
# The build stage installs Debian packages with apt, so the machine needs the
# Debian mirror (as scripts/setup.sh does) and a running Docker daemon (BuildKit,
# for deploy/Dockerfile.dockerignore).
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-kiln:latest}
if ! docker info >/dev/null 2>&1; then
  echo "build_image: no Docker daemon answers (docker info failed)" >&2
  exit 1
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile -t "$tag" -t "${tag%%:*}:$commit" .
echo "built $tag (${tag%%:*}:$commit)"
