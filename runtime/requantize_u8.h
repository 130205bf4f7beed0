// The requantising store of the integer kernels (kiln_qconv_u8s8_q8,
// kiln_qmatmul_u8s8_q8, common/kernel_abi.h): an exact int32 sum becomes the
// next layer's uint8 activation as a fake-quant model defines it, in float64:
//   t = clamp(sum * scale + bias, low, high)       (a Relu or Clip, or none)
//   q = clamp(round_half_even(t / y_scale) + zero, q_low, q_high)
// Why float64: in float32 the scaled value, rounded, then divided by y_scale
// and rounded again, lands within ~1e-7 of a .5 boundary often enough that a
// resnet18 flips a few hundred activations, and a flip early in the network
// grew to two quantisation steps at its output (the model zoo's
// qdq_resnet18). In float64 each step errs by under 2^-52 relative, and
// the fake-quant reference's own float64 sums by more. t / y_scale rounds as
// a true division does (see Requantize8), as the reference's.
#ifndef KILN_RUNTIME_REQUANTIZE_U8_H_
#define KILN_RUNTIME_REQUANTIZE_U8_H_

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln::runtime {

// The six float64 values of a kernel's `requant` operand, in this order.
// zero, q_low and q_high include the offset of int8 values read as uint8.
struct Requant {
  double y_scale, low, high, zero, q_low, q_high;
  static Requant From(const double* p) { return {p[0], p[1], p[2], p[3], p[4], p[5]}; }
};

inline uint8_t RequantizeOne(int32_t sum, double scale, double bias, const Requant& r) {
  const double t =
      std::min(std::max(std::fma(static_cast<double>(sum), scale, bias), r.low), r.high);
  const double q = std::nearbyint(t / r.y_scale) + r.zero;
  return static_cast<uint8_t>(std::min(std::max(q, r.q_low), r.q_high));
}

// Eight lanes of the same, to int32. A division per lane costs the conv
// kernels more than their products at small K (vdivpd zmm issues every 16
// cycles), so the quotient is t * (1 / y_scale), divided only in the lanes
// within 2^-20 of a .5 boundary. The product errs from the exact quotient by
// at most 2^-51 relative, under 2^-21 while |quotient| < 2^30, so elsewhere
// it rounds as the quotient does; past 2^30 the value saturates whatever
// the rounding (zero and the bounds lie within 2^9 of 0).
__attribute__((target("avx512f"))) inline __m256i Requantize8(__m256i sum, __m512d scale,
                                                              __m512d bias, const Requant& r) {
  __m512d t = _mm512_fmadd_pd(_mm512_cvtepi32_pd(sum), scale, bias);
  t = _mm512_min_pd(_mm512_max_pd(t, _mm512_set1_pd(r.low)), _mm512_set1_pd(r.high));
  __m512d v = _mm512_mul_pd(t, _mm512_set1_pd(1.0 / r.y_scale));
  const __m512d fraction =
      _mm512_sub_pd(v, _mm512_roundscale_pd(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
  const __mmask8 near_half =
      _mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(fraction, _mm512_set1_pd(0.5))),
                         _mm512_set1_pd(0x1p-20), _CMP_LT_OQ);
  if (near_half != 0) v = _mm512_mask_div_pd(v, near_half, t, _mm512_set1_pd(r.y_scale));
  __m512d q = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm512_add_pd(q, _mm512_set1_pd(r.zero));
  q = _mm512_min_pd(_mm512_max_pd(q, _mm512_set1_pd(r.q_low)), _mm512_set1_pd(r.q_high));
  return _mm512_cvtpd_epi32(q);
}

// Sixteen lanes stored as bytes at `out` where `mask` says; the scale and
// bias of lanes 0-7 in *_lo, 8-15 in *_hi.
__attribute__((target("avx512f"))) inline void RequantizeStore16(__m512i sum, __m512d scale_lo,
                                                                 __m512d scale_hi, __m512d bias_lo,
                                                                 __m512d bias_hi, const Requant& r,
                                                                 __mmask16 mask, uint8_t* out) {
  const __m256i lo = Requantize8(_mm512_castsi512_si256(sum), scale_lo, bias_lo, r);
  const __m256i hi = Requantize8(_mm512_extracti64x4_epi64(sum, 1), scale_hi, bias_hi, r);
  _mm512_mask_cvtepi32_storeu_epi8(out, mask,
                                   _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_REQUANTIZE_U8_H_
