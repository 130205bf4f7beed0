"""The benchmark's models, built the same way for every runtime.

The four real models come from tests/models/export_models.py (same seed, so
Kiln, ONNX Runtime and PyTorch run identical weights); the elementwise chain
(8 cheap ops on a 1x64x56x56 tensor) is defined here in both ONNX and PyTorch.
"""
import importlib.util
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "export_models", os.path.join(HERE, "..", "tests", "models", "export_models.py"))
export_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export_models)

# Per-sample input shape of each model (the batch dim is prepended).
SAMPLE_SHAPES = {"mlp": [784], "resnet18": [3, 224, 224], "mobilenet_v2": [3, 224, 224],
                 "transformer": [128, 256], "eltwise_chain": [64, 56, 56]}
ALL = list(SAMPLE_SHAPES)

# The chain: ((relu((x + 1) * 0.5) - 0.25).abs() * 2 + 0.1).relu()
_CHAIN = [("Add", 1.0), ("Mul", 0.5), ("Relu", None), ("Sub", 0.25), ("Abs", None),
          ("Mul", 2.0), ("Add", 0.1), ("Relu", None)]


class EltwiseChain(torch.nn.Module):
    def forward(self, x):
        for op, c in _CHAIN:
            x = {"Add": lambda v: v + c, "Mul": lambda v: v * c, "Sub": lambda v: v - c,
                 "Relu": torch.relu, "Abs": torch.abs}[op](x)
        return x


def torch_model(name):
    """(module, example input at batch 1) for `name`."""
    if name == "eltwise_chain":
        return EltwiseChain(), torch.randn(1, *SAMPLE_SHAPES[name])
    torch.manual_seed(0)
    return export_models.MODELS[name]()


def _export_chain(path):
    nodes, inits, prev = [], [], "input"
    for i, (op, c) in enumerate(_CHAIN):
        out = "output" if i == len(_CHAIN) - 1 else f"t{i}"
        inputs = [prev]
        if c is not None:
            inits.append(numpy_helper.from_array(np.array(c, dtype=np.float32), f"c{i}"))
            inputs.append(f"c{i}")
        nodes.append(helper.make_node(op, inputs, [out]))
        prev = out
    shape = ["batch"] + SAMPLE_SHAPES["eltwise_chain"]
    graph = helper.make_graph(
        nodes, "eltwise_chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], inits)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def onnx_path(out_dir, name):
    """The model's ONNX file under `out_dir`, exported on first use."""
    path = os.path.join(out_dir, name, "model.onnx")
    if not os.path.exists(path):
        if name == "eltwise_chain":
            _export_chain(path)
        else:
            export_models.export(name, out_dir)
    return path
