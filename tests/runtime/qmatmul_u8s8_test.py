"""kiln_qmatmul_u8s8 against NumPy: odd K, K not a multiple of 4, zero points
0, 128, 255 and others, per-column scales, rows and columns not multiples of
the 6 x 64 tile, a batch of rows (B, S, K) flattened, extreme values. The
reference sums the centered integers (x - x_zero) * w in int64; the kernel's
float32 output must equal fma(float32(sum), scale, bias) exactly (scales and
biases have few mantissa bits, so that float64 computes that product and sum
exactly and one rounding to float32 remains), and kiln_qmatmul_u8s8_i32's
int32 output the sum itself. Cases with K a multiple of 64 and 32 x 32 blocks
run on AMX where the host has it.
  qmatmul_u8s8_test.py PROBE
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

GROUP = 4   # kQMatMulKGroup
BLOCK = 16  # kQMatMulColumnBlock


def pack(w):
    """w (K, N) int8 as common/kernel_abi.h lays it out: [N/16][K/4][16][4]."""
    k, n = w.shape
    kp = (k + GROUP - 1) // GROUP * GROUP
    np_ = (n + BLOCK - 1) // BLOCK * BLOCK
    padded = np.zeros((kp, np_), np.int8)
    padded[:k, :n] = w
    # [kq][4][nb][16] -> [nb][kq][16][4]
    return padded.reshape(kp // GROUP, GROUP, np_ // BLOCK, BLOCK).transpose(2, 0, 3, 1).copy()


def run_case(probe, rng, tmp, shape, k, n, x_zero, extreme=False, unit_scale=False,
             int32_out=False):
    rows = int(np.prod(shape))
    if extreme:  # the largest products: no 16-bit intermediate may saturate
        x = np.full(shape + (k,), 255, np.uint8)
        w = np.full((k, n), -128, np.int8)
        w[:, ::2] = 127
    else:
        x = rng.integers(0, 256, shape + (k,), dtype=np.uint8)
        w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    correction = (-x_zero * w.astype(np.int64).sum(axis=0)).astype(np.int32)
    if unit_scale:
        scale, bias = np.ones(n, np.float32), np.zeros(n, np.float32)
    else:
        scale = (rng.integers(1, 1024, n) * 2.0**-16).astype(np.float32)
        bias = (rng.integers(-2**20, 2**20, n) * 2.0**-16).astype(np.float32)
    header = np.array([rows, k, n, int32_out], np.int64)
    path_in, path_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    with open(path_in, "wb") as f:
        for a in (header, x, pack(w), correction) + (() if int32_out else (scale, bias)):
            f.write(a.tobytes())
    subprocess.run([probe, path_in, path_out], check=True)
    got = np.fromfile(path_out, np.int32 if int32_out else np.float32).reshape(shape + (n,))
    acc = (x.astype(np.int64) - x_zero) @ w.astype(np.int64)
    assert np.abs(acc).max() < 2**31
    if int32_out:
        want = acc.astype(np.int32)
    else:
        product = acc.astype(np.float32).astype(np.float64) * scale.astype(np.float64)
        want = (product + bias.astype(np.float64)).astype(np.float32)
    name = (f"x{shape}x{k} w{k}x{n} zp{x_zero}{' extreme' if extreme else ''}"
            f"{' int32' if int32_out else ''}")
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        i = tuple(bad[0])
        print(f"FAIL {name}: {len(bad)} of {got.size} differ, first at {i}: "
              f"{got[i]} != {want[i]} (sum {acc[i]})")
        return False
    print(f"ok   {name}")
    return True


def main():
    probe = sys.argv[1]
    rng = np.random.default_rng(21)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for m, k, n, zp in [(1, 1, 1, 0), (1, 3, 15, 128), (5, 5, 16, 37), (6, 7, 17, 255),
                            (7, 17, 64, 0), (13, 64, 65, 128), (64, 147, 200, 91),
                            (49, 300, 33, 1), (48, 1024, 48, 128), (97, 6, 130, 200),
                            (12, 2, 1, 255), (100, 768, 96, 131)]:
            ok &= run_case(probe, rng, tmp, (m,), k, n, x_zero=zp)
        # Batched: (B, S, K) x (K, N), rows flattened as the graph's layout is.
        ok &= run_case(probe, rng, tmp, (2, 37), 65, 70, x_zero=128)
        ok &= run_case(probe, rng, tmp, (3, 2, 9), 31, 129, x_zero=7)
        ok &= run_case(probe, rng, tmp, (7,), 301, 37, x_zero=0, unit_scale=True)
        ok &= run_case(probe, rng, tmp, (5,), 513, 20, x_zero=255, extreme=True, unit_scale=True)
        ok &= run_case(probe, rng, tmp, (8,), 64, 16, x_zero=0, extreme=True, unit_scale=True)
        # K a multiple of 64 and whole 32 x 32 blocks: AMX's tiles where the host has
        # them, the VNNI tiles on the rows and columns past them.
        for m, k, n, zp in [(32, 64, 32, 0), (64, 128, 64, 128), (70, 192, 100, 255),
                            (33, 768, 200, 3), (128, 3072, 96, 77)]:
            ok &= run_case(probe, rng, tmp, (m,), k, n, x_zero=zp)
        ok &= run_case(probe, rng, tmp, (64,), 1024, 64, x_zero=0, extreme=True, unit_scale=True)
        ok &= run_case(probe, rng, tmp, (2, 20), 256, 48, x_zero=9, int32_out=True)
        # int32 output (MatMulInteger): sums beyond 2^24, which float32 would round.
        ok &= run_case(probe, rng, tmp, (5,), 1027, 20, x_zero=0, extreme=True, int32_out=True)
        ok &= run_case(probe, rng, tmp, (2, 9), 301, 70, x_zero=128, int32_out=True)
        ok &= run_case(probe, rng, tmp, (1,), 3, 1, x_zero=0, int32_out=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
