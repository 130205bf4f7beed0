#!/usr/bin/env bash
# kiln_qconv_u8s8 against NumPy (see qconv_u8s8_test.py).
set -euo pipefail
exec /usr/bin/python3 tests/runtime/qconv_u8s8_test.py tests/runtime/qconv_u8s8_probe
