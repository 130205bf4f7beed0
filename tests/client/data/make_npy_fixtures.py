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


if __name__ == "__main__":
    main()
