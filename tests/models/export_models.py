#!/usr/bin/python3
"""Exports the real models Kiln is checked against, with PyTorch's outputs.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision):
    /usr/bin/python3 tests/models/export_models.py OUT_DIR [--shapes] [NAME...]
Each model becomes OUT_DIR/NAME/{model.onnx, test_data_set_0/{input_0,output_0}.pb}
(ONNX's own test layout, so `kiln onnx-test --model-tolerance` runs it).
Every model has a symbolic batch ("batch"). With --shapes the transformer's
sequence length is symbolic too ("seq"), and each model gets one data set
per size in SAMPLE_SIZES instead (1, a prime and the largest served), so
one loaded model is checked at every one of them.
Models are built with weights=None and a fixed seed: nothing is downloaded.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10)), torch.randn(1, 784)


def resnet18():
    return torchvision.models.resnet18(weights=None), torch.randn(1, 3, 224, 224)


def mobilenet_v2():
    return torchvision.models.mobilenet_v2(weights=None), torch.randn(1, 3, 224, 224)


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), \
        torch.randn(1, 128, 256)


MODELS = {"mlp": mlp, "resnet18": resnet18, "mobilenet_v2": mobilenet_v2,
          "transformer": transformer}

# With --shapes: the symbolic axes of each model's input and output.
DYNAMIC_AXES = {"transformer": {0: "batch", 1: "seq"}}

# --shapes: (batch, seq) per data set; seq only for the transformer.
SAMPLE_SIZES = {"mlp": [(1,), (7,), (32,)], "resnet18": [(1,), (7,), (32,)],
                "mobilenet_v2": [(1,), (5,)],
                "transformer": [(1, 1), (7, 13), (2, 256), (32, 31)]}


def sample_input(x, size):
    """x with its leading dims replaced by `size` (fresh values, same seed)."""
    shape = list(size) + list(x.shape[len(size):])
    return torch.randn(*shape)


def export(name, out_dir, shapes=False):
    torch.manual_seed(0)
    model, x = MODELS[name]()
    model.eval()
    case = os.path.join(out_dir, name)
    axes = DYNAMIC_AXES.get(name, {0: "batch"}) if shapes else {0: "batch"}
    # Exported with autograd on: PyTorch's fused inference fast path (which
    # has no ONNX form) only runs when no parameter needs a gradient.
    os.makedirs(case, exist_ok=True)
    torch.onnx.export(model, (x,), os.path.join(case, "model.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": axes, "output": axes})
    inputs = [sample_input(x, size) for size in SAMPLE_SIZES[name]] if shapes else [x]
    for i, xi in enumerate(inputs):
        data = os.path.join(case, "test_data_set_%d" % i)
        os.makedirs(data, exist_ok=True)
        with torch.no_grad():
            yi = model(xi)
        for kind, value in (("input_0", xi), ("output_0", yi)):
            tensor = numpy_helper.from_array(value.numpy().astype(np.float32))
            with open(os.path.join(data, kind + ".pb"), "wb") as f:
                f.write(tensor.SerializeToString())


if __name__ == "__main__":
    out = sys.argv[1]
    args = sys.argv[2:]
    shapes = "--shapes" in args
    names = [a for a in args if a != "--shapes"]
    for name in names or list(MODELS):
        export(name, out, shapes)
        print("exported", name)
