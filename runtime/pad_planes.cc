// kiln_pad_planes (common/kernel_abi.h): a conv's padded, phase-split input
// copy as precompiled code. Generated per conv, the same copy's loops (row
// ranges split at compile time, border selects, a vector body and remainder
// per range) took about a fifth of resnet18's codegen time, for a stage that
// is a few percent of its run time. Rows are short (7 to 230 floats), so the
// copy is plain loops that GCC vectorises for the widest ISA the host has
// (a copy per ISA, chosen once at the first call: not target_clones, whose
// ifunc resolver runs before a sanitizer's runtime starts and crashed every
// ThreadSanitizer binary), kept from turning back into memcpy and memset
// calls, whose per-call cost was 6-11% of a 28 x 28 conv.
#include <algorithm>
#include <cstdint>

#include "common/kernel_abi.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

namespace {

// Row yq of phase (py, px) for each plane: see the ABI's comment. Inlined
// into each ISA's copy below, which compiles it for that ISA.
__attribute__((always_inline)) inline void PadPlanesBody(
    float* dst, const float* src, int64_t planes, int64_t h, int64_t w, int64_t sy, int64_t sx,
    int64_t hq, int64_t wq, int64_t pt, int64_t pl, int64_t y_begin, int64_t y_end) {
  const int64_t phase = hq * wq;
  for (int64_t c = 0; c < planes; ++c) {
    const float* plane = src + c * h * w;
    float* out = dst + c * sy * sx * phase;
    for (int64_t py = 0; py < sy; ++py) {
      for (int64_t px = 0; px < sx; ++px) {
        // The inside run of columns: xq with 0 <= xq * sx + px - pl < w.
        const int64_t first = pl - px, last = w - 1 + pl - px;
        const int64_t lo = std::min(first <= 0 ? 0 : (first + sx - 1) / sx, wq);
        const int64_t hi = std::max(lo, std::min(last < 0 ? 0 : last / sx + 1, wq));
        float* phase_out = out + (py * sx + px) * phase;
        for (int64_t yq = y_begin; yq < y_end; ++yq) {
          const int64_t y = yq * sy + py - pt;
          float* row = phase_out + yq * wq;
          if (y < 0 || y >= h) {
            for (int64_t i = 0; i < wq; ++i) row[i] = 0.0f;
            continue;
          }
          for (int64_t i = 0; i < lo; ++i) row[i] = 0.0f;
          const float* from = plane + y * w + lo * sx + px - pl;
          if (sx == 1) {
            for (int64_t i = lo; i < hi; ++i) row[i] = from[i - lo];
          } else if (sx == 2) {
            for (int64_t i = lo; i < hi; ++i) row[i] = from[2 * (i - lo)];
          } else {
            for (int64_t i = lo; i < hi; ++i) row[i] = from[sx * (i - lo)];
          }
          for (int64_t i = hi; i < wq; ++i) row[i] = 0.0f;
        }
      }
    }
  }
}

using PadPlanesFn = void (*)(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                             int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

#define KILN_PAD_PLANES_FOR(NAME, TARGET)                                                     \
  TARGET void NAME(float* dst, const float* src, int64_t planes, int64_t h, int64_t w,        \
                   int64_t sy, int64_t sx, int64_t hq, int64_t wq, int64_t pt, int64_t pl,     \
                   int64_t y_begin, int64_t y_end) {                                          \
    PadPlanesBody(dst, src, planes, h, w, sy, sx, hq, wq, pt, pl, y_begin, y_end);            \
  }
KILN_PAD_PLANES_FOR(PadPlanesAvx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
KILN_PAD_PLANES_FOR(PadPlanesAvx2, __attribute__((target("avx2,fma"))))
KILN_PAD_PLANES_FOR(PadPlanesGeneric, )
#undef KILN_PAD_PLANES_FOR

PadPlanesFn ForThisCpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return PadPlanesAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return PadPlanesAvx2;
  return PadPlanesGeneric;
}

}  // namespace

extern "C" void kiln_pad_planes(float* dst, const float* src, int64_t planes, int64_t h,
                                int64_t w, int64_t sy, int64_t sx, int64_t hq, int64_t wq,
                                int64_t pt, int64_t pl, int64_t y_begin, int64_t y_end) {
  static const PadPlanesFn pad = ForThisCpu();
  pad(dst, src, planes, h, w, sy, sx, hq, wq, pt, pl, y_begin, y_end);
}
