// kiln_attention_f32 (common/kernel_abi.h): softmax(q k^T * scale + mask) v
// for every batch entry (a head), the score matrix never written to memory:
// the CPU form of flash attention.
//
// Design: a precompiled runtime microkernel, like kiln_qconv_u8s8, rather
// than generated loops. The loop nest's contraction schedule tiles one sum
// of products per kernel; attention is two of them with a row-wise softmax
// between, whose running maximum rescales the second sum as keys stream in.
// Written once here, it compiles once for the ISA and is tested alone
// against NumPy (tests/runtime/attention_f32_test.sh).
//
// Operands are strided views (compiler/passes/fuse_attention.cc finds them
// behind the head split's slices, reshapes and transposes): entry n = n_1 *
// n2 + n_2 of q starts at q + n_1 * q_s1 + n_2 * q_s2 and its rows are
// q_row apart, each row contiguous; likewise k, v and the mask (strides 0
// broadcast it). The output's rows are strided the same way (the pass
// writes them where the head merge after attention would have put them).
//
// Per entry and chunk of query rows (a work item; threads share them):
//   for each block of kBc = 128 keys:
//     1. Pack the block's keys transposed, kt[d][key], zero-padded to whole
//        sub-blocks of kBk = 64, so that a vector holds 16 keys' values of
//        one d; copy its value rows next to it (read in place, a fused QKV
//        projection's rows are 3 KB apart and the block's rows fell into a
//        few L1 sets).
//     2. For each tile of kR query rows, per sub-block of 64 keys: scores
//        (kR x 64, 24 accumulators) = sum_d q[row][d] (broadcast) * kt[d]
//        (4 vectors), times scale, plus the mask's row, times log2 e, into
//        a kR x 128 buffer in L1; keys past the end are -inf.
//     3. Softmax in base 2 per row over the block: m' = max(m, max of the
//        row), alpha = 2^(m - m'), p = 2^(score - m'), l = l * alpha + sum p.
//     4. out rows = out rows * alpha + p v, the output tile in 24
//        accumulators (kR rows x 64 columns); on the last block, times 1 / l
//        before the store.
// Measured alone on one core of this project's Xeon (best of 200 calls),
// the transformer benchmark's attention (4 heads, S = T = 128, d = 64, in
// the fused QKV layout): 118 us, 142 GFLOPS; the matmul, softmax and matmul
// kernels it replaces took 174 us in kiln-bench. Steps: 150 us as first
// written, 140 with the value rows copied, 133 with the rows' reductions
// overlapped and no libm call, 125 with the 8 x 8 transposes, 118 with
// tiles of 6 rows instead of 4 (24 FMAs per 4 + 6 loads, not 16 per 4 + 4).
// On an AMD EPYC (Zen 5), same case and method: 83.4 us (201 GFLOPS, 74% of
// the FMA peak kiln-bench measures) with blocks of 64 keys and e^x; 80.5
// with 2^x on base-2 scores (7 FMAs per vector, not 10), the output
// divided by l in the last block's store rather than in a pass of its own,
// and unmasked value loads where 64 columns exist; 78.4 (214 GFLOPS, 79%)
// with blocks of 128 keys, so that at T = 128 the softmax's reductions run
// once per row and the output is never reloaded and rescaled; 76.5 (222
// GFLOPS, 82%) with each row's maximum taken as its scores are stored (no
// second pass over the buffer; the lane masks hoisted out of the rows, so
// the accumulators no longer went through the stack). BERT-base's 12 heads
// (rows 9 KB apart): 263 -> 234 us. Blocks of 256 keys ran 5% slower than
// 128 at T = 128 to 512. Now perf puts 4/5 of the time in the two products'
// loops, the rest in the softmax (1/8), the key transpose and the value
// copy. Neither an inline copy instead of memcpy nor an inlined transpose
// gained anything; reading the value rows in place ran 2.5% faster here at
// 3 KB rows and level at 9 KB, against 7% slower on the Xeon: kept.
// A row whose every key is masked (-inf) ends 0 * (1 / 0) = NaN, as
// PyTorch's softmax gives; m' = -inf is taken as 0 in the exponents so that no
// -inf - -inf makes a NaN before then.
// Hosts without AVX-512 get a plain scalar loop (correct, slow); the
// compiler only uses this kernel where the host has AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/kernel_abi.h"

namespace {

constexpr int kR = 6;                 // query rows per tile
constexpr int64_t kBk = 64;           // keys per score sub-block (four vectors)
constexpr int64_t kBc = 128;          // keys per block (softmax update), two sub-blocks
constexpr int64_t kQueryChunk = 128;  // query rows per work item
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504088896341f;

struct View {
  const float* base;
  int64_t s1, s2, row;
};

struct Call {
  float* out;
  int64_t o_s1, o_s2, o_row;
  View q, k, v, mask;
  bool has_mask;
  int64_t n2, s, t, d, dv;
  float scale;
  const float* At(const View& x, int64_t n) const {
    return x.base + (n / n2) * x.s1 + (n % n2) * x.s2;
  }
  float* Out(int64_t n) const { return out + (n / n2) * o_s1 + (n % n2) * o_s2; }
};

// 2^x to about 1 ulp: x = n + f, |f| <= 1/2, 2^f by a degree-6 polynomial
// fitted to it on [-1/2, 1/2] (relative error 8e-8 in float32), times 2^n
// by vscalefps. Below -126 the result is 0 (a masked key's -inf, and no
// subnormal probabilities); NaN stays NaN. Scores are kept in base 2
// (scaled by log2 e), so that no exp needs the multiply and two-part
// ln 2 reduction of e^x: 10 FMAs per vector became 7.
__attribute__((target("avx512f"))) inline __m512 Exp2(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ);
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5353362e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3398875e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6184369e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5503324e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022648e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

__mmask16 Lanes(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// Step 1: kt[dd * kBc + j] = key t0 + j's value dd, 0 past tc keys. Whole
// 8 x 8 blocks go through registers (the classic unpack / shuffle /
// permute transpose); scalar, the strided copy was an eighth of the kernel.
__attribute__((target("avx2"))) void Transpose8x8(const float* src, int64_t row, float* dst) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * row);
  __m256 t[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  __m256 u[8];
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + j * kBc, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * kBc, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
  }
}

// Zero-pads to the end of the last sub-block the tiles read.
__attribute__((target("avx2"))) void PackKeys(const float* k, int64_t row, int64_t d, int64_t t0,
                                              int64_t tc, float* kt) {
  const int64_t d8 = d / 8 * 8, t8 = tc / 8 * 8;
  const int64_t padded = (tc + kBk - 1) / kBk * kBk;
  for (int64_t j = 0; j < t8; j += 8) {
    for (int64_t dd = 0; dd < d8; dd += 8) {
      Transpose8x8(k + (t0 + j) * row + dd, row, kt + dd * kBc + j);
    }
  }
  for (int64_t dd = 0; dd < d; ++dd) {
    float* dst = kt + dd * kBc;
    for (int64_t j = dd < d8 ? t8 : 0; j < tc; ++j) dst[j] = k[(t0 + j) * row + dd];
    for (int64_t j = tc; j < padded; ++j) dst[j] = 0;
  }
}

// Running softmax state of one query row, in base 2 (scores times log2 e).
struct RowState {
  float m = -kInf;  // the largest score so far
  float l = 0;      // sum of 2^(score - m)
};

// Step 2 for one sub-block of keys [j0, j0 + kBk) of the block: p[r][j0..]
// = (q k^T * scale + mask) * log2 e, -inf past the block's tc keys; vmax[r]
// takes in row r's maximum lane by lane.
template <int R>
__attribute__((target("avx512f"))) inline void Scores(const Call& c, const float* const* qr,
                                                      const float* const* mrow, const float* kt,
                                                      int64_t j0, int64_t tc, float (*p)[kBc],
                                                      __m512* vmax) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  for (int64_t dd = 0; dd < c.d; ++dd) {
    const float* col = kt + dd * kBc + j0;
    const __m512 k0 = _mm512_load_ps(col), k1 = _mm512_load_ps(col + 16),
                 k2 = _mm512_load_ps(col + 32), k3 = _mm512_load_ps(col + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 qb = _mm512_set1_ps(qr[r][dd]);
      acc[r][0] = _mm512_fmadd_ps(qb, k0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(qb, k1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(qb, k2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(qb, k3, acc[r][3]);
    }
  }
  const __m512 scale = _mm512_set1_ps(c.scale * kLog2e);
  const __m512 log2e = _mm512_set1_ps(kLog2e);
  const __m512 minus_inf = _mm512_set1_ps(-kInf);
  __mmask16 lanes[4];
  for (int j = 0; j < 4; ++j) lanes[j] = Lanes(tc - j0 - 16 * j);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_mul_ps(acc[r][j], scale);
  }
  if (c.has_mask) {
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) {
        acc[r][j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes[j], mrow[r] + j0 + 16 * j), log2e,
                                    acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    __m512 m = vmax[r];
    for (int j = 0; j < 4; ++j) {
      const __m512 x = _mm512_mask_mov_ps(minus_inf, lanes[j], acc[r][j]);
      _mm512_store_ps(p[r] + j0 + 16 * j, x);
      m = _mm512_max_ps(m, x);
    }
    vmax[r] = m;
  }
}

// Step 4 for output columns [j0, j0 + 64): out = out * alpha + p v, then,
// after the last block, / l. Full: all 64 columns exist (no lane masks,
// which the compiler had kept in memory and reloaded every key).
template <int R, bool kFull>
__attribute__((target("avx512f"))) inline void Values(const Call& c, const float* vb,
                                                      const float (*p)[kBc], float* const* orow,
                                                      int64_t j0, int64_t tc, bool first,
                                                      const float* alpha, const float* inv_l) {
  __mmask16 lanes[4];
  for (int j = 0; j < 4; ++j) {
    lanes[j] = kFull ? static_cast<__mmask16>(0xffff) : Lanes(c.dv - j0 - 16 * j);
  }
  __m512 o[R][4];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
    for (int j = 0; j < 4; ++j) {
      if (first) {
        o[r][j] = _mm512_setzero_ps();
      } else if (kFull) {
        o[r][j] = _mm512_mul_ps(_mm512_loadu_ps(orow[r] + j0 + 16 * j), a);
      } else {
        o[r][j] = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes[j], orow[r] + j0 + 16 * j), a);
      }
    }
  }
  for (int64_t tt = 0; tt < tc; ++tt) {
    const float* vrow = vb + tt * c.dv + j0;
    __m512 vv[4];
    for (int j = 0; j < 4; ++j) {
      vv[j] =
          kFull ? _mm512_loadu_ps(vrow + 16 * j) : _mm512_maskz_loadu_ps(lanes[j], vrow + 16 * j);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 pb = _mm512_set1_ps(p[r][tt]);
      for (int j = 0; j < 4; ++j) o[r][j] = _mm512_fmadd_ps(pb, vv[j], o[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512 f = _mm512_set1_ps(inv_l == nullptr ? 1.0f : inv_l[r]);
    for (int j = 0; j < 4; ++j) {
      const __m512 x = inv_l == nullptr ? o[r][j] : _mm512_mul_ps(o[r][j], f);
      if (kFull) {
        _mm512_storeu_ps(orow[r] + j0 + 16 * j, x);
      } else {
        _mm512_mask_storeu_ps(orow[r] + j0 + 16 * j, lanes[j], x);
      }
    }
  }
}

// Steps 2 to 4 for R query rows from `i` against the block's keys [t0, t0 +
// tc); `last`: the keys end with this block.
template <int R>
__attribute__((target("avx512f"))) void Tile(const Call& c, const float* q, const float* vb,
                                             const float* mask, float* out, const float* kt,
                                             int64_t i, int64_t t0, int64_t tc, bool first,
                                             bool last, RowState* state) {
  const float* qr[R];
  const float* mrow[R];
  float* orow[R];
  for (int r = 0; r < R; ++r) {
    qr[r] = q + (i + r) * c.q.row;
    mrow[r] = c.has_mask ? mask + (i + r) * c.mask.row + t0 : nullptr;
    orow[r] = out + (i + r) * c.o_row;
  }
  alignas(64) float p[R][kBc];
  const __m512 minus_inf = _mm512_set1_ps(-kInf);
  __m512 vmax[R];
  for (int r = 0; r < R; ++r) vmax[r] = minus_inf;
  for (int64_t j0 = 0; j0 < tc; j0 += kBk) Scores<R>(c, qr, mrow, kt, j0, tc, p, vmax);
  // Step 3, each pass over all R rows at once, so that their horizontal
  // reductions overlap (a row at a time, each waited for the last: this
  // took a quarter of the kernel's time).
  const int64_t nv = (tc + 15) / 16;
  float m_use[R];
  alignas(64) float shift_old[16] = {};
  for (int r = 0; r < R; ++r) {
    RowState& st = state[i + r];
    const float m_new = std::max(st.m, _mm512_reduce_max_ps(vmax[r]));
    m_use[r] = m_new == -kInf ? 0.0f : m_new;
    shift_old[r] = st.m - m_use[r];
    st.m = m_new;
  }
  alignas(64) float alpha[16];
  _mm512_store_ps(alpha, Exp2(_mm512_load_ps(shift_old)));  // 2^-inf = 0 on the first block
  __m512 sum[R], shift[R];
  for (int r = 0; r < R; ++r) {
    sum[r] = _mm512_setzero_ps();
    shift[r] = _mm512_set1_ps(m_use[r]);
  }
  for (int64_t j = 0; j < nv; ++j) {
    for (int r = 0; r < R; ++r) {
      const __m512 e = Exp2(_mm512_sub_ps(_mm512_load_ps(p[r] + 16 * j), shift[r]));
      _mm512_store_ps(p[r] + 16 * j, e);
      sum[r] = _mm512_add_ps(sum[r], e);
    }
  }
  float inv_l[R];
  for (int r = 0; r < R; ++r) {
    RowState& st = state[i + r];
    st.l = (first ? 0.0f : st.l * alpha[r]) + _mm512_reduce_add_ps(sum[r]);
    inv_l[r] = 1.0f / st.l;  // 0 / 0 = NaN for a row masked everywhere, as softmax gives
  }
  const float* scale_out = last ? inv_l : nullptr;
  int64_t j0 = 0;
  for (; j0 + 64 <= c.dv; j0 += 64)
    Values<R, true>(c, vb, p, orow, j0, tc, first, alpha, scale_out);
  if (j0 < c.dv) Values<R, false>(c, vb, p, orow, j0, tc, first, alpha, scale_out);
}

// One work item: entry n, query rows [i0, i1).
__attribute__((target("avx512f"))) void ChunkAvx512(const Call& c, int64_t n, int64_t i0,
                                                    int64_t i1) {
  const float* q = c.At(c.q, n);
  const float* k = c.At(c.k, n);
  const float* v = c.At(c.v, n);
  const float* mask = c.has_mask ? c.At(c.mask, n) : nullptr;
  float* out = c.Out(n);
  thread_local std::vector<float> storage;
  storage.resize((c.d + c.dv) * kBc + 16);
  float* kt = storage.data();
  kt += (16 - (reinterpret_cast<uintptr_t>(kt) / 4) % 16) % 16;  // 64-byte aligned
  float* vb = kt + c.d * kBc;
  thread_local std::vector<RowState> state;
  state.assign(c.s, RowState{});
  for (int64_t t0 = 0; t0 < c.t; t0 += kBc) {
    const int64_t tc = std::min(kBc, c.t - t0);
    PackKeys(k, c.k.row, c.d, t0, tc, kt);
    for (int64_t j = 0; j < tc; ++j) {
      std::memcpy(vb + j * c.dv, v + (t0 + j) * c.v.row, c.dv * sizeof(float));
    }
    const bool first = t0 == 0, last = t0 + tc == c.t;
    RowState* st = state.data();
    int64_t i = i0;
    for (; i + kR <= i1; i += kR) Tile<kR>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
    switch (i1 - i) {
      case 5:
        Tile<5>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
        break;
      case 4:
        Tile<4>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
        break;
      case 3:
        Tile<3>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
        break;
      case 2:
        Tile<2>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
        break;
      case 1:
        Tile<1>(c, q, vb, mask, out, kt, i, t0, tc, first, last, st);
        break;
      default:
        break;
    }
  }
}

// The same values without AVX-512: each row's scores, softmax and sum in turn.
void ChunkScalar(const Call& c, int64_t n, int64_t i0, int64_t i1) {
  const float* q = c.At(c.q, n);
  const float* k = c.At(c.k, n);
  const float* v = c.At(c.v, n);
  const float* mask = c.has_mask ? c.At(c.mask, n) : nullptr;
  std::vector<float> score(c.t);
  for (int64_t i = i0; i < i1; ++i) {
    float m = -kInf;
    for (int64_t t = 0; t < c.t; ++t) {
      float dot = 0;
      for (int64_t dd = 0; dd < c.d; ++dd) dot += q[i * c.q.row + dd] * k[t * c.k.row + dd];
      score[t] = dot * c.scale + (mask != nullptr ? mask[i * c.mask.row + t] : 0.0f);
      m = std::max(m, score[t]);
    }
    const float m_use = m == -kInf ? 0.0f : m;
    float l = 0;
    for (int64_t t = 0; t < c.t; ++t) {
      score[t] = std::exp(score[t] - m_use);
      l += score[t];
    }
    float* orow = c.Out(n) + i * c.o_row;
    for (int64_t j = 0; j < c.dv; ++j) {
      float sum = 0;
      for (int64_t t = 0; t < c.t; ++t) sum += score[t] * v[t * c.v.row + j];
      orow[j] = sum / l;
    }
  }
}

using ChunkFn = void (*)(const Call&, int64_t, int64_t, int64_t);

ChunkFn ForThisCpu() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? ChunkAvx512 : ChunkScalar;
}

struct Work {
  const Call* call;
  ChunkFn chunk;
  int64_t chunks;  // per entry
};

void RunWork(void* closure, int64_t begin, int64_t end) {
  const Work& w = *static_cast<const Work*>(closure);
  const Call& c = *w.call;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t n = item / w.chunks;
    const int64_t i0 = item % w.chunks * kQueryChunk;
    w.chunk(c, n, i0, std::min(i0 + kQueryChunk, c.s));
  }
}

}  // namespace

extern "C" void kiln_attention_f32(float* out, const float* q, const float* k, const float* v,
                                   const float* mask, int64_t n1, int64_t n2, int64_t s, int64_t t,
                                   int64_t d, int64_t dv, int64_t q_s1, int64_t q_s2, int64_t q_row,
                                   int64_t k_s1, int64_t k_s2, int64_t k_row, int64_t v_s1,
                                   int64_t v_s2, int64_t v_row, int64_t m_s1, int64_t m_s2,
                                   int64_t m_row, int64_t o_s1, int64_t o_s2, int64_t o_row,
                                   int64_t has_mask, float scale) {
  static const ChunkFn chunk = ForThisCpu();
  const Call call{out,
                  o_s1,
                  o_s2,
                  o_row,
                  {q, q_s1, q_s2, q_row},
                  {k, k_s1, k_s2, k_row},
                  {v, v_s1, v_s2, v_row},
                  {mask, m_s1, m_s2, m_row},
                  has_mask != 0,
                  n2,
                  s,
                  t,
                  d,
                  dv,
                  scale};
  const int64_t chunks = (s + kQueryChunk - 1) / kQueryChunk;
  Work work{&call, chunk, chunks};
  kiln_parallel_for(RunWork, &work, n1 * n2 * chunks);
}
