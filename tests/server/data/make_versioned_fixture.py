#!/usr/bin/python3
"""Writes the model-version tests' models: add_version_V.onnx computes y = x + V.

One ONNX model per version V in 1..4, x and y float32[2,3], so the answer to a
request tells which version ran. Run with Debian's python3, which has onnx:
    /usr/bin/python3 tests/server/data/make_versioned_fixture.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def model(version):
    offset = numpy_helper.from_array(np.full((2, 3), version, dtype=np.float32), "offset")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "offset"], ["y"], name="add_version")],
        f"add_version_{version}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[offset],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    for version in range(1, 5):
        onnx.save(model(version), os.path.join(HERE, f"add_version_{version}.onnx"))


if __name__ == "__main__":
    main()
