#!/usr/bin/env bash
# The requantising stores of kiln_qconv_u8s8_q8 and kiln_qmatmul_u8s8_q8
# against float64 (see requantize_u8_test.py).
set -euo pipefail
exec /usr/bin/python3 tests/runtime/requantize_u8_test.py tests/runtime/qconv_u8s8_probe \
  tests/runtime/qmatmul_u8s8_probe
