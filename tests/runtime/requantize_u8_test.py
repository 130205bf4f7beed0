"""The requantising stores of kiln_qconv_u8s8_q8 and kiln_qmatmul_u8s8_q8
(runtime/requantize_u8.h) against a float64 reference, exactly:
  t = clamp(fma(sum, scale, bias), low, high)
  q = clamp(round_half_even(t / y_scale) + zero, q_low, q_high)
with sum the int64 sum of the centered integers (the kernels' own tests'
references), fma rounded once (Fraction arithmetic, then one rounding to
float64) and the rest in NumPy float64. Cases: zero points 0, 128 and
others, uint8 outputs and int8 ones (stored with 128 added), Relu, Clip or
no bound, per-channel scales, and sums placed exactly on .5 boundaries
(where rounding ties away from zero would differ, checked) and within 2^-30
of them: there the float32 requantisation the kernels did before rounds the
other way, which the test checks it would (so the cases do sit where float32
fails).
  requantize_u8_test.py CONV_PROBE MATMUL_PROBE
"""
import os
import subprocess
import sys
import tempfile
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qconv_u8s8_test as conv_test  # noqa: E402
import qmatmul_u8s8_test as matmul_test  # noqa: E402

GROUP = 4


def exact_fma(acc, scale, bias):
    """sum * scale + bias rounded once to float64; scale, bias per last-axis-broadcast."""
    out = np.empty(acc.shape, np.float64)
    flat, f = acc.reshape(-1), out.reshape(-1)
    s = np.broadcast_to(scale, acc.shape).reshape(-1)
    b = np.broadcast_to(bias, acc.shape).reshape(-1)
    for i in range(flat.size):
        f[i] = float(Fraction(int(flat[i])) * Fraction(float(s[i])) + Fraction(float(b[i])))
    return out


def requantize(t, r):
    y_scale, low, high, zero, q_low, q_high = r
    t = np.minimum(np.maximum(t, low), high)
    q = np.rint(t / y_scale) + zero
    return np.minimum(np.maximum(q, q_low), q_high).astype(np.uint8)


def float32_requantize(t, r):
    """What a float32 epilogue computes from the exact t (rounded to float32 first)."""
    y_scale, low, high, zero, q_low, q_high = r
    t = np.minimum(np.maximum(t.astype(np.float32), np.float32(low)), np.float32(high))
    q = np.rint(t / np.float32(y_scale)).astype(np.float64) + zero
    return np.minimum(np.maximum(q, q_low), q_high).astype(np.uint8)


def parameters(rng, channels, kind, out_type, zero, bound):
    """scale, bias (float64, per channel) and the six requant values."""
    if kind == "random":  # float32 values, as a QDQ model's
        y_scale = float(np.float32(rng.uniform(0.01, 0.2)))
        scale = rng.uniform(1e-4, 1e-3, channels).astype(np.float32).astype(np.float64)
        bias = rng.uniform(-2, 2, channels).astype(np.float32).astype(np.float64)
    else:  # y_scale 2^-7, scale m * y_scale / 4 and sums multiples of 4 (weights are):
        # t / y_scale = sum / 4 * m + integer + 0.5 + half, exactly
        y_scale = 2.0**-7
        scale = rng.integers(1, 3, channels) * y_scale / 4
        half = {"tie": 0.0, "above": 2.0**-30, "below": -2.0**-30}[kind]
        bias = (rng.integers(-40, 40, channels) + 0.5 + half) * y_scale
    low, high = {"none": (-np.inf, np.inf), "relu": (0.0, np.inf),
                 "clip": (0.0, 6.0 * y_scale * 20)}[bound]
    offset = 0 if out_type == "uint8" else 128
    q_low, q_high = (0, 255) if out_type == "uint8" else (-128, 127)
    requant = np.array([y_scale, low, high, zero + offset, q_low + offset, q_high + offset],
                       np.float64)
    return scale, bias, requant


def half_away_requantize(t, r):
    """Rounding ties away from zero instead: differs from the reference only at exact ties."""
    y_scale, low, high, zero, q_low, q_high = r
    v = np.minimum(np.maximum(t, low), high) / y_scale
    q = np.sign(v) * np.floor(np.abs(v) + 0.5) + zero
    return np.minimum(np.maximum(q, q_low), q_high).astype(np.uint8)


def check(name, got, want, t, requant, kind):
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        i = tuple(bad[0])
        print(f"FAIL {name}: {len(bad)} of {got.size} differ, first at {i}: {got[i]} != "
              f"{want[i]} (t / y_scale = {t[i] / requant[0]!r})")
        return False
    # What the case exercises: float32's error near the boundaries, or ties to even.
    other, what = ((half_away_requantize, "ties away from zero") if kind == "tie" else
                   (float32_requantize, "float32"))
    flips = int((other(t, requant) != want).sum())
    if kind != "random" and flips == 0:
        print(f"FAIL {name}: no element where {what} rounds otherwise; the case tests nothing")
        return False
    print(f"ok   {name} ({what} would differ in {flips} of {got.size})")
    return True


def activations(rng, shape, x_zero, kind):
    """Random uint8, or for the boundary cases values near x_zero (small sums, few saturate)."""
    if kind == "random":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return np.clip(x_zero + rng.integers(-3, 4, shape), 0, 255).astype(np.uint8)


def conv_case(probe, rng, tmp, c, h, wd, co, kh, kw, pads, x_zero, kind, out_type, zero,
              bound):
    x = activations(rng, (1, c, h, wd), x_zero, kind)
    if kind == "random":
        w = rng.integers(-128, 128, (co, c, kh, kw), dtype=np.int8)
    else:  # multiples of 4: every sum too, so t / y_scale sits at the boundary shifted
        w = (rng.integers(-8, 8, (co, c, kh, kw)) * 4).astype(np.int8)
    pt, pl, pb, pr = pads
    oh, ow = h + pt + pb - kh + 1, wd + pl + pr - kw + 1
    k = c * kh * kw
    kp = (k + GROUP - 1) // GROUP * GROUP
    rows = np.zeros((co, kp), np.int8)
    rows[:, :k] = w.reshape(co, k)
    correction = (-x_zero * rows.astype(np.int64).sum(axis=1)).astype(np.int32)
    scale, bias, requant = parameters(rng, co, kind, out_type, zero, bound)
    header = np.array([1, c, h, wd, co, kh, kw, 1, 1, pt, pl, 1, 1, oh, ow, x_zero], np.int64)
    path_in, path_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    with open(path_in, "wb") as f:
        for a in (header, x, rows, correction, scale, bias, requant):
            f.write(a.tobytes())
    subprocess.run([probe, path_in, path_out, "--q8"], check=True)
    got = np.fromfile(path_out, np.uint8).reshape(1, co, oh, ow)
    acc = conv_test.reference(x, w, x_zero, pads, (1, 1), (1, 1), (oh, ow))
    t = exact_fma(acc, scale[:, None, None], bias[:, None, None])
    name = (f"conv c{c} {h}x{wd} co{co} k{kh}x{kw} zp{x_zero} {kind} {out_type} zero {zero} "
            f"{bound}")
    return check(name, got, requantize(t, requant), t, requant, kind)


def matmul_case(probe, rng, tmp, m, k, n, x_zero, kind, out_type, zero, bound):
    x = activations(rng, (m, k), x_zero, kind)
    if kind == "random":
        w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    else:
        w = (rng.integers(-8, 8, (k, n)) * 4).astype(np.int8)
    correction = (-x_zero * w.astype(np.int64).sum(axis=0)).astype(np.int32)
    scale, bias, requant = parameters(rng, n, kind, out_type, zero, bound)
    header = np.array([m, k, n, 2], np.int64)
    path_in, path_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    with open(path_in, "wb") as f:
        for a in (header, x, matmul_test.pack(w), correction, scale, bias, requant):
            f.write(a.tobytes())
    subprocess.run([probe, path_in, path_out], check=True)
    got = np.fromfile(path_out, np.uint8).reshape(m, n)
    acc = (x.astype(np.int64) - x_zero) @ w.astype(np.int64)
    t = exact_fma(acc, scale, bias)
    name = f"matmul {m}x{k}x{n} zp{x_zero} {kind} {out_type} zero {zero} {bound}"
    return check(name, got, requantize(t, requant), t, requant, kind)


def main():
    conv_probe, matmul_probe = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(2121)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ["random", "tie", "above", "below"]:
            for out_type, zero, bound in [("uint8", 0, "relu"), ("uint8", 128, "none"),
                                          ("uint8", 77, "clip"), ("int8", 0, "none"),
                                          ("int8", -5, "relu")]:
                ok &= conv_case(conv_probe, rng, tmp, 16, 9, 11, 20, 3, 3, (1, 1, 1, 1),
                                x_zero=128, kind=kind, out_type=out_type, zero=zero, bound=bound)
                ok &= conv_case(conv_probe, rng, tmp, 7, 1, 37, 5, 1, 1, (0, 0, 0, 0),
                                x_zero=3, kind=kind, out_type=out_type, zero=zero, bound=bound)
                # 16 pixels (one vector) and 40 channels: 16-channel tiles, then 4.
                ok &= conv_case(conv_probe, rng, tmp, 24, 4, 4, 40, 3, 3, (1, 1, 1, 1),
                                x_zero=0, kind=kind, out_type=out_type, zero=zero, bound=bound)
                # 70 rows x 67 columns: VNNI tiles with tails; 64 x 64 x 128: AMX blocks.
                ok &= matmul_case(matmul_probe, rng, tmp, 70, 45, 67, 0, kind, out_type, zero,
                                  bound)
                ok &= matmul_case(matmul_probe, rng, tmp, 64, 128, 64, 128, kind, out_type,
                                  zero, bound)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
