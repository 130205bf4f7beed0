"""kiln_attention_f32 against NumPy in float64: contiguous heads, the
strided head views of a fused QKV projection (PyTorch's layout, the
kernel's reason to take strides), output rows strided as a head merge
wants them, masks broadcast over heads and rows
(padding), a causal mask, a float mask, sequences that are not multiples
of the kernel's tiles (6 query rows, 64-key sub-blocks, 128-key blocks,
128-row chunks, 8 x 8 key packing; 1, 7, 77 and 130 tokens), head dims 20,
32 and 64 and value widths that are not multiples of 16, scores whose
maximum rises from one key block to the next (the online rescaling), a row
whose keys are all masked in the first block but not later, and a fully
masked row (NaN, as softmax over nothing but -inf gives). Every case runs
at 1 and 2 threads.
Tolerance per case: |kiln - numpy| <= 2e-6 * max(1, max |numpy|) * max(1,
max |score| / 8): float32 scores carry a relative rounding error, which
exp turns into an absolute one on the probabilities, growing with |score|.
  attention_f32_test.py PROBE
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from numpy.lib.stride_tricks import as_strided

F = 4  # bytes per float32


def view(flat, n1, n2, rows, cols, s1, s2, row):
    """The (n1, n2, rows, cols) view of flat float32 data, strides in elements."""
    return as_strided(flat, (n1, n2, rows, cols), (s1 * F, s2 * F, row * F, F), writeable=False)


def reference(q, k, v, mask, scale):
    """The output and the largest finite |score|."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = np.einsum("absd,abtd->abst", q, k) * scale
    largest = float(np.max(np.abs(scores)))
    if mask is not None:
        scores = scores + mask.astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = scores.max(axis=-1, keepdims=True)
        p = np.exp(scores - m)
        p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("abst,abtj->absj", p, v), largest


def run(probe, tmp, name, n1, n2, s, t, d, dv, q, k, v, mask, scale, out=None):
    """q, k, v, mask: (flat buffer, (s1, s2, row)); mask may be None. out:
    (elements, (s1, s2, row)), contiguous (n1 * n2, s, dv) when None."""
    if out is None:
        out = (n1 * n2 * s * dv, (n2 * s * dv, s * dv, dv))
    strides = [q[1], k[1], v[1], mask[1] if mask is not None else (0, 0, 0), out[1]]
    header = [n1, n2, s, t, d, dv] + [x for st in strides for x in st] + [int(mask is not None)]
    buffers = [q[0], k[0], v[0], mask[0] if mask is not None else np.zeros(0, np.float32)]
    path_in, path_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    with open(path_in, "wb") as f:
        f.write(np.array(header, np.int64).tobytes())
        f.write(np.array([scale], np.float32).tobytes())
        f.write(np.array([b.size for b in buffers] + [out[0]], np.int64).tobytes())
        for b in buffers:
            f.write(b.astype(np.float32).tobytes())
    qv = view(q[0], n1, n2, s, d, *q[1])
    kv = view(k[0], n1, n2, t, d, *k[1])
    vv = view(v[0], n1, n2, t, dv, *v[1])
    mv = view(mask[0], n1, n2, s, t, *mask[1]) if mask is not None else None
    want, largest = reference(qv, kv, vv, mv, scale)
    nan = np.isnan(want)
    finite = want[~nan]
    bound = 2e-6 * max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
    bound *= max(1.0, largest / 8)
    ok = True
    for threads in (1, 2):
        subprocess.run([probe, path_in, path_out, str(threads)], check=True)
        got = view(np.fromfile(path_out, np.float32), n1, n2, s, dv, *out[1])
        if not np.array_equal(np.isnan(got), nan):
            print(f"FAIL {name}, {threads} threads: NaN at different places")
            ok = False
            continue
        err = float(np.max(np.abs(got[~nan] - finite))) if finite.size else 0.0
        good = err <= bound
        print(f"{'ok  ' if good else 'FAIL'} {name}, {threads} threads: max error {err:.3g} "
              f"(bound {bound:.3g})")
        ok &= good
    return ok


def contiguous(rng, n, rows, cols, lo=-1.0, hi=1.0):
    flat = rng.uniform(lo, hi, n * rows * cols).astype(np.float32)
    return flat, (0, rows * cols, cols)


def main():
    probe = sys.argv[1]
    rng = np.random.default_rng(0)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        # Contiguous heads, as the transformer benchmark's at batch 1.
        for d in (32, 64):
            s = t = 128
            ok &= run(probe, tmp, f"contiguous 4 heads s=t=128 d={d}", 1, 4, s, t, d, d,
                      contiguous(rng, 4, s, d), contiguous(rng, 4, t, d), contiguous(rng, 4, t, d),
                      None, d ** -0.5)
        # PyTorch's fused QKV projection, (S, B, 3E) sequence first, read in place:
        # head (b, h) of q is qkv[:, b, h*dh:(h+1)*dh]; k and v start E and 2E later.
        b, h, dh, s = 2, 4, 32, 37
        e = h * dh
        qkv = rng.standard_normal(s * b * 3 * e).astype(np.float32)
        st = (3 * e, dh, b * 3 * e)
        ok &= run(probe, tmp, "fused qkv (S,B,3E) views, s=37", b, h, s, s, dh, dh,
                  (qkv, st), (qkv[e:], st), (qkv[2 * e:], st), None, dh ** -0.5)
        # Key padding mask (B, 1, 1, T): 0 or -inf, broadcast over heads and rows.
        pad = np.zeros((b, s), np.float32)
        pad[0, 30:] = -np.inf
        ok &= run(probe, tmp, "fused qkv with a padding mask", b, h, s, s, dh, dh,
                  (qkv, st), (qkv[e:], st), (qkv[2 * e:], st), (pad.ravel(), (s, 0, 0)),
                  dh ** -0.5)
        # Causal (S, T) mask, sizes off every tile.
        for s, d in ((67, 32), (130, 64)):
            causal = np.triu(np.full((s, s), -np.inf, np.float32), 1)
            ok &= run(probe, tmp, f"causal s=t={s} d={d}", 1, 3, s, s, d, d,
                      contiguous(rng, 3, s, d), contiguous(rng, 3, s, d),
                      contiguous(rng, 3, s, d), (causal.ravel(), (0, 0, s)), d ** -0.5)
        # A float mask per head, more keys than queries, a value width of 40.
        n2, s, t, d, dv = 2, 13, 130, 64, 40
        fmask = rng.uniform(-3, 3, n2 * s * t).astype(np.float32)
        ok &= run(probe, tmp, "float mask s=13 t=130 dv=40", 1, n2, s, t, d, dv,
                  contiguous(rng, n2, s, d), contiguous(rng, n2, t, d),
                  contiguous(rng, n2, t, dv), (fmask, (0, s * t, t)), 0.125)
        # The output written as the head merge (S, B, H * dv) would hold it.
        b, h, s, dh = 2, 3, 19, 16
        ok &= run(probe, tmp, "output rows in (S, B, H*dv)", b, h, s, s, dh, dh,
                  contiguous(rng, b * h, s, dh), contiguous(rng, b * h, s, dh),
                  contiguous(rng, b * h, s, dh), None, 0.25,
                  out=(s * b * h * dh, (h * dh, dh, b * h * dh)))
        # More rows than a work item's chunk; dv = 80 (a 64-wide block and a tail).
        s, t, d, dv = 200, 70, 32, 80
        ok &= run(probe, tmp, "s=200 t=70 dv=80", 2, 1, s, t, d, dv,
                  contiguous(rng, 2, s, d), contiguous(rng, 2, t, d), contiguous(rng, 2, t, dv),
                  None, 0.2)
        # A head dim off the 8 x 8 key-packing blocks, keys off them too.
        s, t, d = 11, 29, 20
        ok &= run(probe, tmp, "d=20 t=29", 1, 2, s, t, d, d, contiguous(rng, 2, s, d),
                  contiguous(rng, 2, t, d), contiguous(rng, 2, t, d), None, 0.3)
        # Scores growing along the keys: each block's maximum exceeds the last's,
        # so earlier blocks' sums are rescaled (by up to e^-40) several times.
        s, t, d = 9, 256, 32
        qf, qs = contiguous(rng, 1, s, d, 0.5, 1.0)
        kf = (np.linspace(0.0, 1.0, t, dtype=np.float32)[:, None] *
              rng.uniform(0.5, 1.0, (t, d)).astype(np.float32)).ravel()
        ok &= run(probe, tmp, "rising scores t=256", 1, 1, s, t, d, d, (qf, qs),
                  (kf, (0, t * d, d)), contiguous(rng, 1, t, d), None, 3.0)
        # Odd sequence lengths in the fused QKV layout (one sequence, 2 heads),
        # with a padding mask that hides the last quarter of the keys: a single
        # token, fewer tokens than a tile, and 77 and 130 (one row past the
        # 128-row chunk, two keys past the 128-key block).
        for s in (1, 7, 77, 130):
            for dh in (32, 64):
                h = 2
                e = h * dh
                qkv = rng.standard_normal(s * 3 * e).astype(np.float32)
                st = (0, dh, 3 * e)
                pad = np.zeros(s, np.float32)
                pad[s - s // 4:] = -np.inf
                ok &= run(probe, tmp, f"fused qkv s={s} d={dh}", 1, h, s, s, dh, dh,
                          (qkv, st), (qkv[e:], st), (qkv[2 * e:], st), None, dh ** -0.5)
                ok &= run(probe, tmp, f"fused qkv s={s} d={dh} padding mask", 1, h, s, s, dh,
                          dh, (qkv, st), (qkv[e:], st), (qkv[2 * e:], st), (pad, (0, 0, 0)),
                          dh ** -0.5)
        # Three key blocks, the last partial (t = 300), and a row whose first
        # block is masked everywhere: its running maximum starts at -inf and
        # the first finite block's rescaling factor must be 0, not NaN.
        s, t, d = 10, 300, 64
        m = rng.uniform(-2, 2, (s, t)).astype(np.float32)
        m[4, :128] = -np.inf
        m[5, :290] = -np.inf
        ok &= run(probe, tmp, "t=300 a row masked through the first block", 1, 1, s, t, d, d,
                  contiguous(rng, 1, s, d), contiguous(rng, 1, t, d), contiguous(rng, 1, t, d),
                  (m.ravel(), (0, 0, t)), d ** -0.5)
        # Row 2 masked everywhere: NaN there, the other rows as usual.
        s, t, d = 5, 20, 32
        m = np.zeros((s, t), np.float32)
        m[2, :] = -np.inf
        m[3, 7:] = -np.inf
        ok &= run(probe, tmp, "a fully masked row", 1, 1, s, t, d, d, contiguous(rng, 1, s, d),
                  contiguous(rng, 1, t, d), contiguous(rng, 1, t, d), (m.ravel(), (0, 0, t)),
                  0.3)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
