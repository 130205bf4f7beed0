#!/usr/bin/python3
"""ONNX test cases that ONNX 1.12's node tests lack, in their layout, with
ONNX's own reference implementation as the expected data.

    /usr/bin/python3 tests/client/extra_onnx_cases.py OUT_DIR

Resize's tf_crop_and_resize with a region of interest reaching outside the
input (those positions take extrapolation_value), in every mode, with sizes
and with scales; ONNX 1.12 has one case, whose region lies inside.
ConvTranspose in 3-D with strides, pads, dilations, output padding, groups
and bias (ONNX 1.12 has one case, all defaults), PyTorch's
conv_transpose3d as the reference.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.case.node import resize as reference


def write_case(out_dir, name, model, x, want):
    onnx.checker.check_model(model)
    data = os.path.join(out_dir, name, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(out_dir, name, "model.onnx"))
    for kind, value in (("input_0", x), ("output_0", want)):
        with open(os.path.join(data, kind + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(value).SerializeToString())


def crop_and_resize_cases(out_dir):
    x = np.random.default_rng(7).standard_normal((1, 2, 5, 6)).astype(np.float32)
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 1.25, 0.9], dtype=np.float32)
    coeffs = {"nearest": reference.nearest_coeffs, "linear": reference.linear_coeffs,
              "cubic": reference.cubic_coeffs}
    for mode, get_coeffs in coeffs.items():
        for how, operand, extrapolation in (
                ("sizes", np.array([1, 2, 7, 4], np.int64), 10.0),
                ("scales", np.array([1, 1, 1.6, 0.5], np.float32), -3.5)):
            name = f"test_resize_tf_crop_and_resize_{mode}_{how}_outside"
            inputs = ["x", "roi", "", "operand"] if how == "sizes" else ["x", "roi", "operand"]
            node = helper.make_node("Resize", inputs, ["y"], mode=mode,
                                    coordinate_transformation_mode="tf_crop_and_resize",
                                    extrapolation_value=extrapolation)
            size = {"output_size": list(operand)} if how == "sizes" else {
                "scale_factors": list(operand)}
            want = reference.interpolate_nd(
                x, get_coeffs, roi=roi, extrapolation_value=extrapolation,
                coordinate_transformation_mode="tf_crop_and_resize", **size).astype(np.float32)
            graph = helper.make_graph(
                [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape)],
                [numpy_helper.from_array(roi, "roi"), numpy_helper.from_array(operand, "operand")])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
            write_case(out_dir, name, model, x, want)


def conv_transpose_3d_cases(out_dir):
    import torch
    rng = np.random.default_rng(11)
    cases = {  # name: (group, strides, pads (symmetric), dilations, output_padding, bias)
        "strided_padded_bias": (1, (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 0, 1), True),
        "grouped_dilated": (2, (1, 2, 1), (0, 1, 0), (2, 1, 1), (0, 1, 0), False),
    }
    for suffix, (group, strides, pads, dilations, extra, with_bias) in cases.items():
        name = f"test_convtranspose_3d_{suffix}"
        x = rng.standard_normal((2, 4, 3, 4, 5)).astype(np.float32)
        w = rng.standard_normal((4, 6 // group, 3, 2, 3)).astype(np.float32)
        b = rng.standard_normal(6).astype(np.float32)
        want = torch.nn.functional.conv_transpose3d(
            torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b) if with_bias else None,
            stride=strides, padding=pads, output_padding=extra, groups=group,
            dilation=dilations).numpy()
        inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")]
                                                     if with_bias else [])
        node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if with_bias else []), ["y"],
                                strides=list(strides), pads=list(pads) * 2,
                                dilations=list(dilations), output_padding=list(extra),
                                group=group)
        graph = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        write_case(out_dir, name, model, x, want)


if __name__ == "__main__":
    crop_and_resize_cases(sys.argv[1])
    conv_transpose_3d_cases(sys.argv[1])
