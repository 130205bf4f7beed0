#!/usr/bin/python3
"""Writes LayerNorm models fed by a residual add, and NumPy's outputs for them,
for layer_norm_numerics_test.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Each case is
NAME.onnx with inputs x and r (NAME_x.npy, NAME_r.npy) and output
y = LayerNorm(x + r) computed by NumPy in float64 (NAME_y.npy). Two forms:
opset 17's LayerNormalization, and the decomposed pattern PyTorch exports at
opset 13 (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(23)


def reference(x, r, scale, bias, eps):
    v = x.astype(np.float64) + r.astype(np.float64)
    mean = v.mean(axis=-1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (v - mean) / np.sqrt(var + eps) * scale
    return y if bias is None else y + bias


def io(shape):
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("x", "r")], \
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]


def layer_norm_17(shape, eps, with_bias):
    d = shape[-1]
    scale = rng.uniform(0.5, 1.5, d).astype(np.float32)
    bias = (rng.standard_normal(d) * 0.1).astype(np.float32) if with_bias else None
    inits = [numpy_helper.from_array(scale, "scale")]
    ln_inputs = ["v", "scale"]
    if with_bias:
        inits.append(numpy_helper.from_array(bias, "bias"))
        ln_inputs.append("bias")
    nodes = [helper.make_node("Add", ["x", "r"], ["v"]),
             helper.make_node("LayerNormalization", ln_inputs, ["y"], axis=-1, epsilon=eps)]
    inputs, outputs = io(shape)
    return helper.make_graph(nodes, "ln17", inputs, outputs, inits), scale, bias, 17


def layer_norm_decomposed(shape, eps):
    d = shape[-1]
    scale = rng.uniform(0.5, 1.5, d).astype(np.float32)
    bias = (rng.standard_normal(d) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias"),
             numpy_helper.from_array(np.array(2, np.float32), "two"),
             numpy_helper.from_array(np.array(eps, np.float32), "eps")]
    nodes = [helper.make_node("Add", ["x", "r"], ["v"]),
             helper.make_node("ReduceMean", ["v"], ["mean"], axes=[-1], keepdims=1),
             helper.make_node("Sub", ["v", "mean"], ["centered"]),
             helper.make_node("Pow", ["centered", "two"], ["square"]),
             helper.make_node("ReduceMean", ["square"], ["var"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["var", "eps"], ["var_eps"]),
             helper.make_node("Sqrt", ["var_eps"], ["std"]),
             helper.make_node("Div", ["centered", "std"], ["normed"]),
             helper.make_node("Mul", ["normed", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "bias"], ["y"])]
    inputs, outputs = io(shape)
    return helper.make_graph(nodes, "ln_decomposed", inputs, outputs, inits), scale, bias, 13


def save(name, made, shape, eps, spread=1.0):
    graph, scale, bias, opset = made
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name + ".onnx"))
    # An offset per row, so that a missing mean shows; `spread` scales the
    # deviations, small enough in one case that eps decides the result.
    x = (rng.standard_normal(shape) * spread + rng.standard_normal(shape[:-1] + [1]) * 3)
    r = rng.standard_normal(shape) * spread
    x, r = x.astype(np.float32), r.astype(np.float32)
    np.save(os.path.join(HERE, name + "_x.npy"), x)
    np.save(os.path.join(HERE, name + "_r.npy"), r)
    np.save(os.path.join(HERE, name + "_y.npy"),
            reference(x, r, scale, bias, eps).astype(np.float32))


if __name__ == "__main__":
    save("ln17_rows256", layer_norm_17([2, 8, 256], 1e-5, True), [2, 8, 256], 1e-5)
    save("ln17_rows768", layer_norm_17([1, 9, 768], 1e-5, True), [1, 9, 768], 1e-5)
    save("ln17_rows37_scale_only", layer_norm_17([5, 37], 1e-5, False), [5, 37], 1e-5)
    # Deviations of 0.01 (variance 2e-4) against eps 0.01: eps dominates.
    save("ln17_large_eps", layer_norm_17([4, 256], 1e-2, True), [4, 256], 1e-2, spread=0.01)
    save("decomposed_rows256", layer_norm_decomposed([128, 256], 1e-5), [128, 256], 1e-5)
    save("decomposed_rows768", layer_norm_decomposed([3, 768], 1e-6), [3, 768], 1e-6)
    save("decomposed_rows37", layer_norm_decomposed([2, 3, 37], 1e-5), [2, 3, 37], 1e-5)
