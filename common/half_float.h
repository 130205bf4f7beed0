// IEEE half (float16) and bfloat16 to and from float, on the host: for
// constants, constant folding, the wire and test references. Kernels convert
// with the CPU's own instructions (F16C, AVX512-BF16); these give the same
// bits: round to nearest even, NaN kept NaN, overflow to infinity.
#ifndef KILN_COMMON_HALF_FLOAT_H_
#define KILN_COMMON_HALF_FLOAT_H_

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float BFloat16ToFloat(uint16_t h) { return FloatFromBits(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return FloatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return FloatFromBits(sign);
  // Subnormal half: normalise into float's range.
  int e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return FloatFromBits(sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13));
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu);  // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (magnitude >= 0x38800000u) {                       // normal half
    const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
  }
  if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal
  // Subnormal half: shift the full significand, rounding to nearest even.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14..24
  const uint32_t half_ulp = 1u << (shift - 1);
  const uint32_t remainder = significand & ((1u << shift) - 1);
  uint32_t result = significand >> shift;
  if (remainder > half_ulp || (remainder == half_ulp && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

}  // namespace kiln

#endif  // KILN_COMMON_HALF_FLOAT_H_
