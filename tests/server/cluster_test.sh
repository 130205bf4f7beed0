#!/usr/bin/env bash
# A three-replica Kiln cluster behind nginx on loopback (cluster_test.py):
# Redis as the shared kernel cache and model store, a replica SIGKILLed
# mid-load, one restarted. Extra arguments go to cluster_test.py
# (--requests N, --bench SECONDS).
set -euo pipefail
export PYTHONPATH="$PWD/client/python" PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 tests/server/cluster_test.py deploy/nginx/kiln-grpc.conf.template \
  server/kiln-server client/kiln examples/mlp.pbtxt examples/x.npy examples/mlp_expected.npy "$@"
