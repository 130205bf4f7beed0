#!/usr/bin/env bash
# Builds kiln-server's image from deploy/Dockerfile:
#   deploy/build_image.sh [TAG [BUILD OPTION...]]   (default kiln:latest, and kiln:<git commit>)
# with Docker when a daemon answers (BuildKit: it reads deploy/Dockerfile.dockerignore and
# keeps the Bazel cache mount between builds), else with podman (--format docker: an OCI image
# would drop the HEALTHCHECK). The build stage installs Debian packages with apt, so the builder
# needs the Debian mirror, as scripts/setup.sh does. Where debian:12 cannot be pulled, pass a
# Debian 12 image of your own: --build-arg BASE_IMAGE=... (scripts/container_smoke.sh makes one
# with debootstrap). KILN_BUILDER=docker|podman picks one.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-kiln:latest}
shift || true
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
tags=(-t "$tag" -t "${tag%%:*}:$commit")
builder=${KILN_BUILDER:-}
if [ -z "$builder" ]; then
  if docker info >/dev/null 2>&1; then
    builder=docker
  elif command -v podman >/dev/null; then
    builder=podman
  fi
fi
if [ "$builder" = docker ]; then
  DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile "${tags[@]}" "$@" .
elif [ "$builder" = podman ]; then
  podman build -f deploy/Dockerfile --ignorefile deploy/Dockerfile.dockerignore --format docker \
    "${tags[@]}" "$@" .
else
  echo "build_image: neither a Docker daemon (docker info failed) nor podman" >&2
  exit 1
fi
echo "built $tag (${tag%%:*}:$commit)"
