// kiln_qconv_u8s8 (common/kernel_abi.h): a QDQ conv's products as uint8 x
// int8 in exact int32, on AVX512-VNNI's vpdpbusd.
//
// Design: a precompiled runtime microkernel, called once per conv, rather
// than vpdpbusd emitted into the generated loop nest. The loop nest's
// micro-kernel (contraction_emit.cc, llvm_emitter.cc) reduces one K value
// per step (broadcast A, FMA with a B vector); vpdpbusd reduces four at once
// from operands interleaved in groups of four, which changes the packing of
// both operands, the reduction's step, the accumulator type and the
// epilogue at every layout and tile the schedule knows. Here the layout is
// one and fixed, the code is compiled once for the ISA (no compile time per
// conv, like kiln_pad_planes), and it is tested alone against NumPy
// (tests/runtime/qconv_u8s8_test.sh). What it costs: epilogue ops after the
// conv run in a kernel of their own, except the requantisation to the next
// layer's uint8 (with a Relu or Clip before it), which kiln_qconv_u8s8_q8
// does in its store (step 3).
//
// Per image:
//   1. Pack: x, padded with x_zero, is read as im2col into
//        ap[p / 16][k / 4][p % 16][k % 4]   (uint8)
//      so each 64-byte vector holds 16 pixels x 4 reduction values, and
//      a pixel block's K groups follow one another (one stream per block).
//      Threads share the K groups; runs of pixels along an output row are
//      built with masked vector loads and stores (strides 1 and 2).
//   2. Tiles of MR = 4 output channels x NV = 4 pixel vectors (64 pixels):
//      16 int32 accumulators; per K group NV loads of ap, MR broadcasts of
//      4 weight bytes (weights are [co][kp] int8: already K-grouped) and 16
//      vpdpbusd. Pixel blocks x channel chunks are shared among threads.
//   3. Epilogue: + correction[n] (the zero point's term, computed at compile
//      time), to float, * scale[n] + bias[n] in one FMA (rounded once, as the
//      float conv's fused epilogue was), a masked store along the pixels.
//      kiln_qconv_u8s8_q8 instead requantises in float64 and stores uint8
//      (runtime/requantize_u8.h): a quarter of the bytes, no float pass.
// vpdpbusd does not saturate (vpdpbusds would); each four-product sum is
// below 2^17, so every int32 sum is exact while the conv's is.
// Measured alone on one core of this project's Xeon (kernel called in a loop,
// best of 30): resnet18's 3x3 convs at 112x112 input ran at 141-155 int8
// GMAC/s (0.19-0.29 ms each), the 7x7 stem at 152. If vpdpbusd zmm issues on
// one port, as on Ice Lake-class cores (an estimate, not measured here), that
// is close to 64 MACs per cycle at the clock this shared host gave.
// Hosts without VNNI get the same packing and plain loops: correct but slow,
// which is why the compiler only uses this kernel where the host has VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/kernel_abi.h"
#include "runtime/requantize_u8.h"

namespace {

using kiln::runtime::Requant;

constexpr int64_t kBlockPixels = 16;
constexpr int kGroup = kiln::abi::kQConvKGroup;
constexpr int kMr = 4;                 // output channels per tile
constexpr int kNv = 4;                 // pixel vectors per tile
// Output channels per tile when a conv has one pixel vector (resnet18's
// layer4 at 112x112 input: 4x4 pixels, 512 channels, K = 4608): 4 x 1
// tiles chained each accumulator's vpdpbusd on the one before it.
constexpr int kTallMr = 16;
constexpr int64_t kChannelChunk = 64;  // output channels per work item

struct Conv {
  int64_t c, h, w, co, kh, kw, sy, sx, pt, pl, dy, dx, oh, ow;
  int64_t x_zero;
  int64_t k() const { return c * kh * kw; }
  int64_t kq() const { return (k() + kGroup - 1) / kGroup; }
  int64_t pixels() const { return oh * ow; }
  int64_t blocks() const { return (pixels() + kBlockPixels - 1) / kBlockPixels; }
  // Bytes of one pixel block of ap.
  int64_t block_bytes() const { return kq() * kGroup * kBlockPixels; }
};

// The padded image: rows of `pw` bytes, x_zero outside x, big enough that
// every window position of every output pixel is inside.
struct Padded {
  std::vector<uint8_t> bytes;
  int64_t ph = 0, pw = 0;
};

void PadImage(const Conv& s, const uint8_t* x, Padded& p) {
  p.ph = std::max((s.oh - 1) * s.sy + (s.kh - 1) * s.dy + 1, s.pt + s.h);
  p.pw = std::max((s.ow - 1) * s.sx + (s.kw - 1) * s.dx + 1, s.pl + s.w);
  p.bytes.assign(s.c * p.ph * p.pw, static_cast<uint8_t>(s.x_zero));
  for (int64_t ci = 0; ci < s.c; ++ci) {
    for (int64_t y = 0; y < s.h; ++y) {
      std::memcpy(&p.bytes[(ci * p.ph + y + s.pt) * p.pw + s.pl], x + (ci * s.h + y) * s.w, s.w);
    }
  }
}

// One run of `n` <= 16 pixels from output column ox: word i = the bytes of
// rows r[0..3] at (ox + i) * sx.
void RunWords(const uint8_t* const* r, int64_t ox, int64_t n, int64_t sx, uint32_t* d) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (ox + i) * sx;
    d[i] = uint32_t{r[0][at]} | uint32_t{r[1][at]} << 8 | uint32_t{r[2][at]} << 16 |
           uint32_t{r[3][at]} << 24;
  }
}

// The same with masked loads and stores (which never touch the lanes left
// out), for strides 1 and 2: each row's bytes widened to words, shifted
// into place and combined. Scalar, a run was 6 to 16 scattered byte loads
// per word and the packing took 30-50% of a conv's time.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void RunWordsAvx512(const uint8_t* const* r,
                                                                         int64_t ox, int64_t n,
                                                                         int64_t sx, uint32_t* d) {
  if (sx > 2) return RunWords(r, ox, n, sx, d);
  const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
  __m512i word = _mm512_setzero_si512();
  for (int j = 0; j < kGroup; ++j) {
    __m128i bytes;
    if (sx == 1) {
      bytes = _mm_maskz_loadu_epi8(lanes, r[j] + ox);
    } else {  // the even bytes of 2n: the low byte of each 16-bit pair
      const __mmask32 pairs = static_cast<__mmask32>((uint64_t{1} << (2 * n)) - 1);
      bytes = _mm256_cvtepi16_epi8(_mm256_maskz_loadu_epi8(pairs, r[j] + 2 * ox));
    }
    word = _mm512_or_si512(word, _mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 8 * j));
  }
  _mm512_mask_storeu_epi32(d, lanes, word);
}

// Step 1. The four reduction values of group q at each pixel become one
// 32-bit word (byte j = value 4q + j), written a run of a block's pixels
// along an output row at a time.
// Groups [q_begin, q_end); `zeros` stands for rows past k (their weights
// are 0: any value will do) and holds ow * sx + 1 zero bytes.
template <void (*kRun)(const uint8_t* const*, int64_t, int64_t, int64_t, uint32_t*)>
void Pack(const Conv& s, const Padded& p, const uint8_t* zeros, int64_t q_begin, int64_t q_end,
          uint8_t* ap) {
  const int64_t k = s.k();
  const int64_t block_words = s.block_bytes() / 4;
  for (int64_t q = q_begin; q < q_end; ++q) {
    const uint8_t* plane[kGroup];
    int64_t offset[kGroup];  // of the window value within a padded plane
    for (int j = 0; j < kGroup; ++j) {
      const int64_t kk = q * kGroup + j;
      if (kk >= k) {
        plane[j] = nullptr;
        continue;
      }
      const int64_t ci = kk / (s.kh * s.kw), ky = kk / s.kw % s.kh, kx = kk % s.kw;
      plane[j] = p.bytes.data() + ci * p.ph * p.pw;
      offset[j] = ky * s.dy * p.pw + kx * s.dx;
    }
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const uint8_t* r[kGroup];
      for (int j = 0; j < kGroup; ++j) {
        r[j] = plane[j] == nullptr ? zeros : plane[j] + oy * s.sy * p.pw + offset[j];
      }
      for (int64_t ox = 0; ox < s.ow;) {
        const int64_t px = oy * s.ow + ox;
        const int64_t run = std::min(s.ow - ox, kBlockPixels - px % kBlockPixels);
        kRun(r, ox, run, s.sx,
             reinterpret_cast<uint32_t*>(ap) + px / kBlockPixels * block_words + q * kBlockPixels +
                 px % kBlockPixels);
        ox += run;
      }
    }
  }
}

struct Call {
  const Conv* s;
  const uint8_t* ap;
  const int8_t* w;
  const int32_t* correction;
  const float* scale;
  const float* bias;
  float* out;  // this image's
  // Or, for kiln_qconv_u8s8_q8, the requantising store's (this image's out).
  const double* scale64;
  const double* bias64;
  Requant requant;
  uint8_t* out_u8;
};

int32_t WeightWord(const int8_t* w) {
  int32_t v;
  std::memcpy(&v, w, sizeof(v));
  return v;
}

// The full tile's sums, its 16 accumulators in named variables: with an
// array GCC 12 copied each of them between registers every K group, and
// with arrays as asm operands kept them on the stack (resnet18's convs ran
// at 140 and 90 int8 GMAC/s on one Xeon core).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void FullTileSums(
    const uint8_t* a, int64_t block_bytes, const int8_t* w, int64_t kp, int64_t kq, __m512i* acc) {
  __m512i c00 = acc[0], c01 = acc[1], c02 = acc[2], c03 = acc[3];
  __m512i c10 = acc[4], c11 = acc[5], c12 = acc[6], c13 = acc[7];
  __m512i c20 = acc[8], c21 = acc[9], c22 = acc[10], c23 = acc[11];
  __m512i c30 = acc[12], c31 = acc[13], c32 = acc[14], c33 = acc[15];
  const uint8_t *a0 = a, *a1 = a + block_bytes, *a2 = a + 2 * block_bytes,
                *a3 = a + 3 * block_bytes;
  const int8_t *w0 = w, *w1 = w + kp, *w2 = w + 2 * kp, *w3 = w + 3 * kp;
  for (int64_t q = 0; q < kq; ++q) {
    const __m512i x0 = _mm512_loadu_si512(a0 + q * 64), x1 = _mm512_loadu_si512(a1 + q * 64);
    const __m512i x2 = _mm512_loadu_si512(a2 + q * 64), x3 = _mm512_loadu_si512(a3 + q * 64);
    __m512i b = _mm512_set1_epi32(WeightWord(w0 + q * kGroup));
    c00 = _mm512_dpbusd_epi32(c00, x0, b);
    c01 = _mm512_dpbusd_epi32(c01, x1, b);
    c02 = _mm512_dpbusd_epi32(c02, x2, b);
    c03 = _mm512_dpbusd_epi32(c03, x3, b);
    b = _mm512_set1_epi32(WeightWord(w1 + q * kGroup));
    c10 = _mm512_dpbusd_epi32(c10, x0, b);
    c11 = _mm512_dpbusd_epi32(c11, x1, b);
    c12 = _mm512_dpbusd_epi32(c12, x2, b);
    c13 = _mm512_dpbusd_epi32(c13, x3, b);
    b = _mm512_set1_epi32(WeightWord(w2 + q * kGroup));
    c20 = _mm512_dpbusd_epi32(c20, x0, b);
    c21 = _mm512_dpbusd_epi32(c21, x1, b);
    c22 = _mm512_dpbusd_epi32(c22, x2, b);
    c23 = _mm512_dpbusd_epi32(c23, x3, b);
    b = _mm512_set1_epi32(WeightWord(w3 + q * kGroup));
    c30 = _mm512_dpbusd_epi32(c30, x0, b);
    c31 = _mm512_dpbusd_epi32(c31, x1, b);
    c32 = _mm512_dpbusd_epi32(c32, x2, b);
    c33 = _mm512_dpbusd_epi32(c33, x3, b);
  }
  acc[0] = c00, acc[1] = c01, acc[2] = c02, acc[3] = c03;
  acc[4] = c10, acc[5] = c11, acc[6] = c12, acc[7] = c13;
  acc[8] = c20, acc[9] = c21, acc[10] = c22, acc[11] = c23;
  acc[12] = c30, acc[13] = c31, acc[14] = c32, acc[15] = c33;
}

// Step 2 and 3 for MR channels from n0 and NV pixel vectors from block b0.
template <int MR, int NV>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniTile(const Call& c, int64_t n0,
                                                                     int64_t b0) {
  const Conv& s = *c.s;
  const int64_t kq = s.kq(), kp = kq * kGroup;
  const uint8_t* a = c.ap + b0 * s.block_bytes();
  __m512i acc[MR * NV];
  for (int i = 0; i < MR * NV; ++i) acc[i] = _mm512_setzero_si512();
  if constexpr (MR == 4 && NV == 4) {
    FullTileSums(a, s.block_bytes(), c.w + n0 * kp, kp, kq, acc);
  } else {
    for (int64_t q = 0; q < kq; ++q) {
      __m512i av[NV];
      for (int v = 0; v < NV; ++v) {
        av[v] = _mm512_loadu_si512(a + v * s.block_bytes() + q * 64);
      }
      for (int r = 0; r < MR; ++r) {
        const __m512i wv = _mm512_set1_epi32(WeightWord(c.w + (n0 + r) * kp + q * kGroup));
        for (int v = 0; v < NV; ++v) {
          acc[r * NV + v] = _mm512_dpbusd_epi32(acc[r * NV + v], av[v], wv);
        }
      }
    }
  }
  const int64_t pixels = s.pixels();
  if (c.out_u8 != nullptr) {
    for (int r = 0; r < MR; ++r) {
      const __m512i corr = _mm512_set1_epi32(c.correction[n0 + r]);
      const __m512d scale = _mm512_set1_pd(c.scale64[n0 + r]);
      const __m512d bias = _mm512_set1_pd(c.bias64[n0 + r]);
      uint8_t* row = c.out_u8 + (n0 + r) * pixels;
      for (int v = 0; v < NV; ++v) {
        const int64_t p = (b0 + v) * kBlockPixels;
        const int64_t left = pixels - p;
        const __mmask16 mask =
            left >= kBlockPixels ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
        kiln::runtime::RequantizeStore16(_mm512_add_epi32(acc[r * NV + v], corr), scale, scale,
                                         bias, bias, c.requant, mask, row + p);
      }
    }
    return;
  }
  for (int r = 0; r < MR; ++r) {
    const __m512i corr = _mm512_set1_epi32(c.correction[n0 + r]);
    const __m512 scale = _mm512_set1_ps(c.scale[n0 + r]);
    const __m512 bias = _mm512_set1_ps(c.bias[n0 + r]);
    float* row = c.out + (n0 + r) * pixels;
    for (int v = 0; v < NV; ++v) {
      const int64_t p = (b0 + v) * kBlockPixels;
      const int64_t left = pixels - p;
      const __mmask16 mask = left >= kBlockPixels ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      const __m512 f =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc[r * NV + v], corr)), scale, bias);
      _mm512_mask_storeu_ps(row + p, mask, f);
    }
  }
}

template <int MR>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniRows(const Call& c, int64_t n0,
                                                                     int64_t b0, int64_t nv) {
  switch (nv) {
    case 4:
      return VnniTile<MR, 4>(c, n0, b0);
    case 3:
      return VnniTile<MR, 3>(c, n0, b0);
    case 2:
      return VnniTile<MR, 2>(c, n0, b0);
    default:
      return VnniTile<MR, 1>(c, n0, b0);
  }
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniChunk(const Call& c,
                                                                      int64_t n_begin,
                                                                      int64_t n_end, int64_t b0,
                                                                      int64_t nv) {
  int64_t n = n_begin;
  if (nv == 1) {  // one pixel vector: more channels per tile (see kTallMr)
    for (; n + kTallMr <= n_end; n += kTallMr) VnniTile<kTallMr, 1>(c, n, b0);
  }
  for (; n + kMr <= n_end; n += kMr) VnniRows<kMr>(c, n, b0, nv);
  switch (n_end - n) {
    case 3:
      return VnniRows<3>(c, n, b0, nv);
    case 2:
      return VnniRows<2>(c, n, b0, nv);
    case 1:
      return VnniRows<1>(c, n, b0, nv);
    default:
      return;
  }
}

// The same sums from the same packing, one at a time.
void GenericChunk(const Call& c, int64_t n_begin, int64_t n_end, int64_t b0, int64_t nv) {
  const Conv& s = *c.s;
  const int64_t kq = s.kq(), kp = kq * kGroup, pixels = s.pixels();
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t b = b0; b < b0 + nv; ++b) {
      const uint8_t* a = c.ap + b * s.block_bytes();
      for (int64_t i = 0; i < kBlockPixels && b * kBlockPixels + i < pixels; ++i) {
        int32_t sum = 0;
        for (int64_t q = 0; q < kq; ++q) {
          for (int j = 0; j < kGroup; ++j) {
            sum += int32_t{a[(q * kBlockPixels + i) * kGroup + j]} *
                   int32_t{c.w[n * kp + q * kGroup + j]};
          }
        }
        const int64_t at = n * pixels + b * kBlockPixels + i;
        if (c.out_u8 != nullptr) {
          c.out_u8[at] = kiln::runtime::RequantizeOne(sum + c.correction[n], c.scale64[n],
                                                      c.bias64[n], c.requant);
        } else {
          c.out[at] = std::fma(static_cast<float>(sum + c.correction[n]), c.scale[n], c.bias[n]);
        }
      }
    }
  }
}

using ChunkFn = void (*)(const Call&, int64_t, int64_t, int64_t, int64_t);
using PackFn = void (*)(const Conv&, const Padded&, const uint8_t*, int64_t, int64_t, uint8_t*);

struct Isa {
  ChunkFn chunk;
  PackFn pack;
};

Isa ForThisCpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    return {VnniChunk, Pack<RunWordsAvx512>};
  }
  return {GenericChunk, Pack<RunWords>};
}

// Step 1 shared among threads by K groups.
struct PackWork {
  PackFn pack;
  const Conv* s;
  const Padded* padded;
  const uint8_t* zeros;
  uint8_t* ap;
};

void RunPack(void* closure, int64_t begin, int64_t end) {
  const PackWork& work = *static_cast<const PackWork*>(closure);
  work.pack(*work.s, *work.padded, work.zeros, begin, end, work.ap);
}

struct Work {
  const Call* call;
  ChunkFn chunk;
  int64_t tile_blocks;  // pixel blocks per work item
  int64_t channel_chunks;
};

void RunWork(void* closure, int64_t begin, int64_t end) {
  const Work& work = *static_cast<const Work*>(closure);
  const Conv& s = *work.call->s;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b0 = i / work.channel_chunks * work.tile_blocks;
    const int64_t n0 = i % work.channel_chunks * kChannelChunk;
    const int64_t nv = std::min(work.tile_blocks, s.blocks() - b0);
    work.chunk(*work.call, n0, std::min(n0 + kChannelChunk, s.co), b0, nv);
  }
}

// Both entry points: `epilogue` holds the scale, bias and output of the
// first image (its other fields are set here).
void RunConv(const Conv& s, const uint8_t* x, int64_t batch, const Call& epilogue) {
  static const Isa isa = ForThisCpu();
  thread_local Padded padded;
  thread_local std::vector<uint8_t> ap;
  thread_local std::vector<uint8_t> zeros;
  zeros.assign(s.ow * s.sx + 1, 0);
  ap.resize(s.blocks() * s.block_bytes());  // tail pixels: never stored
  const int64_t channel_chunks = (s.co + kChannelChunk - 1) / kChannelChunk;
  const int64_t pixel_tiles = (s.blocks() + kNv - 1) / kNv;
  const int64_t image_out = s.co * s.pixels();
  for (int64_t b = 0; b < batch; ++b) {
    PadImage(s, x + b * s.c * s.h * s.w, padded);
    PackWork pack{isa.pack, &s, &padded, zeros.data(), ap.data()};
    kiln_parallel_for(RunPack, &pack, s.kq());
    Call call = epilogue;
    call.s = &s;
    call.ap = ap.data();
    if (call.out != nullptr) call.out += b * image_out;
    if (call.out_u8 != nullptr) call.out_u8 += b * image_out;
    Work work{&call, isa.chunk, kNv, channel_chunks};
    kiln_parallel_for(RunWork, &work, pixel_tiles * channel_chunks);
  }
}

}  // namespace

extern "C" void kiln_qconv_u8s8(float* out, const uint8_t* x, const int8_t* w,
                                const int32_t* correction, const float* scale, const float* bias,
                                int64_t batch, int64_t c, int64_t h, int64_t w_in, int64_t co,
                                int64_t kh, int64_t kw, int64_t sy, int64_t sx, int64_t pt,
                                int64_t pl, int64_t dy, int64_t dx, int64_t oh, int64_t ow,
                                int64_t x_zero) {
  const Conv s{c, h, w_in, co, kh, kw, sy, sx, pt, pl, dy, dx, oh, ow, x_zero};
  Call epilogue{};
  epilogue.w = w;
  epilogue.correction = correction;
  epilogue.scale = scale;
  epilogue.bias = bias;
  epilogue.out = out;
  RunConv(s, x, batch, epilogue);
}

extern "C" void kiln_qconv_u8s8_q8(uint8_t* out, const uint8_t* x, const int8_t* w,
                                   const int32_t* correction, const double* scale,
                                   const double* bias, const double* requant, int64_t batch,
                                   int64_t c, int64_t h, int64_t w_in, int64_t co, int64_t kh,
                                   int64_t kw, int64_t sy, int64_t sx, int64_t pt, int64_t pl,
                                   int64_t dy, int64_t dx, int64_t oh, int64_t ow,
                                   int64_t x_zero) {
  const Conv s{c, h, w_in, co, kh, kw, sy, sx, pt, pl, dy, dx, oh, ow, x_zero};
  Call epilogue{};
  epilogue.w = w;
  epilogue.correction = correction;
  epilogue.scale64 = scale;
  epilogue.bias64 = bias;
  epilogue.requant = Requant::From(requant);
  epilogue.out_u8 = out;
  RunConv(s, x, batch, epilogue);
}
