#!/usr/bin/python3
"""Writes the end-to-end test's MLP fixture: weights, an input and NumPy's output.

The MLP is 16 -> 32 -> 32 -> 10 over a batch of 4:
    y = softmax(relu(relu(x @ w1.T + b1) @ w2.T + b2) @ w3.T + b3)
with dense weights laid out (N, K) as Kiln's (and TVM's) dense takes them.
Every array is float32 little-endian; the seed is fixed, so re-running the
script rewrites the same bytes. Run with Debian's python3, which has numpy:
    /usr/bin/python3 tests/server/data/make_mlp_fixture.py
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, IN, HIDDEN, OUT = 4, 16, 32, 10


def main():
    rng = np.random.default_rng(16321032)
    f32 = np.dtype("<f4")
    arrays = {
        "x": rng.standard_normal((BATCH, IN)),
        "w1": rng.standard_normal((HIDDEN, IN)) * 0.3,
        "b1": rng.standard_normal(HIDDEN) * 0.1,
        "w2": rng.standard_normal((HIDDEN, HIDDEN)) * 0.2,
        "b2": rng.standard_normal(HIDDEN) * 0.1,
        "w3": rng.standard_normal((OUT, HIDDEN)) * 0.3,
        "b3": rng.standard_normal(OUT) * 0.1,
    }
    a = {name: value.astype(f32) for name, value in arrays.items()}

    h = np.maximum(a["x"] @ a["w1"].T + a["b1"], 0)
    h = np.maximum(h @ a["w2"].T + a["b2"], 0)
    logits = h @ a["w3"].T + a["b3"]
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    a["y"] = (e / e.sum(axis=-1, keepdims=True)).astype(f32)

    for name, value in a.items():
        np.save(os.path.join(HERE, name + ".npy"), value)


if __name__ == "__main__":
    main()
