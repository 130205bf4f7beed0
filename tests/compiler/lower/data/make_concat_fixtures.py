#!/usr/bin/python3
"""Writes inception-like ONNX models (branches joined by a Concat) and NumPy's
outputs for them, for concat_in_place_test.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Each case is
concat_NAME.onnx with input x (concat_NAME_x.npy) and outputs y, z
(concat_NAME_y.npy, concat_NAME_z.npy), computed here in float64:
  a = Relu(Conv1x1(x))            b = Relu(Conv3x3 pad 1(x))
  c = Conv1x1(MaxPool 3x3 s1 p1(x)) d = AveragePool 3x3 s1 p1(x) (pads not counted)
  (a, b and c have 5, 3 and 4 channels, or the case's widths)
  y = Relu(Conv1x1(Concat(a, b, c, d, axis=1)))
  z = a * 2 + 1                   (a is read by a kernel besides the Concat)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(31)


def conv(x, w, bias, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y + bias[None, :, None, None]


def max_pool3(x):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.max([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=0)


def avg_pool3(x):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones((h, w)), 1)
    total = np.sum([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=0)
    count = np.sum([ones[i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=0)
    return total / count


def relu(v):
    return np.maximum(v, 0)


def case(name, shape, widths=(5, 3, 4)):
    c = shape[1]
    na, nb, nc = widths
    x = rng.standard_normal(shape).astype(np.float32)
    params = {
        "wa": rng.standard_normal((na, c, 1, 1)), "ba": rng.standard_normal(na),
        "wb": rng.standard_normal((nb, c, 3, 3)) * 0.3, "bb": rng.standard_normal(nb),
        "wc": rng.standard_normal((nc, c, 1, 1)), "bc": rng.standard_normal(nc),
        "wy": rng.standard_normal((6, na + nb + nc + c, 1, 1)) * 0.3, "by": rng.standard_normal(6),
    }
    params = {k: v.astype(np.float32) for k, v in params.items()}
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x64 = x.astype(np.float64)
    a = relu(conv(x64, p["wa"], p["ba"], 0))
    b = relu(conv(x64, p["wb"], p["bb"], 1))
    cc = conv(max_pool3(x64), p["wc"], p["bc"], 0)
    d = avg_pool3(x64)
    y = relu(conv(np.concatenate([a, b, cc, d], axis=1), p["wy"], p["by"], 0))
    z = a * 2 + 1
    consts = [numpy_helper.from_array(v, k) for k, v in params.items()]
    consts += [numpy_helper.from_array(np.array(2, np.float32), "two"),
               numpy_helper.from_array(np.array(1, np.float32), "one")]
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["a0"]),
        helper.make_node("Relu", ["a0"], ["a"]),
        helper.make_node("Conv", ["x", "wb", "bb"], ["b0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b0"], ["b"]),
        helper.make_node("MaxPool", ["x"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c0", "wc", "bc"], ["c"]),
        helper.make_node("AveragePool", ["x"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b", "c", "d"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "wy", "by"], ["y0"]),
        helper.make_node("Relu", ["y0"], ["y"]),
        helper.make_node("Mul", ["a", "two"], ["a2"]),
        helper.make_node("Add", ["a2", "one"], ["z"]),
    ]
    h, w = shape[2], shape[3]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 6, h, w]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [shape[0], na, h, w])], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    base = os.path.join(HERE, "concat_" + name)
    onnx.save(model, base + ".onnx")
    np.save(base + "_x.npy", x)
    np.save(base + "_y.npy", y.astype(np.float32))
    np.save(base + "_z.npy", z.astype(np.float32))


def main():
    case("b1_9x9", (1, 4, 9, 9))
    case("b2_7x6", (2, 3, 7, 6))  # batch 2: strided slices, the Concat stays a kernel
    # Branches of whole 16-channel blocks (the last piece, x's 20, need not be):
    # ConvertLayoutNchwc keeps the block blocked, the Concat a concat of blocks.
    case("b1_blocked", (1, 20, 9, 9), widths=(16, 32, 16))


if __name__ == "__main__":
    main()
