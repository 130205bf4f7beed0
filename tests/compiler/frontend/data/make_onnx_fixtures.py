#!/usr/bin/python3
"""Writes small ONNX models and NumPy's outputs for them, for onnx_importer_test.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Each case is
NAME.onnx with NAME_x.npy (input) and NAME_y.npy (the output NumPy computes).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)


def save(name, graph, x, y, opset=13):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name + ".onnx"))
    if x is not None:
        np.save(os.path.join(HERE, name + "_x.npy"), x.astype(np.float32))
        np.save(os.path.join(HERE, name + "_y.npy"), y.astype(np.float32))


def conv2d(x, w, b, stride, pads):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return out + b[None, :, None, None]


def small_cnn():
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    beta = (rng.standard_normal(8) * 0.1).astype(np.float32)
    mean = (rng.standard_normal(8) * 0.1).astype(np.float32)
    var = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32)
    b2 = np.zeros(8, np.float32)
    wf = (rng.standard_normal((5, 8)) * 0.5).astype(np.float32)
    bf = (rng.standard_normal(5) * 0.1).astype(np.float32)

    h = conv2d(x.astype(np.float64), w1, b1, 1, (1, 1, 1, 1))
    h = (h - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    h = h * gamma[None, :, None, None] + beta[None, :, None, None]
    h = np.maximum(h, 0)
    # SAME_UPPER with stride 2 on 12x12 and a 3x3 kernel: total pad 1, at the end.
    h = np.maximum(conv2d(h, w2, b2, 2, (0, 0, 1, 1)), 0)
    h = h.mean(axis=(2, 3))
    logits = h @ wf.T + bf
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)

    inits = [numpy_helper.from_array(a, n) for a, n in [
        (w1, "w1"), (b1, "b1"), (gamma, "gamma"), (beta, "beta"), (mean, "mean"), (var, "var"),
        (w2, "w2"), (b2, "b2"), (wf, "wf"), (bf, "bf")]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn1"],
                         name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 12, 12])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 5])], inits)
    save("small_cnn", graph, x, y)


def matmul_mix():
    x = rng.standard_normal((2, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    shape = np.array([4, 2], np.int64)
    axes = np.array([1], np.int64)
    h = np.tanh(x @ w - 0.5)
    y = (h.reshape(4, 2).T).sum(axis=1, keepdims=True)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        helper.make_node("Constant", [], ["half"], name="half",
                         value=numpy_helper.from_array(np.array(0.5, np.float32))),
        helper.make_node("Sub", ["mm", "half"], ["sub"], name="sub"),
        helper.make_node("Tanh", ["sub"], ["t"], name="tanh"),
        helper.make_node("Reshape", ["t", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["tr"], name="transpose", perm=[1, 0]),
        helper.make_node("ReduceSum", ["tr", "axes"], ["y"], name="reduce", keepdims=1),
    ]
    graph = helper.make_graph(
        nodes, "matmul_mix", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(shape, "shape"),
         numpy_helper.from_array(axes, "axes")])
    save("matmul_mix", graph, x, y)


def unsupported_op():
    graph = helper.make_graph(
        [helper.make_node("RandomUniformLike", ["x"], ["y"], name="the_random")], "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    save("unsupported_op", graph, None, None)


def external_data():
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key = "location"
    entry.value = "../../../../etc/passwd"
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with open(os.path.join(HERE, "external_data.onnx"), "wb") as f:
        f.write(model.SerializeToString())


def mlp_dynamic():
    """An MLP with a symbolic batch ("batch"), as PyTorch's dynamic_axes
    exports it; x holds 7 rows, and rows are independent, so y's first r
    rows are the output for x's first r."""
    r = np.random.default_rng(11)
    x = r.standard_normal((7, 16)).astype(np.float32)
    w1 = (r.standard_normal((16, 32)) * 0.3).astype(np.float32)
    b1 = (r.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (r.standard_normal((32, 5)) * 0.3).astype(np.float32)
    b2 = (r.standard_normal(5) * 0.1).astype(np.float32)
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    z = h @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
         helper.make_node("Add", ["m1", "b1"], ["a1"]),
         helper.make_node("Relu", ["a1"], ["h"]),
         helper.make_node("MatMul", ["h", "w2"], ["m2"]),
         helper.make_node("Add", ["m2", "b2"], ["z"]),
         helper.make_node("Softmax", ["z"], ["y"], axis=1)],
        "mlp_dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], inits)
    save("mlp_dynamic", graph, x, y)


def reshape_by_input():
    """relu(Reshape(x, shape)) with `shape` a model input: its value decides
    the output's shape, so Kiln compiles the model per value."""
    x = np.random.default_rng(11).standard_normal((2, 3, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Relu", ["r"], ["y"])],
        "reshape_by_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, ["rank"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["d0", "d1"])])
    save("reshape_by_input", graph, x, np.maximum(x, 0))


def conv1d():
    """Two 1-D convolutions (stride 2 with pads, then dilation 2 with groups)
    and a ReLU, as an audio front end has; NumPy's answer by direct sums."""
    x = rng.standard_normal((2, 4, 19)).astype(np.float32)
    w1 = (rng.standard_normal((6, 4, 5)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(6) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((6, 3, 3)) * 0.3).astype(np.float32)  # groups = 2

    def conv(x, w, b, stride, pads, dilation, groups):
        n, c, length = x.shape
        o, cg, k = w.shape
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[1])))
        out_len = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
        out = np.zeros((n, o, out_len))
        og = o // groups
        for oc in range(o):
            g = oc // og
            for t in range(out_len):
                window = xp[:, g * cg:(g + 1) * cg, t * stride:t * stride + dilation * (k - 1) + 1:dilation]
                out[:, oc, t] = np.einsum("nck,ck->n", window, w[oc])
        return out + (b[None, :, None] if b is not None else 0)

    h = conv(x, w1, b1, 2, (2, 1), 1, 1)
    y = np.maximum(conv(h, w2, None, 1, (2, 2), 2, 2), 0)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], name="conv_a", strides=[2],
                          pads=[2, 1]),
         helper.make_node("Conv", ["h", "w2"], ["c"], name="conv_b", dilations=[2],
                          pads=[2, 2], group=2),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "conv1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    save("conv1d", graph, x, y)


if __name__ == "__main__":
    small_cnn()
    matmul_mix()
    unsupported_op()
    external_data()
    mlp_dynamic()
    reshape_by_input()
    conv1d()
