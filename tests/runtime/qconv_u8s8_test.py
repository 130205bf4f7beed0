"""kiln_qconv_u8s8 against NumPy: GEMMs (1x1 convs) with odd K, K not a
multiple of 4, zero points 0, 128 and others, per-channel scales, and convs
with padding, strides, dilation and batch. The reference sums the centered
integers (x - x_zero) * w in int64, outside the input counting as 0; the
kernel's float32 output must equal fma(float32(sum), scale, bias) exactly
(scales and biases are chosen with few mantissa bits, so that float64
computes that product and sum exactly and one rounding to float32 remains).
  qconv_u8s8_test.py PROBE
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

GROUP = 4  # kQConvKGroup


def reference(x, w, x_zero, pads, strides, dilation, out_hw):
    """int64 conv of (x - x_zero) by w (co, c, kh, kw), pads (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    co, _, kh, kw = w.shape
    centered = x.astype(np.int64) - x_zero
    pt, pl, pb, pr = pads
    padded = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.int64)
    padded[:, :, pt:pt + h, pl:pl + wd] = centered
    oh, ow = out_hw
    sy, sx = strides
    dy, dx = dilation
    acc = np.zeros((n, co, oh, ow), np.int64)
    w64 = w.astype(np.int64)
    for ky in range(kh):
        for kx in range(kw):
            window = padded[:, :, ky * dy:ky * dy + (oh - 1) * sy + 1:sy,
                            kx * dx:kx * dx + (ow - 1) * sx + 1:sx]
            acc += np.einsum("nchw,oc->nohw", window, w64[:, :, ky, kx])
    return acc


def run_case(probe, rng, tmp, batch, c, h, wd, co, kh, kw, strides=(1, 1), pads=(0, 0, 0, 0),
             dilation=(1, 1), x_zero=0, extreme=False, unit_scale=False):
    sy, sx = strides
    dy, dx = dilation
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - dy * (kh - 1) - 1) // sy + 1
    ow = (wd + pl + pr - dx * (kw - 1) - 1) // sx + 1
    if extreme:  # the largest products: no 16-bit intermediate may saturate
        x = np.full((batch, c, h, wd), 255, np.uint8)
        w = np.full((co, c, kh, kw), -128, np.int8)
        w[::2] = 127
    else:
        x = rng.integers(0, 256, (batch, c, h, wd), dtype=np.uint8)
        w = rng.integers(-128, 128, (co, c, kh, kw), dtype=np.int8)
    k = c * kh * kw
    kp = (k + GROUP - 1) // GROUP * GROUP
    rows = np.zeros((co, kp), np.int8)
    rows[:, :k] = w.reshape(co, k)
    correction = (-x_zero * rows.astype(np.int64).sum(axis=1)).astype(np.int32)
    if unit_scale:
        scale, bias = np.ones(co, np.float32), np.zeros(co, np.float32)
    else:
        scale = (rng.integers(1, 1024, co) * 2.0**-16).astype(np.float32)
        bias = (rng.integers(-2**20, 2**20, co) * 2.0**-16).astype(np.float32)
    header = np.array([batch, c, h, wd, co, kh, kw, sy, sx, pt, pl, dy, dx, oh, ow, x_zero],
                      np.int64)
    path_in, path_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    with open(path_in, "wb") as f:
        for a in (header, x, rows, correction, scale, bias):
            f.write(a.tobytes())
    subprocess.run([probe, path_in, path_out], check=True)
    got = np.fromfile(path_out, np.float32).reshape(batch, co, oh, ow)
    acc = reference(x, w, x_zero, pads, strides, dilation, (oh, ow))
    assert np.abs(acc).max() < 2**31
    product = acc.astype(np.float32).astype(np.float64) * scale.astype(np.float64)[:, None, None]
    want = (product + bias.astype(np.float64)[:, None, None]).astype(np.float32)
    name = (f"b{batch} c{c} {h}x{wd} co{co} k{kh}x{kw} s{strides} p{pads} d{dilation} "
            f"zp{x_zero}{' extreme' if extreme else ''}")
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
        # GEMMs: M = co, N = pixels (1 x P image), K = c.
        for k, p, co, zp in [(1, 1, 1, 0), (3, 15, 3, 128), (5, 16, 4, 37), (7, 17, 5, 255),
                             (17, 64, 16, 0), (64, 65, 67, 128), (147, 200, 130, 91),
                             (300, 33, 9, 1), (1024, 48, 64, 128), (6, 1, 70, 200)]:
            ok &= run_case(probe, rng, tmp, 1, k, 1, p, co, 1, 1, x_zero=zp)
        ok &= run_case(probe, rng, tmp, 1, 301, 1, 37, 6, 1, 1, x_zero=0, unit_scale=True)
        ok &= run_case(probe, rng, tmp, 1, 513, 1, 20, 8, 1, 1, x_zero=255, extreme=True,
                       unit_scale=True)
        ok &= run_case(probe, rng, tmp, 1, 64, 1, 16, 4, 1, 1, x_zero=0, extreme=True,
                       unit_scale=True)
        # Convs.
        ok &= run_case(probe, rng, tmp, 1, 16, 9, 11, 20, 3, 3, pads=(1, 1, 1, 1), x_zero=128)
        ok &= run_case(probe, rng, tmp, 2, 3, 23, 21, 8, 7, 7, strides=(2, 2),
                       pads=(3, 3, 3, 3), x_zero=113)
        ok &= run_case(probe, rng, tmp, 1, 12, 14, 14, 24, 1, 1, strides=(2, 2), x_zero=0)
        ok &= run_case(probe, rng, tmp, 1, 5, 12, 10, 7, 3, 3, dilation=(2, 2),
                       pads=(2, 1, 0, 2), x_zero=9)
        ok &= run_case(probe, rng, tmp, 2, 32, 7, 7, 33, 3, 3, strides=(2, 1),
                       pads=(1, 0, 1, 2), x_zero=255)
        ok &= run_case(probe, rng, tmp, 1, 64, 28, 28, 64, 3, 3, pads=(1, 1, 1, 1), x_zero=0)
        # One pixel vector (resnet18's layer4): 16-channel tiles, then 4.
        ok &= run_case(probe, rng, tmp, 1, 96, 4, 4, 52, 3, 3, pads=(1, 1, 1, 1), x_zero=128)
        ok &= run_case(probe, rng, tmp, 1, 7, 40, 37, 9, 5, 5, strides=(3, 3), pads=(2, 2, 2, 2),
                       x_zero=200)
        ok &= run_case(probe, rng, tmp, 1, 9, 19, 53, 5, 3, 3, strides=(1, 2), pads=(0, 1, 0, 1),
                       x_zero=128)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
