"""The Python client against a real kiln-server (address in $KILN_SERVER).

Models are ONNX graphs built here with Debian's python3-onnx; every answer is
compared with NumPy computing the same function.
"""

import os
import unittest

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln import tensors
from kiln._proto import kiln_service_pb2

ADDR = os.environ["KILN_SERVER"]

_ONNX_TYPE = {
    "BOOL": TensorProto.BOOL,
    "UINT8": TensorProto.UINT8,
    "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32,
    "UINT64": TensorProto.UINT64,
    "INT8": TensorProto.INT8,
    "INT16": TensorProto.INT16,
    "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64,
    "FP16": TensorProto.FLOAT16,
    "FP32": TensorProto.FLOAT,
    "FP64": TensorProto.DOUBLE,
    "BF16": TensorProto.BFLOAT16,
}


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _dense_relu(w, b):
    """y = relu(x @ w + b) for x of shape (4, 16)."""
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        [("x", TensorProto.FLOAT, [4, 16])], [("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])


def _binary(op, datatype):
    t = _ONNX_TYPE[datatype]
    return _model([helper.make_node(op, ["a", "b"], ["y"])],
                  [("a", t, [2, 3]), ("b", t, [2, 3])], [("y", t, [2, 3])])


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = kiln.Client(ADDR, timeout=120)
        cls.rng = np.random.default_rng(22)
        cls.w = cls.rng.standard_normal((16, 8)).astype(np.float32)
        cls.b = cls.rng.standard_normal(8).astype(np.float32)
        cls.client.compile(_dense_relu(cls.w, cls.b), "dense", opt_level=2)

    def reference(self, x):
        return np.maximum(x @ self.w + self.b, 0)

    def test_infer_matches_numpy(self):
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        y = self.client.infer("dense", {"x": x})
        self.assertEqual(list(y), ["y"])
        self.assertEqual(y["y"].dtype, np.float32)
        self.assertEqual(y["y"].shape, (4, 8))
        np.testing.assert_allclose(y["y"], self.reference(x), rtol=1e-5, atol=1e-5)
        self.assertTrue(self.client.ready("dense"))

    def test_versions(self):
        # A model compiled through kiln.v1 serves version 1 only; another
        # version of it is NOT_FOUND naming the version.
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        np.testing.assert_allclose(self.client.infer("dense", {"x": x}, version=1)["y"],
                                   self.reference(x), rtol=1e-5, atol=1e-5)
        self.assertTrue(self.client.ready("dense", version=1))
        self.assertFalse(self.client.ready("dense", version=2))
        self.assertEqual(list(self.client.model_metadata("dense").versions), ["1"])
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.infer("dense", {"x": x}, version=2)
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.assertIn("version '2'", str(caught.exception))

    def test_kiln_graph_file_from_examples(self):
        # The README's example: a kiln.v1.Graph in text format, with NumPy's answer.
        self.client.compile("examples/mlp.pbtxt", "example_mlp")
        x = np.load("examples/x.npy")
        (y,) = self.client.infer("example_mlp", {"x": x}).values()
        np.testing.assert_allclose(y, np.load("examples/mlp_expected.npy"), rtol=1e-5, atol=1e-6)
        self.client.unload("example_mlp")

    def test_requested_outputs(self):
        self.client.compile(_model([helper.make_node("Relu", ["x"], ["y"]),
                                    helper.make_node("Neg", ["x"], ["z"])],
                                   [("x", TensorProto.FLOAT, [2, 3])],
                                   [("y", TensorProto.FLOAT, [2, 3]),
                                    ("z", TensorProto.FLOAT, [2, 3])]), "two_outputs")
        x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
        both = self.client.infer("two_outputs", {"x": x})
        self.assertEqual(sorted(both), ["y", "z"])
        np.testing.assert_array_equal(both["y"], np.maximum(x, 0))
        np.testing.assert_array_equal(both["z"], -x)
        only_z = self.client.infer("two_outputs", {"x": x}, outputs=["z"])
        self.assertEqual(list(only_z), ["z"])
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.infer("two_outputs", {"x": x}, outputs=["w"])
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        self.client.unload("two_outputs")

    def test_every_datatype_round_trips(self):
        # Add (And for BOOL) on each datatype Kiln serves, integers wrapping as NumPy's do.
        for datatype in _ONNX_TYPE:
            with self.subTest(datatype=datatype):
                name = "binary_" + datatype.lower()
                self.client.compile(_binary("And" if datatype == "BOOL" else "Add", datatype), name)
                if datatype == "BOOL":
                    a, b = (self.rng.integers(0, 2, (2, 3)).astype(bool) for _ in range(2))
                    y = self.client.infer(name, {"a": a, "b": b})["y"]
                    self.assertEqual(y.dtype, np.bool_)
                    np.testing.assert_array_equal(y, a & b)
                elif datatype == "BF16":
                    a, b = (self.rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
                    y = self.client.infer(name, {"a": kiln.BF16(a), "b": kiln.BF16(b)})["y"]

                    def round_bf16(v):
                        return tensors.bf16_bits_to_float32(tensors.float32_to_bf16_bits(v))

                    self.assertEqual(y.dtype, np.float32)  # BF16 comes back widened
                    np.testing.assert_array_equal(y, round_bf16(round_bf16(a) + round_bf16(b)))
                else:
                    dtype = tensors._BY_NAME[datatype]
                    if np.issubdtype(dtype, np.integer):
                        info = np.iinfo(dtype)
                        a, b = (self.rng.integers(info.min, info.max, (2, 3), dtype=dtype,
                                                  endpoint=True) for _ in range(2))
                    else:
                        a, b = ((self.rng.standard_normal((2, 3)) * 60).astype(dtype)
                                for _ in range(2))
                    y = self.client.infer(name, {"a": a, "b": b})["y"]
                    self.assertEqual(y.dtype, dtype)
                    with np.errstate(over="ignore"):
                        np.testing.assert_array_equal(y, a + b)
                self.client.unload(name)

    def test_replace_serves_the_next_version(self):
        self.client.compile(_binary("Add", "FP32"), "versioned")
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.compile(_binary("Mul", "FP32"), "versioned")
        self.assertEqual(caught.exception.code, "ALREADY_EXISTS")
        replaced = self.client.compile(_binary("Mul", "FP32"), "versioned", replace=True)
        self.assertEqual(replaced.version, 2)
        a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
        np.testing.assert_array_equal(self.client.infer("versioned", {"a": a, "b": a})["y"], a * a)
        self.assertEqual(list(self.client.model_metadata("versioned").versions), ["2"])
        self.client.unload("versioned")

    def test_server_info(self):
        info = self.client.server_info()
        self.assertTrue(info.version)
        self.assertIn("matmul", info.ops)
        self.assertTrue(self.client.ready())

    def test_unknown_model_is_not_found(self):
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.infer("no_such_model", {"x": np.zeros((4, 16), np.float32)})
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.assertIn("no_such_model", caught.exception.message)

    def test_wrong_input_is_invalid_argument(self):
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.infer("dense", {"x": np.zeros((4, 15), np.float32)})
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

    def test_unknown_compile_option_is_invalid_argument(self):
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.compile(_dense_relu(self.w, self.b), "x", no_such_option=1)
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

    def test_nchwc_layout_option(self):
        # Spelt as kiln compile's --nchwc; a dense model has no conv to block.
        self.client.compile(_dense_relu(self.w, self.b), "dense_nchw", nchwc_layout="off")
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        np.testing.assert_allclose(self.client.infer("dense_nchw", {"x": x})["y"],
                                   self.reference(x), rtol=1e-5, atol=1e-5)
        self.client.unload("dense_nchw")
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.compile(_dense_relu(self.w, self.b), "x", nchwc_layout="sideways")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

    def test_compile_stream_yields_progress_then_the_result(self):
        events = list(self.client.compile_stream(_dense_relu(self.w, self.b), "dense_stream"))
        kinds = [e.kind for e in events]
        progress = kiln_service_pb2.CompileProgress
        self.assertEqual(kinds[-1], progress.FINISHED)
        self.assertNotIn(progress.FINISHED, kinds[:-1])
        self.assertIn(progress.PASS_DONE, kinds)
        self.assertIn(progress.KERNEL_DONE, kinds)
        self.assertEqual(events[-1].response.model_name, "dense_stream")
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        np.testing.assert_allclose(self.client.infer("dense_stream", {"x": x})["y"],
                                   self.reference(x), rtol=1e-5, atol=1e-5)
        self.client.unload("dense_stream")

    def test_compile_stream_error_raises(self):
        with self.assertRaises(kiln.KilnError) as caught:
            list(self.client.compile_stream(b"not an onnx model", "broken"))
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

    def test_upload_in_chunks(self):
        response = self.client.compile(_dense_relu(self.w, self.b), "dense_upload", upload=True)
        self.assertEqual(response.model_name, "dense_upload")
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        np.testing.assert_allclose(self.client.infer("dense_upload", {"x": x})["y"],
                                   self.reference(x), rtol=1e-5, atol=1e-5)
        self.client.unload("dense_upload")

    def test_a_model_over_the_threshold_goes_up_in_chunks(self):
        # The server takes messages of at most 1 MiB (client_test.sh); the model's
        # weights are 2 MiB, so only UploadModel's chunks get it there.
        w = self.rng.standard_normal((16, 32768)).astype(np.float32)
        model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", TensorProto.FLOAT, [1, 16])], [("y", TensorProto.FLOAT, [1, 32768])],
                       [numpy_helper.from_array(w, "w")])
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.compile(model, "wide", upload=False)
        self.assertEqual(caught.exception.code, "RESOURCE_EXHAUSTED")
        threshold = kiln.client.UPLOAD_ABOVE_BYTES
        kiln.client.UPLOAD_ABOVE_BYTES = 1 << 20
        try:
            self.client.compile(model, "wide")
        finally:
            kiln.client.UPLOAD_ABOVE_BYTES = threshold
        x = self.rng.standard_normal((1, 16)).astype(np.float32)
        np.testing.assert_allclose(self.client.infer("wide", {"x": x})["y"], x @ w,
                                   rtol=1e-4, atol=1e-4)
        self.client.unload("wide")

    def test_models_unload(self):
        self.client.compile(_dense_relu(self.w, self.b), "dense_unload")
        by_name = {m.name: m for m in self.client.models()}
        self.assertIn("dense_unload", by_name)
        self.assertEqual([i.name for i in by_name["dense_unload"].inputs], ["x"])
        self.client.unload("dense_unload")
        self.assertNotIn("dense_unload", [m.name for m in self.client.models()])
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.infer("dense_unload", {"x": np.zeros((4, 16), np.float32)})
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.unload("dense_unload")
        self.assertEqual(caught.exception.code, "NOT_FOUND")

    def test_stats(self):
        self.client.compile(_dense_relu(self.w, self.b), "dense_stats")
        x = np.ones((4, 16), np.float32)
        for _ in range(3):
            self.client.infer("dense_stats", {"x": x})
        timing = self.client.timing_stats("dense_stats")
        self.assertEqual(timing.model_name, "dense_stats")
        self.assertEqual(timing.inference_count, 3)
        stats = self.client.cache_stats()
        self.assertGreaterEqual(stats.entries, 1)
        self.assertGreaterEqual(stats.hits, 1)  # dense_stats reuses dense's kernel
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.timing_stats("no_such_model")
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.client.unload("dense_stats")

    def test_kernels_call_and_benchmark(self):
        fused = [k for k in self.client.kernels() if list(k.ops) == ["matmul", "add", "relu"]]
        self.assertEqual(len(fused), 1)
        kernel = fused[0]
        self.assertEqual([(a.datatype, list(a.shape)) for a in kernel.args],
                         [("FP32", [4, 16]), ("FP32", [16, 8]), ("FP32", [8]), ("FP32", [4, 8])])
        x = self.rng.standard_normal((4, 16)).astype(np.float32)
        w = self.rng.standard_normal((16, 8)).astype(np.float32)
        b = self.rng.standard_normal(8).astype(np.float32)
        y = self.client.call_kernel(kernel.key[:12], x, w, b)
        np.testing.assert_allclose(y, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.call_kernel(kernel.key, x)  # one argument of three
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")

        bench = self.client.benchmark_kernel(kernel.key, number=5, repeat=4)
        self.assertEqual(len(bench.results_s), 4)
        self.assertAlmostEqual(bench.min_s, min(bench.results_s))
        self.assertAlmostEqual(bench.max_s, max(bench.results_s))
        self.assertAlmostEqual(bench.mean_s, sum(bench.results_s) / 4)
        self.assertGreater(bench.min_s, 0)
        with self.assertRaises(kiln.KilnError) as caught:
            self.client.benchmark_kernel("0000000000000000")
        self.assertEqual(caught.exception.code, "NOT_FOUND")


if __name__ == "__main__":
    unittest.main(verbosity=2)
