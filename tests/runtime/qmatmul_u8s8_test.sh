#!/usr/bin/env bash
# kiln_qmatmul_u8s8 against NumPy (see qmatmul_u8s8_test.py).
set -euo pipefail
exec /usr/bin/python3 tests/runtime/qmatmul_u8s8_test.py tests/runtime/qmatmul_u8s8_probe
