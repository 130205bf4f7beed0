"""Writes ONNX node-test cases (model.onnx, test_data_set_0/*.pb) for the ops
whose output shape depends on values, expected outputs from NumPy
(np.nonzero, np.compress, np.unique): zero-size results, a NaN, a folded
constant, results that feed other ops, and a request of zero rows.
Usage: value_shape_cases.py OUT_DIR."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(21)
ELEM = {np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float32): TensorProto.FLOAT,
        np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32}


def info(name, array):
    return helper.make_tensor_value_info(name, ELEM[array.dtype], array.shape)


def write(out_dir, case, nodes, inputs, outputs, initializers=(), opset=13):
    """inputs/outputs: [(name, array)]; the model declares their shapes."""
    graph = helper.make_graph(nodes, case, [info(n, a) for n, a in inputs],
                              [info(n, a) for n, a in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    data = os.path.join(out_dir, case, "test_data_set_0")
    os.makedirs(data)
    onnx.save(model, os.path.join(out_dir, case, "model.onnx"))
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for i, (name, array) in enumerate(arrays):
            with open(os.path.join(data, "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(numpy_helper.from_array(array, name).SerializeToString())


def nonzero(x):
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


def main(out_dir):
    def one(case, x):
        write(out_dir, case, [helper.make_node("NonZero", ["x"], ["y"])], [("x", x)],
              [("y", nonzero(x))])

    one("nonzero_bool_2d", RNG.random((3, 4)) < 0.5)
    one("nonzero_bool_all_false", np.zeros((2, 3), dtype=np.bool_))
    one("nonzero_int64_1d", np.array([0, 7, 0, -3, 0, 0, 1], dtype=np.int64))
    one("nonzero_int32_all_zero", np.zeros((4, 2), dtype=np.int32))
    f = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    f[f < 0] = 0
    f[0, 1, 1] = np.nan  # nonzero, as NumPy counts it
    f[1, 0, 0] = -0.0    # zero
    one("nonzero_float_3d_nan", f)

    # A comparison's positions feeding a transpose and a reduction over the
    # count: the dims after NonZero must be exact, not an upper bound.
    x = RNG.random((4, 4)).astype(np.float32)
    half = np.array(0.5, dtype=np.float32)
    axes = np.array([1], dtype=np.int64)
    positions = nonzero(x > half)
    write(out_dir, "nonzero_feeds_transpose_and_sum",
          [helper.make_node("Greater", ["x", "half"], ["mask"]),
           helper.make_node("NonZero", ["mask"], ["p"]),
           helper.make_node("Transpose", ["p"], ["pt"], perm=[1, 0]),
           helper.make_node("ReduceSum", ["p", "axes"], ["total"], keepdims=0)],
          [("x", x)], [("pt", positions.T.copy()), ("total", positions.sum(axis=1))],
          [numpy_helper.from_array(half, "half"), numpy_helper.from_array(axes, "axes")])

    # NonZero of a constant folds at compile time; the result meets a
    # run-time input of its (value-given) shape.
    c = np.array([[0, 2, 0], [1, 0, 0], [0, 0, 5]], dtype=np.float32)
    y = RNG.integers(-9, 9, size=nonzero(c).shape).astype(np.int64)
    write(out_dir, "nonzero_of_constant_plus_input",
          [helper.make_node("NonZero", ["c"], ["p"]), helper.make_node("Add", ["p", "y"], ["s"])],
          [("y", y)], [("s", nonzero(c) + y)], [numpy_helper.from_array(c, "c")])

    def compress(case, data, condition, axis):
        kwargs = {} if axis is None else {"axis": axis}
        write(out_dir, case, [helper.make_node("Compress", ["data", "condition"], ["y"], **kwargs)],
              [("data", data), ("condition", condition)],
              [("y", np.compress(condition, data, axis=axis))], opset=11)

    data = RNG.standard_normal((4, 3)).astype(np.float32)
    compress("compress_axis0", data, np.array([True, False, True, True]), 0)
    compress("compress_axis1_short_condition", data, np.array([False, True]), 1)
    compress("compress_flattened", data, RNG.random(12) < 0.4, None)
    compress("compress_all_false", data, np.zeros(4, dtype=np.bool_), 0)

    # Compress's rows feeding a MatMul: the data is a run-time input, only
    # the condition decides the shape.
    w = RNG.standard_normal((3, 2)).astype(np.float32)
    condition = np.array([False, True, True, False, True])
    data = RNG.standard_normal((5, 3)).astype(np.float32)
    write(out_dir, "compress_feeds_matmul",
          [helper.make_node("Compress", ["data", "condition"], ["rows"], axis=0),
           helper.make_node("MatMul", ["rows", "w"], ["y"])],
          [("data", data), ("condition", condition)],
          [("y", np.compress(condition, data, axis=0) @ w)], [numpy_helper.from_array(w, "w")])

    def unique(x, axis, sorted_):
        """ONNX Unique's four outputs from np.unique (sorted), reordered by
        first occurrence when not sorted."""
        y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis)
        inverse = inverse.reshape(-1)
        if not sorted_:
            order = np.argsort(first, kind="stable")
            place = np.empty_like(order)
            place[order] = np.arange(len(order))
            y = np.take(y, order, axis=0 if axis is None else axis)
            first, counts, inverse = first[order], counts[order], place[inverse]
        return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]

    def unique_case(case, x, axis, sorted_):
        kwargs = {"sorted": int(sorted_)}
        if axis is not None:
            kwargs["axis"] = axis
        names = ["y", "first", "inverse", "counts"]
        write(out_dir, case, [helper.make_node("Unique", ["x"], names, **kwargs)], [("x", x)],
              list(zip(names, unique(x, axis, sorted_))), opset=11)

    u = RNG.integers(0, 4, size=(5, 3)).astype(np.float32)
    u[3] = u[1]
    unique_case("unique_flat_sorted", u, None, True)
    unique_case("unique_flat_first_seen", u, None, False)
    unique_case("unique_rows_sorted", u, 0, True)
    unique_case("unique_rows_first_seen", u, 0, False)
    unique_case("unique_int64_columns", RNG.integers(-2, 2, size=(2, 6)).astype(np.int64), 1,
                True)

    # Unique's values and counts feeding other ops: a weighted sum of the
    # distinct values, and each element's count looked up by its inverse.
    x = np.array([3, 1, 3, 2, 1, 3], dtype=np.float32)
    y, _, inverse, counts = unique(x, None, True)
    write(out_dir, "unique_feeds_mul_and_gather",
          [helper.make_node("Unique", ["x"], ["y", "", "inverse", "counts"]),
           helper.make_node("Cast", ["counts"], ["c"], to=TensorProto.FLOAT),
           helper.make_node("Mul", ["y", "c"], ["weighted"]),
           helper.make_node("Gather", ["counts", "inverse"], ["per_element"])],
          [("x", x)], [("weighted", y * counts.astype(np.float32)),
                       ("per_element", counts[inverse])], opset=11)

    # A request of zero rows: the elementwise result is empty, the sum over
    # the empty rows is zeros (a reduction over nothing).
    x = np.zeros((0, 3), dtype=np.float32)
    write(out_dir, "empty_rows_relu_and_sum",
          [helper.make_node("Relu", ["x"], ["y"]),
           helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)],
          [("x", x)], [("y", np.maximum(x, 0)), ("s", x.sum(axis=0))],
          [numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")])


if __name__ == "__main__":
    main(sys.argv[1])
