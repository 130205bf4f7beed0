// kiln_qmatmul_u8s8 (common/kernel_abi.h): a QDQ matrix product (MatMul,
// Gemm, QLinearMatMul) as uint8 x int8 in exact int32, on AVX512-VNNI.
//
// Design: a precompiled runtime microkernel, for the reasons
// runtime/qconv_u8s8.cc gives (vpdpbusd's K groups of four change the
// packing, the reduction step and the accumulator type of every schedule).
// Its layout differs from the conv's: a matmul's activation x (M, K) is
// row-major with K contiguous, so four consecutive K values of one row are
// already the 32-bit word vpdpbusd wants, and x needs no packing at all. The
// weight, a constant, is packed at compile time (IntegerQdqMatMul) as
//   wp[n / 16][k / 4][n % 16][k % 4]   (int8, zero past K and N)
// so each 64-byte vector holds 16 output columns x 4 K values, and the
// output's rows are stored along N, as the graph lays them out.
//
//   1. Tiles of MR = 6 rows x NV = 4 column vectors (64 columns): 24 int32
//      accumulators, and per K group NV weight loads, MR broadcasts of a
//      row's 4 bytes and 24 vpdpbusd (29 of the 32 zmm registers).
//   2. The last K group, when K is no multiple of 4, builds each row's word
//      from the bytes that exist: the last row may end at a page's end.
//   3. Epilogue: + correction[n] (the zero point's term and an integer bias),
//      to float, * scale[n] + bias[n] in one FMA (rounded once, as the float
//      matmul's fused epilogue was), a masked store past N; or, for
//      kiln_qmatmul_u8s8_i32 (MatMulInteger), the int32 sum stored as it is.
//      kiln_qmatmul_u8s8_q8 requantises in float64 and stores uint8
//      (runtime/requantize_u8.h), as kiln_qconv_u8s8_q8 does.
//   Work items are a 64-column panel x a block of row tiles, panel-major, so
//   a thread's contiguous range of items reuses a panel's weights from cache.
// vpdpbusd does not saturate; each four-product sum is below 2^17 and the
// compiler only uses this kernel when K * 255 * 128 < 2^31, so every int32
// sum is exact.
// Measured through tests/runtime/qmatmul_u8s8_probe (2 threads of this
// project's shared Xeon, best of 50): x (128, 768) by w (768, 768) 0.13 ms
// (581 int8 GMAC/s), (128, 768) by (768, 3072) 597, (128, 3072) by
// (3072, 768) 307 (a panel's 196 KB of weights no longer stay in L1),
// (1, 768) by (768, 3072) 56 (one row: bound by reading the weights).
// Where the host has AMX-INT8, whole 32 x 32 output blocks with K a multiple
// of 64 run on its tiles instead (the section "AMX" below), on the same
// packing: bench/qdq_mlp.py's (128, 768) x (768, 3072) took 1.0 ms on VNNI at
// one thread and 0.30 ms on AMX (0.165 ms on two), the whole QDQ MLP's
// kernels 8.6 ms and 2.7 ms.
// Hosts without VNNI get plain loops on the same packing: correct but slow,
// which is why the compiler only uses this kernel where the host has VNNI.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/kernel_abi.h"
#include "runtime/requantize_u8.h"

namespace {

using kiln::runtime::Requant;

constexpr int kGroup = kiln::abi::kQMatMulKGroup;
constexpr int kLanes = kiln::abi::kQMatMulColumnBlock;  // int32 lanes of a zmm
constexpr int kMr = 6;                                  // rows per tile
constexpr int kNv = 4;                                  // column vectors per tile
constexpr int64_t kRowTilesPerItem = 8;                 // 48 rows per work item

struct Gemm {
  const uint8_t* x;
  const int8_t* w;
  const int32_t* correction;
  const float* scale;
  const float* bias;
  float* out;
  int32_t* out_i32;  // instead of out, for kiln_qmatmul_u8s8_i32
  // Or, for kiln_qmatmul_u8s8_q8, the requantising store's.
  const double* scale64;
  const double* bias64;
  Requant requant;
  uint8_t* out_u8;
  int64_t rows, depth, cols;
  int64_t kq() const { return (depth + kGroup - 1) / kGroup; }
  int64_t blocks() const { return (cols + kLanes - 1) / kLanes; }
  // Bytes of one 16-column block of the packed weight.
  int64_t block_bytes() const { return kq() * kGroup * kLanes; }
};

int32_t Word(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Step 2: the first `n` < 4 bytes at p, zero above.
int32_t PartialWord(const uint8_t* p, int64_t n) {
  int32_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

// Steps 1 and 2 for the full tile, its 24 accumulators in named variables,
// as in qconv_u8s8.cc's FullTileSums: in an array, or in a struct updated by
// an inlined helper, GCC 12 stored every one of them to the stack each K
// group (128 x 768 x 768 ran at 178 int8 GMAC/s on 2 threads of this
// project's Xeon, 581 without). The K loop runs twice: over x's whole
// groups, then once over a copy of the partial last group (zeros above K),
// so one copy of the body serves both.
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) void FullTileSums(
    const uint8_t* const* x, const int8_t* w, int64_t block_bytes, int64_t depth,
    __m512i (*acc)[kNv]) {
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c02 = c00, c03 = c00;
  __m512i c10 = c00, c11 = c00, c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
  __m512i c30 = c00, c31 = c00, c32 = c00, c33 = c00, c40 = c00, c41 = c00, c42 = c00, c43 = c00;
  __m512i c50 = c00, c51 = c00, c52 = c00, c53 = c00;
  const int64_t full = depth / kGroup, tail = depth % kGroup;
  const uint8_t *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *x4 = x[4], *x5 = x[5];
  const int8_t* wq = w;
  int64_t groups = full;
  uint8_t last[kMr][kGroup] = {};
  for (int round = 0; round < 2; ++round) {
    for (int64_t q = 0; q < groups; ++q) {
      const int64_t at = q * kGroup;
      const int8_t* wg = wq + q * 64;
      const __m512i w0 = _mm512_loadu_si512(wg), w1 = _mm512_loadu_si512(wg + block_bytes);
      const __m512i w2 = _mm512_loadu_si512(wg + 2 * block_bytes);
      const __m512i w3 = _mm512_loadu_si512(wg + 3 * block_bytes);
      __m512i a = _mm512_set1_epi32(Word(x0 + at));
      c00 = _mm512_dpbusd_epi32(c00, a, w0);
      c01 = _mm512_dpbusd_epi32(c01, a, w1);
      c02 = _mm512_dpbusd_epi32(c02, a, w2);
      c03 = _mm512_dpbusd_epi32(c03, a, w3);
      a = _mm512_set1_epi32(Word(x1 + at));
      c10 = _mm512_dpbusd_epi32(c10, a, w0);
      c11 = _mm512_dpbusd_epi32(c11, a, w1);
      c12 = _mm512_dpbusd_epi32(c12, a, w2);
      c13 = _mm512_dpbusd_epi32(c13, a, w3);
      a = _mm512_set1_epi32(Word(x2 + at));
      c20 = _mm512_dpbusd_epi32(c20, a, w0);
      c21 = _mm512_dpbusd_epi32(c21, a, w1);
      c22 = _mm512_dpbusd_epi32(c22, a, w2);
      c23 = _mm512_dpbusd_epi32(c23, a, w3);
      a = _mm512_set1_epi32(Word(x3 + at));
      c30 = _mm512_dpbusd_epi32(c30, a, w0);
      c31 = _mm512_dpbusd_epi32(c31, a, w1);
      c32 = _mm512_dpbusd_epi32(c32, a, w2);
      c33 = _mm512_dpbusd_epi32(c33, a, w3);
      a = _mm512_set1_epi32(Word(x4 + at));
      c40 = _mm512_dpbusd_epi32(c40, a, w0);
      c41 = _mm512_dpbusd_epi32(c41, a, w1);
      c42 = _mm512_dpbusd_epi32(c42, a, w2);
      c43 = _mm512_dpbusd_epi32(c43, a, w3);
      a = _mm512_set1_epi32(Word(x5 + at));
      c50 = _mm512_dpbusd_epi32(c50, a, w0);
      c51 = _mm512_dpbusd_epi32(c51, a, w1);
      c52 = _mm512_dpbusd_epi32(c52, a, w2);
      c53 = _mm512_dpbusd_epi32(c53, a, w3);
    }
    if (tail == 0 || round == 1) break;
    for (int r = 0; r < kMr; ++r) std::memcpy(last[r], x[r] + full * kGroup, tail);
    x0 = last[0], x1 = last[1], x2 = last[2], x3 = last[3], x4 = last[4], x5 = last[5];
    wq = w + full * 64;
    groups = 1;
  }
  acc[0][0] = c00, acc[0][1] = c01, acc[0][2] = c02, acc[0][3] = c03;
  acc[1][0] = c10, acc[1][1] = c11, acc[1][2] = c12, acc[1][3] = c13;
  acc[2][0] = c20, acc[2][1] = c21, acc[2][2] = c22, acc[2][3] = c23;
  acc[3][0] = c30, acc[3][1] = c31, acc[3][2] = c32, acc[3][3] = c33;
  acc[4][0] = c40, acc[4][1] = c41, acc[4][2] = c42, acc[4][3] = c43;
  acc[5][0] = c50, acc[5][1] = c51, acc[5][2] = c52, acc[5][3] = c53;
}

// Step 3 for kiln_qmatmul_u8s8_q8: `rows` rows of column vector v of `acc`
// (rows of NV vectors), from row m0 and column n, requantised.
template <int NV>
__attribute__((target("avx512f"))) void StoreRequantized(const Gemm& g, int64_t n, __mmask16 mask,
                                                         __m512i corr, __m512i (*acc)[NV], int rows,
                                                         int v, int64_t m0) {
  const __mmask8 lo = static_cast<__mmask8>(mask), hi = static_cast<__mmask8>(mask >> 8);
  const __m512d scale_lo = _mm512_maskz_loadu_pd(lo, g.scale64 + n);
  const __m512d scale_hi = _mm512_maskz_loadu_pd(hi, g.scale64 + n + 8);
  const __m512d bias_lo = _mm512_maskz_loadu_pd(lo, g.bias64 + n);
  const __m512d bias_hi = _mm512_maskz_loadu_pd(hi, g.bias64 + n + 8);
  for (int r = 0; r < rows; ++r) {
    kiln::runtime::RequantizeStore16(_mm512_add_epi32(acc[r][v], corr), scale_lo, scale_hi,
                                     bias_lo, bias_hi, g.requant, mask,
                                     g.out_u8 + (m0 + r) * g.cols + n);
  }
}

// Steps 1 to 3 for MR rows from m0 and NV column blocks from block b0.
template <int MR, int NV>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniTile(const Gemm& g, int64_t m0,
                                                                     int64_t b0) {
  const int64_t full = g.depth / kGroup, tail = g.depth % kGroup;
  const int8_t* w = g.w + b0 * g.block_bytes();
  const uint8_t* x[MR];
  for (int r = 0; r < MR; ++r) x[r] = g.x + (m0 + r) * g.depth;
  __m512i acc[MR][NV];
  if constexpr (MR == kMr && NV == kNv) {
    FullTileSums(x, w, g.block_bytes(), g.depth, acc);
  } else {
    for (int r = 0; r < MR; ++r) {
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_si512();
    }
    for (int64_t q = 0; q <= full; ++q) {
      if (q == full && tail == 0) break;
      __m512i wv[NV];
      for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_si512(w + v * g.block_bytes() + q * 64);
      for (int r = 0; r < MR; ++r) {
        const uint8_t* p = x[r] + q * kGroup;
        const __m512i a = _mm512_set1_epi32(q < full ? Word(p) : PartialWord(p, tail));
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], a, wv[v]);
      }
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int64_t n = (b0 + v) * kLanes;
    const int64_t left = g.cols - n;
    const __mmask16 mask = left >= kLanes ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __m512i corr = _mm512_maskz_loadu_epi32(mask, g.correction + n);
    if (g.out_u8 != nullptr) {
      StoreRequantized<NV>(g, n, mask, corr, acc, MR, v, m0);
      continue;
    }
    if (g.out_i32 != nullptr) {
      for (int r = 0; r < MR; ++r) {
        _mm512_mask_storeu_epi32(g.out_i32 + (m0 + r) * g.cols + n, mask,
                                 _mm512_add_epi32(acc[r][v], corr));
      }
      continue;
    }
    const __m512 scale = _mm512_maskz_loadu_ps(mask, g.scale + n);
    const __m512 bias = _mm512_maskz_loadu_ps(mask, g.bias + n);
    for (int r = 0; r < MR; ++r) {
      const __m512 f =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc[r][v], corr)), scale, bias);
      _mm512_mask_storeu_ps(g.out + (m0 + r) * g.cols + n, mask, f);
    }
  }
}

template <int MR>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniRows(const Gemm& g, int64_t m0,
                                                                     int64_t b0, int64_t nv) {
  switch (nv) {
    case 4:
      return VnniTile<MR, 4>(g, m0, b0);
    case 3:
      return VnniTile<MR, 3>(g, m0, b0);
    case 2:
      return VnniTile<MR, 2>(g, m0, b0);
    default:
      return VnniTile<MR, 1>(g, m0, b0);
  }
}

// Rows [m_begin, m_end) of the panel of `nv` column blocks from b0.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniItem(const Gemm& g, int64_t m_begin,
                                                                     int64_t m_end, int64_t b0,
                                                                     int64_t nv) {
  int64_t m = m_begin;
  for (; m + kMr <= m_end; m += kMr) VnniRows<kMr>(g, m, b0, nv);
  switch (m_end - m) {
    case 5:
      return VnniRows<5>(g, m, b0, nv);
    case 4:
      return VnniRows<4>(g, m, b0, nv);
    case 3:
      return VnniRows<3>(g, m, b0, nv);
    case 2:
      return VnniRows<2>(g, m, b0, nv);
    case 1:
      return VnniRows<1>(g, m, b0, nv);
    default:
      return;
  }
}

// The same sums from the same packing, one at a time.
void GenericItem(const Gemm& g, int64_t m_begin, int64_t m_end, int64_t b0, int64_t nv) {
  for (int64_t m = m_begin; m < m_end; ++m) {
    for (int64_t n = b0 * kLanes; n < std::min((b0 + nv) * kLanes, g.cols); ++n) {
      const int8_t* block = g.w + n / kLanes * g.block_bytes();
      int32_t sum = 0;
      for (int64_t k = 0; k < g.depth; ++k) {
        const int8_t wk = block[(k / kGroup * kLanes + n % kLanes) * kGroup + k % kGroup];
        sum += int32_t{g.x[m * g.depth + k]} * int32_t{wk};
      }
      if (g.out_u8 != nullptr) {
        g.out_u8[m * g.cols + n] = kiln::runtime::RequantizeOne(
            sum + g.correction[n], g.scale64[n], g.bias64[n], g.requant);
      } else if (g.out_i32 != nullptr) {
        g.out_i32[m * g.cols + n] = sum + g.correction[n];
      } else {
        g.out[m * g.cols + n] =
            std::fma(static_cast<float>(sum + g.correction[n]), g.scale[n], g.bias[n]);
      }
    }
  }
}

using ItemFn = void (*)(const Gemm&, int64_t, int64_t, int64_t, int64_t);

ItemFn ForThisCpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    return VnniItem;
  }
  return GenericItem;
}

struct Work {
  const Gemm* g;
  ItemFn item;
  int64_t row_items;  // per panel
};

void RunWork(void* closure, int64_t begin, int64_t end) {
  const Work& work = *static_cast<const Work*>(closure);
  const Gemm& g = *work.g;
  constexpr int64_t kItemRows = kRowTilesPerItem * kMr;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b0 = i / work.row_items * kNv;
    const int64_t m0 = i % work.row_items * kItemRows;
    work.item(g, m0, std::min(m0 + kItemRows, g.rows), b0, std::min<int64_t>(kNv, g.blocks() - b0));
  }
}

// --- AMX ---------------------------------------------------------------
// Where the host has AMX-INT8 (and Linux grants the process its tile
// state), the part of the product made of whole 32 x 32 output blocks runs
// on tdpbusd, K a multiple of 64: each 16 x 16 int32 C tile takes 16 rows x
// 64 K bytes of x, read in place (rows `depth` bytes apart), times 16 K
// groups x 16 columns x 4 bytes of the weight, which is exactly one K range
// of a column block of the packing above. 2 x 2 C tiles, 2 A and 2 B tiles
// use all 8 tile registers; per 64 K values 4 tdpbusd make 65536 MACs. Rows
// and columns past the last whole block run the VNNI tiles.

constexpr int64_t kAmxBlock = 32;         // rows and columns of one 2 x 2 tile block
constexpr int64_t kAmxK = 64;             // K bytes per A tile row
constexpr int64_t kAmxItemRowBlocks = 4;  // row blocks per work item

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  uint8_t reserved1[16] = {};
};

bool HostRunsAmx() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = (edx >> 24) & 1, int8 = (edx >> 25) & 1;
  if (!tile || !int8) return false;
  // Linux hands out AMX's 8 KB of tile state only on request (ARCH_REQ_XCOMP_PERM).
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// One 32 x 32 block from row m0 and column block b0 (of 16).
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw"))) void AmxBlock(const Gemm& g,
                                                                            int64_t m0,
                                                                            int64_t b0) {
  const int64_t bb = g.block_bytes();
  const uint8_t* x0 = g.x + m0 * g.depth;
  const uint8_t* x1 = x0 + 16 * g.depth;
  const int8_t* w0 = g.w + b0 * bb;
  const int8_t* w1 = w0 + bb;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k0 = 0; k0 < g.depth; k0 += kAmxK) {
    _tile_loadd(4, x0 + k0, g.depth);
    _tile_loadd(5, x1 + k0, g.depth);
    _tile_loadd(6, w0 + k0 * kLanes, kGroup * kLanes);  // K group k0 / 4, 64 bytes each
    _tile_loadd(7, w1 + k0 * kLanes, kGroup * kLanes);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) int32_t c[4][16][16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  for (int t = 0; t < 4; ++t) {
    const int64_t n = (b0 + t % 2) * kLanes;
    const __m512i corr = _mm512_loadu_si512(g.correction + n);
    if (g.out_u8 != nullptr) {
      const __m512d scale_lo = _mm512_loadu_pd(g.scale64 + n);
      const __m512d scale_hi = _mm512_loadu_pd(g.scale64 + n + 8);
      const __m512d bias_lo = _mm512_loadu_pd(g.bias64 + n);
      const __m512d bias_hi = _mm512_loadu_pd(g.bias64 + n + 8);
      for (int i = 0; i < 16; ++i) {
        const int64_t m = m0 + t / 2 * 16 + i;
        kiln::runtime::RequantizeStore16(_mm512_add_epi32(_mm512_load_si512(c[t][i]), corr),
                                         scale_lo, scale_hi, bias_lo, bias_hi, g.requant,
                                         __mmask16(0xffff), g.out_u8 + m * g.cols + n);
      }
      continue;
    }
    if (g.out_i32 != nullptr) {
      for (int i = 0; i < 16; ++i) {
        const int64_t m = m0 + t / 2 * 16 + i;
        _mm512_storeu_si512(g.out_i32 + m * g.cols + n,
                            _mm512_add_epi32(_mm512_load_si512(c[t][i]), corr));
      }
      continue;
    }
    const __m512 scale = _mm512_loadu_ps(g.scale + n), bias = _mm512_loadu_ps(g.bias + n);
    for (int i = 0; i < 16; ++i) {
      const int64_t m = m0 + t / 2 * 16 + i;
      const __m512i sum = _mm512_add_epi32(_mm512_load_si512(c[t][i]), corr);
      _mm512_storeu_ps(g.out + m * g.cols + n,
                       _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, bias));
    }
  }
}

struct AmxWork {
  const Gemm* g;
  int64_t row_blocks;  // of 32 rows
  int64_t col_blocks;  // of 32 columns
  int64_t row_items;   // per column block
};

// Each work item is one column block down kAmxItemRowBlocks row blocks: its
// 32 columns of weights (24 KB at K = 768) stay in L1 while x's rows stream.
__attribute__((target("amx-tile,amx-int8"))) void RunAmx(void* closure, int64_t begin,
                                                         int64_t end) {
  const AmxWork& work = *static_cast<const AmxWork*>(closure);
  TileConfig config;  // tile state is per thread: configured on each
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t c = i / work.row_items;
    const int64_t r0 = i % work.row_items * kAmxItemRowBlocks;
    for (int64_t r = r0; r < std::min(r0 + kAmxItemRowBlocks, work.row_blocks); ++r) {
      AmxBlock(*work.g, r * kAmxBlock, c * (kAmxBlock / kLanes));
    }
  }
  _tile_release();
}

// The VNNI tiles' share: rows [m_begin, m_end) x column blocks [b_begin, b_end).
struct Region {
  int64_t m_begin, m_end, b_begin, b_end;
};

struct RegionWork {
  const Gemm* g;
  ItemFn item;
  std::vector<Region> items;
};

void RunRegions(void* closure, int64_t begin, int64_t end) {
  const RegionWork& work = *static_cast<const RegionWork*>(closure);
  for (int64_t i = begin; i < end; ++i) {
    const Region& r = work.items[i];
    for (int64_t b = r.b_begin; b < r.b_end; b += kNv) {
      work.item(*work.g, r.m_begin, r.m_end, b, std::min<int64_t>(kNv, r.b_end - b));
    }
  }
}

// Rows [m_begin, m_end) x column blocks [b_begin, b_end) as VNNI work items.
void AddRegions(int64_t m_begin, int64_t m_end, int64_t b_begin, int64_t b_end,
                std::vector<Region>& out) {
  constexpr int64_t kItemRows = kRowTilesPerItem * kMr;
  for (int64_t b = b_begin; b < b_end; b += kNv) {
    for (int64_t m = m_begin; m < m_end; m += kItemRows) {
      out.push_back({m, std::min(m + kItemRows, m_end), b, std::min(b + kNv, b_end)});
    }
  }
}

void Run(const Gemm& g) {
  static const ItemFn item = ForThisCpu();
  static const bool amx = item == VnniItem && HostRunsAmx();
  if (g.rows <= 0 || g.cols <= 0) return;
  const int64_t row_blocks = g.rows / kAmxBlock, col_blocks = g.cols / kAmxBlock;
  if (amx && g.depth % kAmxK == 0 && row_blocks > 0 && col_blocks > 0) {
    AmxWork work{&g, row_blocks, col_blocks,
                 (row_blocks + kAmxItemRowBlocks - 1) / kAmxItemRowBlocks};
    kiln_parallel_for(RunAmx, &work, col_blocks * work.row_items);
    RegionWork rest{&g, item, {}};
    const int64_t amx_rows = row_blocks * kAmxBlock, amx_blocks = col_blocks * 2;
    AddRegions(amx_rows, g.rows, 0, g.blocks(), rest.items);
    AddRegions(0, amx_rows, amx_blocks, g.blocks(), rest.items);
    kiln_parallel_for(RunRegions, &rest, static_cast<int64_t>(rest.items.size()));
    return;
  }
  constexpr int64_t kItemRows = kRowTilesPerItem * kMr;
  const int64_t panels = (g.blocks() + kNv - 1) / kNv;
  Work work{&g, item, (g.rows + kItemRows - 1) / kItemRows};
  kiln_parallel_for(RunWork, &work, panels * work.row_items);
}

}  // namespace

extern "C" void kiln_qmatmul_u8s8(float* out, const uint8_t* x, const int8_t* w,
                                  const int32_t* correction, const float* scale, const float* bias,
                                  int64_t rows, int64_t depth, int64_t cols) {
  Gemm g{};
  g.x = x, g.w = w, g.correction = correction, g.scale = scale, g.bias = bias, g.out = out;
  g.rows = rows, g.depth = depth, g.cols = cols;
  Run(g);
}

extern "C" void kiln_qmatmul_u8s8_i32(int32_t* out, const uint8_t* x, const int8_t* w,
                                      const int32_t* correction, int64_t rows, int64_t depth,
                                      int64_t cols) {
  Gemm g{};
  g.x = x, g.w = w, g.correction = correction, g.out_i32 = out;
  g.rows = rows, g.depth = depth, g.cols = cols;
  Run(g);
}

extern "C" void kiln_qmatmul_u8s8_q8(uint8_t* out, const uint8_t* x, const int8_t* w,
                                     const int32_t* correction, const double* scale,
                                     const double* bias, const double* requant, int64_t rows,
                                     int64_t depth, int64_t cols) {
  Gemm g{};
  g.x = x, g.w = w, g.correction = correction, g.scale64 = scale, g.bias64 = bias;
  g.requant = Requant::From(requant), g.out_u8 = out;
  g.rows = rows, g.depth = depth, g.cols = cols;
  Run(g);
}
