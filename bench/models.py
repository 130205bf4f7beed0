#!/usr/bin/python3
"""The benchmark's models, built the same way for every runtime.

The four real models come from tests/models/export_models.py (same seed, so
Kiln, ONNX Runtime and PyTorch run identical weights); the elementwise chain
(8 elementwise ops on a 1x64x56x56 tensor, scalar constants) is defined here
in both ONNX and PyTorch, and so are the larger networks of issue 23's goals
(torchvision CNNs at 224x224 and a BERT-base-shaped encoder at sequence
128), which the CI's real-model test does not export. Every ONNX file has a
symbolic leading dim "batch".

    /usr/bin/python3 bench/models.py OUT_DIR [NAME...]   # writes OUT_DIR/NAME/model.onnx
"""
import importlib.util
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "export_models", os.path.join(HERE, "..", "tests", "models", "export_models.py"))
export_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export_models)


def _vision(build):
    """A torchvision classifier at 224x224, with random weights."""
    return lambda: (build(), torch.randn(1, 3, 224, 224))


def _bert_base():
    """BERT-base's encoder shape: 12 layers, d768, 12 heads, FFN 3072, GELU,
    post-norm, sequence 128 (embeddings left out: the input is the hidden
    state, as in the transformer model)."""
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                             dropout=0.0, activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    return model, torch.randn(1, 128, 768)


class PreActBlocks(torch.nn.Module):
    """Four pre-activation residual blocks (BN, ReLU, 3x3 conv, twice), 64
    channels at 56x56: each BN reads the residual sum the next sum reads
    too, so it cannot be a conv's epilogue (issue 23, prologue fusion)."""

    def __init__(self, channels=64, blocks=4):
        super().__init__()
        def bns():
            return torch.nn.ModuleList(torch.nn.BatchNorm2d(channels) for _ in range(blocks))
        def convs():
            return torch.nn.ModuleList(
                torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                for _ in range(blocks))
        self.bn1, self.conv1, self.bn2, self.conv2 = bns(), convs(), bns(), convs()
        for m in self.modules():  # statistics that are no identity
            if isinstance(m, torch.nn.BatchNorm2d):
                torch.nn.init.uniform_(m.weight, 0.5, 1.5)
                torch.nn.init.uniform_(m.bias, -0.5, 0.5)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        for bn1, conv1, bn2, conv2 in zip(self.bn1, self.conv1, self.bn2, self.conv2):
            h = conv1(torch.relu(bn1(x)))
            x = x + conv2(torch.relu(bn2(h)))
        return x


# Bench-only models: name -> () -> (module, example input at batch 1).
LARGE = {
    "resnet50": _vision(lambda: torchvision.models.resnet50(weights=None)),
    "mobilenet_v3_large": _vision(lambda: torchvision.models.mobilenet_v3_large(weights=None)),
    "regnet_y_400mf": _vision(lambda: torchvision.models.regnet_y_400mf(weights=None)),
    "googlenet": _vision(lambda: torchvision.models.googlenet(
        weights=None, aux_logits=False, init_weights=False)),
    "convnext_tiny": _vision(lambda: torchvision.models.convnext_tiny(weights=None)),
    "bert_base": _bert_base,
    "preact_blocks": lambda: (PreActBlocks(), torch.randn(1, 64, 56, 56)),
}
# Opset 17 where PyTorch then exports LayerNormalization whole.
LARGE_OPSETS = {"convnext_tiny": 17}

# Per-sample input shape of each model (the batch dim is prepended).
SAMPLE_SHAPES = {"mlp": [784], "resnet18": [3, 224, 224], "mobilenet_v2": [3, 224, 224],
                 "transformer": [128, 256], "eltwise_chain": [64, 56, 56],
                 "resnet50": [3, 224, 224], "mobilenet_v3_large": [3, 224, 224],
                 "regnet_y_400mf": [3, 224, 224], "googlenet": [3, 224, 224],
                 "convnext_tiny": [3, 224, 224], "bert_base": [128, 768],
                 "preact_blocks": [64, 56, 56]}
ALL = list(SAMPLE_SHAPES)

# The chain: relu(abs(relu((x + 1) * 0.5) - 0.25) * 2 + 0.1), one op per entry.
CHAIN = [("Add", 1.0), ("Mul", 0.5), ("Relu", None), ("Sub", 0.25), ("Abs", None),
         ("Mul", 2.0), ("Add", 0.1), ("Relu", None)]


class EltwiseChain(torch.nn.Module):
    """CHAIN in eager PyTorch: eight ops, eight passes over the tensor."""

    def forward(self, x):
        x = x + 1.0
        x = x * 0.5
        x = torch.relu(x)
        x = x - 0.25
        x = torch.abs(x)
        x = x * 2.0
        x = x + 0.1
        return torch.relu(x)


def torch_model(name):
    """(module in eval mode, example input at batch 1) for `name`."""
    if name == "eltwise_chain":
        return EltwiseChain().eval(), torch.randn(1, *SAMPLE_SHAPES[name])
    torch.manual_seed(0)  # as export_models.export does
    if name in LARGE:
        model, x = LARGE[name]()
        return model.eval(), x
    model, x = export_models.MODELS[name]()
    return model.eval(), x


def _export_large(name, path):
    """LARGE[name] exported with a symbolic batch, as export_models.export does."""
    model, x = torch_model(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(model, (x,), path, opset_version=LARGE_OPSETS.get(name, 13),
                      input_names=["input"],
                      output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def _export_chain(path):
    nodes, inits, prev = [], [], "input"
    for i, (op, c) in enumerate(CHAIN):
        out = "output" if i == len(CHAIN) - 1 else f"t{i}"
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
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def onnx_path(out_dir, name):
    """The model's ONNX file under `out_dir`, exported on first use."""
    path = os.path.join(out_dir, name, "model.onnx")
    if not os.path.exists(path):
        if name == "eltwise_chain":
            _export_chain(path)
        elif name in LARGE:
            _export_large(name, path)
        else:
            export_models.export(name, out_dir)
    return path


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench/models.py OUT_DIR [NAME...]  (names: " + ", ".join(ALL) + ")")
    for n in sys.argv[2:] or ALL:
        print(onnx_path(sys.argv[1], n))
