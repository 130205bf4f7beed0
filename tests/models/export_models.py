#!/usr/bin/python3
"""Exports the real models Kiln is checked against, with PyTorch's outputs.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision):
    /usr/bin/python3 tests/models/export_models.py OUT_DIR [NAME...]
Each model becomes OUT_DIR/NAME/{model.onnx, test_data_set_0/{input_0,output_0}.pb}
(ONNX's own test layout, so `kiln onnx-test --model-tolerance` runs it).
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


def export(name, out_dir):
    torch.manual_seed(0)
    model, x = MODELS[name]()
    model.eval()
    case = os.path.join(out_dir, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    with torch.no_grad():
        y = model(x)
    # Exported with autograd on: PyTorch's fused inference fast path (which
    # has no ONNX form) only runs when no parameter needs a gradient.
    torch.onnx.export(model, (x,), os.path.join(case, "model.onnx"), opset_version=13,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    for kind, value in (("input_0", x), ("output_0", y)):
        tensor = numpy_helper.from_array(value.numpy().astype(np.float32))
        with open(os.path.join(case, "test_data_set_0", kind + ".pb"), "wb") as f:
            f.write(tensor.SerializeToString())


if __name__ == "__main__":
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        export(name, out)
        print("exported", name)
