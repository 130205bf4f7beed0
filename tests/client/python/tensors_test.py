"""kiln.tensors' wire forms, checked against hand-written bytes (no server)."""

import unittest

import numpy as np

import kiln
from kiln import tensors


class TensorsTest(unittest.TestCase):
    def test_raw_is_little_endian_row_major(self):
        big = np.array([[1, 2], [3, 258]], dtype=">i4")
        datatype, shape, raw = tensors.to_wire(big)
        self.assertEqual((datatype, shape), ("INT32", [2, 2]))
        self.assertEqual(raw, bytes([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2, 1, 0, 0]))
        self.assertEqual(tensors.to_wire(big.T)[2][:8], bytes([1, 0, 0, 0, 3, 0, 0, 0]))

    def test_fp16_and_bool(self):
        self.assertEqual(tensors.to_wire(np.array([1.0, -2.0], np.float16)),
                         ("FP16", [2], b"\x00\x3c\x00\xc0"))
        self.assertEqual(tensors.to_wire(np.array([True, False])), ("BOOL", [2], b"\x01\x00"))

    def test_bf16_rounds_to_nearest_even(self):
        f = np.array([0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x7F800000, 0x7F800001],
                     dtype="<u4").view("<f4")
        # 1.0; a tie rounds down to even; a tie rounds up to even; above the tie rounds up;
        # inf stays inf; a signalling NaN becomes a quiet one.
        self.assertEqual(tensors.float32_to_bf16_bits(f).tolist(),
                         [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x7FC0])
        datatype, shape, raw = tensors.to_wire(kiln.BF16([[1.0, -2.0]]))
        self.assertEqual((datatype, shape, raw), ("BF16", [1, 2], b"\x80\x3f\x00\xc0"))
        back = tensors.from_wire("BF16", [1, 2], raw)
        self.assertEqual(back.dtype, np.float32)
        np.testing.assert_array_equal(back, [[1.0, -2.0]])

    def test_from_wire_every_datatype(self):
        for name in tensors.DATATYPES:
            if name == "BF16":
                continue
            with self.subTest(datatype=name):
                a = (np.arange(6) % 2 == 1) if name == "BOOL" else np.arange(6)
                a = a.astype(tensors._BY_NAME[name]).reshape(2, 3)
                datatype, shape, raw = tensors.to_wire(a)
                self.assertEqual(datatype, name)
                back = tensors.from_wire(datatype, shape, raw)
                self.assertEqual(back.dtype, a.dtype)
                np.testing.assert_array_equal(back, a)
                back[0, 0] = back[0, 1]  # writable: not a view of the message's bytes

    def test_unsupported_dtype(self):
        with self.assertRaises(TypeError):
            tensors.to_wire(np.zeros(2, np.complex64))
        with self.assertRaises(TypeError):
            tensors.from_wire("BYTES", [1], b"x")


if __name__ == "__main__":
    unittest.main(verbosity=2)
