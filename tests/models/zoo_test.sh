#!/usr/bin/env bash
# The CI part of the model zoo (tests/models/export_zoo.py; scripts/model_zoo.sh
# runs all of it): the hand-written models (a U-Net, LSTM and GRU sequence
# models, a 1-D audio and a 3-D video conv net, grid_sample in all its modes,
# BERT- and GPT-style transformers, an FP16 MLP and CNN, a QDQ int8 CNN) and
# two small torchvision CNNs, exported from Debian's PyTorch
# (weights=None, fixed seed), compiled and run by a kiln-server, checked
# against PyTorch's outputs: max |kiln - torch| <= 1e-4 * max(1, max |torch|).
# Every case must pass: an UNSUPPORTED one fails the test too.
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
models=(unet lstm gru audio_conv1d video_conv3d grid_sampling bert_encoder gpt_decoder fp16_mlp
        fp16_cnn qdq_int8 mobilenet_v3_small regnet_y_400mf)
/usr/bin/python3 tests/models/export_zoo.py "$work/models" "${models[@]}" >/dev/null 2>&1

source tests/test_util/start_kiln_server.sh
start_kiln_server "$work/server.log"
client/kiln onnx-test "${models[@]/#/$work/models/}" --model-tolerance \
  --server "127.0.0.1:$port" | tee "$work/result.txt"
grep -qx "${#models[@]} passed, 0 failed, 0 unsupported" "$work/result.txt"
