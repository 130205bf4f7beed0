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
//   for each block of kBc keys:
//     1. Pack the block's keys transposed, kt[d][key], zero-padded to kBc,
//        so that a vector holds 16 keys' values of one d; copy its value
//        rows next to it (read in place, a fused QKV projection's rows are
//        3 KB apart and the block's rows fell into a few L1 sets).
//     2. For each tile of kR query rows: scores (kR x kBc, 24 accumulators)
//        = sum_d q[row][d] (broadcast) * kt[d] (4 vectors), times scale,
//        plus the mask's row; keys past the end are -inf.
//     3. Online softmax per row: m' = max(m, max of the row), alpha =
//        exp(m - m'), p = exp(score - m'), l = l * alpha + sum p.
//     4. out rows = out rows * alpha + p v, the output tile in 24
//        accumulators (kR rows x 64 columns).
//   then out rows /= l.
// Measured alone on one core of this project's Xeon (best of 200 calls),
// the transformer benchmark's attention (4 heads, S = T = 128, d = 64, in
// the fused QKV layout): 118 us, 142 GFLOPS; the matmul, softmax and matmul
// kernels it replaces took 174 us in kiln-bench. Steps: 150 us as first
// written, 140 with the value rows copied, 133 with the rows' reductions
// overlapped and no libm call, 125 with the 8 x 8 transposes, 118 with
// tiles of 6 rows instead of 4 (24 FMAs per 4 + 6 loads, not 16 per 4 + 4).
// A row whose every key is masked (-inf) ends 0 / 0 = NaN, as PyTorch's
// softmax gives; m' = -inf is taken as 0 in the exponents so that no
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
constexpr int64_t kBc = 64;           // keys per block (four vectors)
constexpr int64_t kQueryChunk = 128;  // query rows per work item
constexpr float kInf = std::numeric_limits<float>::infinity();

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

// exp(x) to about 1 ulp for x in [-87.3, 88.7]: x = n ln2 + r, |r| <= ln2 / 2,
// e^r by its Taylor series to r^7 (error below 2^-27), times 2^n by vscalefps.
// Below -87.3 the result is 0 (a masked key's -inf); NaN stays NaN.
__attribute__((target("avx512f"))) inline __m512 Exp(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);  // a NaN x stays (min returns the second)
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
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

__attribute__((target("avx2"))) void PackKeys(const float* k, int64_t row, int64_t d, int64_t t0,
                                              int64_t tc, float* kt) {
  const int64_t d8 = d / 8 * 8, t8 = tc / 8 * 8;
  for (int64_t j = 0; j < t8; j += 8) {
    for (int64_t dd = 0; dd < d8; dd += 8) {
      Transpose8x8(k + (t0 + j) * row + dd, row, kt + dd * kBc + j);
    }
  }
  for (int64_t dd = 0; dd < d; ++dd) {
    float* dst = kt + dd * kBc;
    for (int64_t j = dd < d8 ? t8 : 0; j < tc; ++j) dst[j] = k[(t0 + j) * row + dd];
    for (int64_t j = tc; j < kBc; ++j) dst[j] = 0;
  }
}

// Running softmax state of one query row.
struct RowState {
  float m = -kInf;  // the largest score so far
  float l = 0;      // sum of exp(score - m)
};

// Steps 2 to 4 for R query rows from `i` against keys [t0, t0 + tc).
template <int R>
__attribute__((target("avx512f"))) void Tile(const Call& c, const float* q, const float* vb,
                                             const float* mask, float* out, const float* kt,
                                             int64_t i, int64_t t0, int64_t tc, bool first,
                                             RowState* state) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  const float* qr[R];
  for (int r = 0; r < R; ++r) qr[r] = q + (i + r) * c.q.row;
  for (int64_t dd = 0; dd < c.d; ++dd) {
    const float* col = kt + dd * kBc;
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
  alignas(64) float p[R][kBc];
  // Step 3 in three passes over the R rows, so that their horizontal
  // reductions overlap (a row at a time, each waited for the last: this
  // took a quarter of the kernel's time).
  const __m512 scale = _mm512_set1_ps(c.scale);
  const __m512 minus_inf = _mm512_set1_ps(-kInf);
  float m_use[R];
  alignas(64) float shift_old[16] = {};
  for (int r = 0; r < R; ++r) {
    const float* mrow = c.has_mask ? mask + (i + r) * c.mask.row + t0 : nullptr;
    __m512 rmax = minus_inf;
    for (int j = 0; j < 4; ++j) {
      const __mmask16 lanes = Lanes(tc - 16 * j);
      __m512 x = _mm512_mul_ps(acc[r][j], scale);
      if (mrow != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(lanes, mrow + 16 * j));
      x = _mm512_mask_mov_ps(minus_inf, lanes, x);
      acc[r][j] = x;
      rmax = _mm512_max_ps(rmax, x);
    }
    RowState& st = state[i + r];
    const float m_new = std::max(st.m, _mm512_reduce_max_ps(rmax));
    m_use[r] = m_new == -kInf ? 0.0f : m_new;
    shift_old[r] = st.m - m_use[r];
    st.m = m_new;
  }
  alignas(64) float alpha[16];
  _mm512_store_ps(alpha, Exp(_mm512_load_ps(shift_old)));  // exp(-inf) = 0 on the first block
  float sums[R];
  for (int r = 0; r < R; ++r) {
    const __m512 shift = _mm512_set1_ps(m_use[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      const __m512 e = Exp(_mm512_sub_ps(acc[r][j], shift));
      _mm512_store_ps(p[r] + 16 * j, e);
      sum = _mm512_add_ps(sum, e);
    }
    sums[r] = _mm512_reduce_add_ps(sum);
  }
  for (int r = 0; r < R; ++r) {
    RowState& st = state[i + r];
    st.l = (first ? 0.0f : st.l * alpha[r]) + sums[r];
  }
  for (int64_t j0 = 0; j0 < c.dv; j0 += 64) {
    __mmask16 lanes[4];
    for (int j = 0; j < 4; ++j) lanes[j] = Lanes(std::max<int64_t>(c.dv - j0 - 16 * j, 0));
    __m512 o[R][4];
    for (int r = 0; r < R; ++r) {
      float* orow = out + (i + r) * c.o_row + j0;
      const __m512 a = _mm512_set1_ps(alpha[r]);
      for (int j = 0; j < 4; ++j) {
        o[r][j] = first ? _mm512_setzero_ps()
                        : _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes[j], orow + 16 * j), a);
      }
    }
    for (int64_t tt = 0; tt < tc; ++tt) {
      const float* vrow = vb + tt * c.dv + j0;
      __m512 vv[4];
      for (int j = 0; j < 4; ++j) vv[j] = _mm512_maskz_loadu_ps(lanes[j], vrow + 16 * j);
      for (int r = 0; r < R; ++r) {
        const __m512 pb = _mm512_set1_ps(p[r][tt]);
        for (int j = 0; j < 4; ++j) o[r][j] = _mm512_fmadd_ps(pb, vv[j], o[r][j]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float* orow = out + (i + r) * c.o_row + j0;
      for (int j = 0; j < 4; ++j) _mm512_mask_storeu_ps(orow + 16 * j, lanes[j], o[r][j]);
    }
  }
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
    const bool first = t0 == 0;
    int64_t i = i0;
    for (; i + kR <= i1; i += kR) Tile<kR>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
    switch (i1 - i) {
      case 5:
        Tile<5>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
        break;
      case 4:
        Tile<4>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
        break;
      case 3:
        Tile<3>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
        break;
      case 2:
        Tile<2>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
        break;
      case 1:
        Tile<1>(c, q, vb, mask, out, kt, i, t0, tc, first, state.data());
        break;
      default:
        break;
    }
  }
  for (int64_t r = i0; r < i1; ++r) {
    const float inv = 1.0f / state[r].l;
    float* orow = out + r * c.o_row;
    for (int64_t j = 0; j < c.dv; ++j) orow[j] *= inv;
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
