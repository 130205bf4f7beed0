#!/usr/bin/python3
"""Writes one-pool ONNX models and NumPy's outputs for them, for pool_numerics_test.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Each case is
pool_NAME.onnx with input x (pool_NAME_x.npy) and output y (pool_NAME_y.npy),
y computed here in float64 from the padded input, window by window, as ONNX
defines MaxPool and AveragePool (ceil_mode drops a last window that would
start in the end padding, as ONNX Runtime and PyTorch do).
"""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(29)


def out_extent(n, k, s, d, lo, hi, ceil_mode):
    span = n + lo + hi - (d * (k - 1) + 1)
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + lo:
        out -= 1
    return out


def reference(x, op, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
    n, c, h, w = x.shape
    oh = out_extent(h, kernel[0], strides[0], dilations[0], pads[0], pads[2], ceil_mode)
    ow = out_extent(w, kernel[1], strides[1], dilations[1], pads[1], pads[3], ceil_mode)
    # Room for ceil_mode's last windows past the end padding.
    extra_h = (oh - 1) * strides[0] + dilations[0] * (kernel[0] - 1) + 1
    extra_w = (ow - 1) * strides[1] + dilations[1] * (kernel[1] - 1) + 1
    big_h, big_w = max(extra_h, h + pads[0] + pads[2]), max(extra_w, w + pads[1] + pads[3])
    data = np.zeros((n, c, big_h, big_w))
    data[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    inside = np.zeros((big_h, big_w), bool)  # a real input element
    inside[pads[0]:pads[0] + h, pads[1]:pads[1] + w] = True
    padded = np.zeros((big_h, big_w), bool)  # inside the padded input
    padded[:h + pads[0] + pads[2], :w + pads[1] + pads[3]] = True
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = i * strides[0] + dilations[0] * np.arange(kernel[0])
            cols = j * strides[1] + dilations[1] * np.arange(kernel[1])
            win = data[:, :, rows[:, None], cols[None, :]]
            real = inside[rows[:, None], cols[None, :]]
            if op == "MaxPool":
                y[:, :, i, j] = np.where(real, win, -np.inf).max(axis=(2, 3))
            else:
                count = (padded if count_include_pad else inside)[rows[:, None], cols[None, :]].sum()
                y[:, :, i, j] = np.where(real, win, 0).sum(axis=(2, 3)) / count
    return y


def case(name, op, shape, kernel, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
         ceil_mode=0, count_include_pad=0):
    x = rng.standard_normal(shape).astype(np.float32)
    y = reference(x.astype(np.float64), op, kernel, strides, pads, dilations, ceil_mode,
                  count_include_pad).astype(np.float32)
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads),
                 ceil_mode=ceil_mode)
    if op == "MaxPool":
        attrs["dilations"] = list(dilations)
    else:
        attrs["count_include_pad"] = count_include_pad
        assert dilations == (1, 1)  # AveragePool's dilations need opset 19
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    base = os.path.join(HERE, "pool_" + name)
    onnx.save(model, base + ".onnx")
    np.save(base + "_x.npy", x)
    np.save(base + "_y.npy", y)


def main():
    # Stride 1 keeping the row width: every pass flat over the plane.
    case("max3_p1_14x14", "MaxPool", (1, 5, 14, 14), (3, 3), pads=(1, 1, 1, 1))
    case("max3_p1_7x7", "MaxPool", (1, 6, 7, 7), (3, 3), pads=(1, 1, 1, 1))
    case("max3_p1_13x11_b2", "MaxPool", (2, 3, 13, 11), (3, 3), pads=(1, 1, 1, 1))
    case("max3_p1_ceil_13x11", "MaxPool", (1, 4, 13, 11), (3, 3), pads=(1, 1, 1, 1),
         ceil_mode=1)
    case("max1x5_p2_1x37", "MaxPool", (1, 3, 1, 37), (1, 5), pads=(0, 2, 0, 2))
    case("max3_d2_p2_15x17", "MaxPool", (1, 3, 15, 17), (3, 3), pads=(2, 2, 2, 2),
         dilations=(2, 2))
    case("max2_p01_9x10", "MaxPool", (1, 3, 9, 10), (2, 2), pads=(0, 0, 1, 1))
    case("max5_p2_12x12", "MaxPool", (1, 2, 12, 12), (5, 5), pads=(2, 2, 2, 2))
    case("max3_p1_3x40", "MaxPool", (1, 2, 3, 40), (3, 3), pads=(1, 1, 1, 1))
    case("avg3_p1_13x11", "AveragePool", (1, 4, 13, 11), (3, 3), pads=(1, 1, 1, 1))
    case("avg3_p1_incl_13x11", "AveragePool", (1, 4, 13, 11), (3, 3), pads=(1, 1, 1, 1),
         count_include_pad=1)
    case("avg3_p1_14x14", "AveragePool", (2, 3, 14, 14), (3, 3), pads=(1, 1, 1, 1))
    # Stride 1 narrowing the row, and stride 2: max pools' column pass row by
    # row unless W == 2 * OW (28x28 ceil), average pools row by row.
    case("max3_p0_13x11", "MaxPool", (1, 3, 13, 11), (3, 3))
    case("max3_s2_ceil_28x28", "MaxPool", (1, 4, 28, 28), (3, 3), strides=(2, 2), ceil_mode=1)
    case("max3_s2_p1_25x23", "MaxPool", (1, 3, 25, 23), (3, 3), strides=(2, 2),
         pads=(1, 1, 1, 1))
    case("max2_s2_ceil_7x7", "MaxPool", (1, 3, 7, 7), (2, 2), strides=(2, 2), ceil_mode=1)
    case("avg3_s2_p1_incl_ceil_14x13", "AveragePool", (1, 3, 14, 13), (3, 3), strides=(2, 2),
         pads=(1, 1, 1, 1), ceil_mode=1, count_include_pad=1)


if __name__ == "__main__":
    main()
