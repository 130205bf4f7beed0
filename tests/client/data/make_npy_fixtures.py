#!/usr/bin/python3
"""Writes the .npy files npy_test reads: arrays saved by NumPy itself.

Run with Debian's /usr/bin/python3 (it has numpy).
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    np.save(os.path.join(HERE, "f32_2x3.npy"),
            np.array([[1.5, -2.0, 3.25], [0.0, 1e-3, -7.5]], dtype=np.float32))
    np.save(os.path.join(HERE, "i64_4.npy"), np.array([1, -2, 3, 1 << 40], dtype=np.int64))
    np.save(os.path.join(HERE, "f32_scalar.npy"), np.array(42.5, dtype=np.float32))
    np.save(os.path.join(HERE, "f32_fortran.npy"),
            np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(os.path.join(HERE, "f64_3.npy"), np.array([1, 2, 3], dtype=np.float64))
    # One file per further element type, named after its NumPy descr, with the
    # values npy_test expects written out by hand.
    typed = {
        "f2": [1.0, -2.5, 65504.0, 2.0**-14],
        "i1": [-128, 127, 0, -1],
        "u1": [0, 255, 7],
        "i2": [-32768, 32767, -2],
        "u2": [65535, 0, 0x1234],
        "i4": [-2**31, 2**31 - 1, -2],
        "u4": [2**32 - 1, 0, 0xDEADBEEF],
        "u8": [2**64 - 1, 0, 2**63],
        "b1": [True, False, True],
    }
    for code, values in typed.items():
        np.save(os.path.join(HERE, "%s.npy" % code), np.array(values, dtype=code).reshape(-1, 1))
    np.save(os.path.join(HERE, "f4_big_endian.npy"), np.array([1, 2], dtype=">f4"))
    np.save(os.path.join(HERE, "c8.npy"), np.array([1 + 2j], dtype=np.complex64))


if __name__ == "__main__":
    main()
