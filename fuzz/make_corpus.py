#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/.

A handful of small valid inputs per target (and a few near misses), each well
under a few KB, so that libFuzzer starts from inputs that reach deep into the
code rather than from the first checks. Protobuf seeds are written in text
format and encoded with Debian's protoc; ONNX seeds with onnx's own helpers
(plus the small models tests/compiler/frontend/data already has); .npy seeds
with NumPy. Run from anywhere with Debian's python (it has numpy and onnx):
    /usr/bin/python3 fuzz/make_corpus.py
Deterministic: running it again rewrites the same bytes.
"""
import glob
import hashlib
import io
import os
import shutil
import struct
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper

FUZZ = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FUZZ)
CORPUS = os.path.join(FUZZ, "corpus")


def write(target, name, data):
    path = os.path.join(CORPUS, target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def encode(proto_file, message, text):
    """Protobuf text format -> wire bytes, with the system protoc."""
    return subprocess.run(
        ["/usr/bin/protoc", "-I" + os.path.join(ROOT, "proto"), "--encode=" + message,
         os.path.join(ROOT, "proto", proto_file)],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def raw_f32(values):
    return "".join("\\%03o" % b for b in np.asarray(values, "<f4").tobytes())


def raw_i64(values):
    return "".join("\\%03o" % b for b in np.asarray(values, "<i8").tobytes())


# --- Kiln graphs (kiln.v1.Graph) ---------------------------------------------

KILN_GRAPHS = {
    "relu_transpose": '''
        name: "t" inputs { name: "x" dtype: FLOAT32 dims: 2 dims: 3 }
        nodes { name: "r" op: "relu" inputs: "x" }
        nodes { name: "t" op: "transpose" inputs: "r"
                attributes { key: "perm" value { ints { values: 1 values: 0 } } } }
        outputs: "t"''',
    "dense_softmax": '''
        name: "mlp" inputs { name: "x" dtype: FLOAT32 dims: 2 dims: 4 }
        constants { name: "w" dtype: FLOAT32 dims: 3 dims: 4 raw_data: "%s" }
        constants { name: "b" dtype: FLOAT32 dims: 3 raw_data: "%s" }
        nodes { name: "fc" op: "dense" inputs: "x" inputs: "w" inputs: "b" }
        nodes { name: "p" op: "softmax" inputs: "fc" attributes { key: "axis" value { i: -1 } } }
        outputs: "p"''' % (raw_f32(np.arange(12) / 10), raw_f32([0.1, 0.2, 0.3])),
    "conv_pool": '''
        name: "cnn" inputs { name: "x" dtype: FLOAT32 dims: 1 dims: 2 dims: 5 dims: 5 }
        constants { name: "w" dtype: FLOAT32 dims: 2 dims: 2 dims: 3 dims: 3 raw_data: "%s" }
        nodes { name: "c" op: "conv2d" inputs: "x" inputs: "w"
                attributes { key: "strides" value { ints { values: 1 values: 1 } } }
                attributes { key: "padding"
                             value { ints { values: 1 values: 1 values: 1 values: 1 } } } }
        nodes { name: "p" op: "max_pool2d" inputs: "c"
                attributes { key: "kernel" value { ints { values: 2 values: 2 } } }
                attributes { key: "strides" value { ints { values: 2 values: 2 } } } }
        nodes { name: "m" op: "mean" inputs: "p"
                attributes { key: "axes" value { ints { values: 2 values: 3 } } } }
        outputs: "m"''' % raw_f32(np.linspace(-1, 1, 36)),
    "symbolic_batch_reshape": '''
        name: "sym"
        inputs { name: "x" dtype: FLOAT32 dims: -1 dims: 6 dim_params: "batch" dim_params: "" }
        nodes { name: "r" op: "reshape" inputs: "x"
                attributes { key: "shape" value { ints { values: -1 values: 2 values: 3 } } } }
        nodes { name: "s" op: "sigmoid" inputs: "r" }
        outputs: "s"''',
    "broadcast_where": '''
        name: "w" inputs { name: "a" dtype: FLOAT32 dims: 2 dims: 3 }
        inputs { name: "b" dtype: FLOAT32 dims: 3 }
        constants { name: "i" dtype: INT64 dims: 2 raw_data: "%s" }
        nodes { name: "g" op: "greater" inputs: "a" inputs: "b" }
        nodes { name: "w" op: "where" inputs: "g" inputs: "a" inputs: "b" }
        nodes { name: "t" op: "gather" inputs: "w" inputs: "i"
                attributes { key: "axis" value { i: 1 } } }
        nodes { name: "c" op: "clip" inputs: "t"
                attributes { key: "min" value { f: -1 } } attributes { key: "max" value { f: 1 } } }
        outputs: "c"''' % raw_i64([0, 2]),
    "unknown_op": '''
        name: "u" inputs { name: "x" dtype: FLOAT32 dims: 2 }
        nodes { name: "m" op: "frobnicate" inputs: "x" }
        outputs: "m"''',
}


def kiln_graphs():
    for name, text in KILN_GRAPHS.items():
        write("kiln_graph_importer_fuzzer", name + ".pb",
              encode("graph.proto", "kiln.v1.Graph", text))


# --- ONNX models ------------------------------------------------------------

def value(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def const(name, array):
    return helper.make_tensor(name, TensorProto.FLOAT if array.dtype == np.float32
                              else TensorProto.INT64, array.shape, array.flatten().tolist())


def onnx_models():
    f32 = np.float32
    ms = {
        "gemm_relu": model(
            [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["y"])],
            [value("x", ["batch", 4])], [value("y", ["batch", 3])],
            [const("w", np.ones((3, 4), f32)), const("b", np.zeros(3, f32))]),
        "conv_bn_pool": model(
            [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"]),
             helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])],
            [value("x", [1, 2, 4, 4])], [value("y", [1, 2, 1, 1])],
            [const("w", np.ones((2, 2, 3, 3), f32)), const("s", np.ones(2, f32)),
             const("o", np.zeros(2, f32)), const("m", np.zeros(2, f32)),
             const("v", np.ones(2, f32))]),
        "reshape_transpose_softmax": model(
            [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
            [value("x", [2, 6])], [value("y", [2, 3, 2])],
            [const("shape", np.array([2, 2, 3], np.int64))]),
        "slice_concat_gather": model(
            [helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"]),
             helper.make_node("Concat", ["s", "s"], ["c"], axis=1),
             helper.make_node("Gather", ["c", "idx"], ["y"], axis=1)],
            [value("x", [2, 5])], [value("y", [2, 2])],
            [const("st", np.array([1], np.int64)), const("en", np.array([4], np.int64)),
             const("ax", np.array([1], np.int64)), const("idx", np.array([0, 5], np.int64))]),
        "layernorm_reduce_clip": model(
            [helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], axis=-1),
             helper.make_node("ReduceMean", ["l"], ["r"], axes=[1], keepdims=1),
             helper.make_node("Clip", ["r", "lo", "hi"], ["y"])],
            [value("x", [2, 4])], [value("y", [2, 1])],
            [const("g", np.ones(4, f32)), const("b", np.zeros(4, f32)),
             const("lo", np.array(-1, f32)), const("hi", np.array(1, f32))], opset=17),
        "shape_constantofshape_cast": model(
            [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Add", ["x", "z"], ["a"]),
             helper.make_node("Cast", ["a"], ["y"], to=TensorProto.INT64)],
            [value("x", ["n", 3])], [value("y", ["n", 3], TensorProto.INT64)]),
        "squeeze_split_pad": model(
            [helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax"], ["q"]),
             helper.make_node("Split", ["q"], ["a", "b"], axis=1),
             helper.make_node("Pad", ["a", "pads"], ["y"])],
            [value("x", [2, 4])], [value("y", [2, 4]), value("b", [2, 2])],
            [const("ax", np.array([0], np.int64)),
             const("pads", np.array([0, 1, 0, 1], np.int64))]),
    }
    for name, data in ms.items():
        write("onnx_importer_fuzzer", name + ".onnx", data)
    # The importer tests' models: a symbolic MLP, a CNN, an input that decides
    # a Reshape's shape, external data, an unsupported op.
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/compiler/frontend/data/*.onnx"))):
        if os.path.getsize(path) <= 8192:
            shutil.copy(path, os.path.join(CORPUS, "onnx_importer_fuzzer", os.path.basename(path)))


# --- ModelInferRequest --------------------------------------------------------

INFER_REQUESTS = {
    # The static model: x float32[2,3], ids int64[4], mask bool[2,2].
    "static_raw": '''
        model_name: "static"
        inputs { name: "x" datatype: "FP32" shape: 2 shape: 3 }
        inputs { name: "ids" datatype: "INT64" shape: 4 }
        inputs { name: "mask" datatype: "BOOL" shape: 2 shape: 2 }
        raw_input_contents: "%s" raw_input_contents: "%s" raw_input_contents: "\\001\\000\\000\\001"
        ''' % (raw_f32(np.arange(6)), raw_i64([3, 1, 4, 1])),
    "static_contents_profile": '''
        model_name: "static" id: "r1"
        parameters { key: "kiln.profile" value { bool_param: true } }
        inputs { name: "x" datatype: "FP32" shape: 2 shape: 3
                 contents { fp32_contents: [1, 2, 3, 4, 5, 6] } }
        inputs { name: "ids" datatype: "INT64" shape: 4 contents { int64_contents: [0, 1, 2, 3] } }
        inputs { name: "mask" datatype: "BOOL" shape: 2 shape: 2
                 contents { bool_contents: [true, false, false, true] } }
        outputs { name: "y" }''',
    # The symbolic model: x float32[batch,3] and `shape` int64[2] deciding shapes.
    "symbolic_raw": '''
        model_name: "symbolic"
        inputs { name: "x" datatype: "FP32" shape: 2 shape: 3 }
        inputs { name: "shape" datatype: "INT64" shape: 2 }
        raw_input_contents: "%s" raw_input_contents: "%s"''' % (
            raw_f32(np.arange(6)), raw_i64([3, 2])),
    "symbolic_contents": '''
        model_name: "symbolic"
        inputs { name: "x" datatype: "FP32" shape: 1 shape: 3
                 contents { fp32_contents: [1, 2, 3] } }
        inputs { name: "shape" datatype: "INT64" shape: 2 contents { int64_contents: [1, 3] } }''',
    "wrong_datatype": '''
        model_name: "static"
        inputs { name: "x" datatype: "INT64" shape: 2 shape: 3 }''',
}


def infer_requests():
    for name, text in INFER_REQUESTS.items():
        write("infer_request_fuzzer", name + ".pb",
              encode("grpc_service.proto", "inference.ModelInferRequest", text))


# --- .npy files -----------------------------------------------------------------

def npy_files():
    def save(name, array, version=None):
        buf = io.BytesIO()
        if version is None:
            np.save(buf, array)
        else:
            np.lib.format.write_array(buf, array, version=version)
        write("npy_fuzzer", name + ".npy", buf.getvalue())

    save("f32_2x3", np.arange(6, dtype=np.float32).reshape(2, 3))
    save("i64_4", np.array([1, -2, 3, 1 << 40], dtype=np.int64))
    save("f32_scalar", np.array(1.5, dtype=np.float32))
    save("f32_empty", np.zeros((0, 3), dtype=np.float32))
    save("f32_v2", np.ones((2, 2), dtype=np.float32), version=(2, 0))
    save("i64_v3", np.arange(3, dtype=np.int64), version=(3, 0))
    save("f32_fortran", np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
    save("f64_rejected", np.arange(3, dtype=np.float64))


# --- Disk cache entries -----------------------------------------------------------
# The fuzz target appends the SHA-256 itself: these are entry bodies (the file
# without its last 32 bytes). Layout in engine/disk_cache.cc.

def disk_entry_body(ops, obj, key_seed):
    def s(text):
        data = text.encode()
        return struct.pack("<I", len(data)) + data
    body = b"KILNKRN\0" + struct.pack("<I", 1)
    body += hashlib.sha256(key_seed.encode()).hexdigest().encode()
    for field in ["x86_64-pc-linux-gnu", "canonical(%s)" % ",".join(ops), "skylake",
                  "+avx2,+fma", "16.0.6", "kiln 0.1", "opt_level=2", "fused_" + "_".join(ops)]:
        body += s(field)
    body += struct.pack("<I", len(ops)) + b"".join(s(op) for op in ops)
    body += struct.pack("<d", 1.25) + struct.pack("<q", 1764000000)
    body += struct.pack("<Q", len(obj)) + obj
    return body


def disk_entries():
    elf_header = b"\x7fELF\x02\x01\x01" + bytes(57)
    write("disk_cache_entry_fuzzer", "dense_relu.body",
          disk_entry_body(["dense", "relu"], elf_header + bytes(range(64)), "a"))
    write("disk_cache_entry_fuzzer", "no_ops_empty_object.body", disk_entry_body([], b"", "b"))
    write("disk_cache_entry_fuzzer", "conv_add_relu.body",
          disk_entry_body(["conv2d", "add", "relu"], elf_header, "c"))


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    kiln_graphs()
    onnx_models()
    infer_requests()
    npy_files()
    disk_entries()
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        print("%s: %d seeds" % (target, len(files)))


if __name__ == "__main__":
    main()
