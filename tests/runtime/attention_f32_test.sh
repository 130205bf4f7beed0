#!/usr/bin/env bash
# kiln_attention_f32 against NumPy (see attention_f32_test.py).
set -euo pipefail
exec /usr/bin/python3 tests/runtime/attention_f32_test.py tests/runtime/attention_f32_probe
