// kiln_pad_planes against the definition in common/kernel_abi.h, element by
// element, over strides, paddings wider than the input and partial row
// ranges.
#include <cstdint>
#include <vector>

#include "common/kernel_abi.h"
#include "gtest/gtest.h"

namespace {

struct Geometry {
  int64_t planes, h, w, sy, sx, pt, pb, pl, pr;
};

// The padded, phase-split value of element (c, py, px, yq, xq): what the
// ABI's comment defines.
float Expected(const std::vector<float>& src, const Geometry& g, int64_t c, int64_t py, int64_t px,
               int64_t yq, int64_t xq) {
  const int64_t y = yq * g.sy + py - g.pt, x = xq * g.sx + px - g.pl;
  if (y < 0 || y >= g.h || x < 0 || x >= g.w) return 0.0f;
  return src[(c * g.h + y) * g.w + x];
}

void Check(const Geometry& g, int64_t y_begin, int64_t y_end_cut) {
  const int64_t hq = (g.h + g.pt + g.pb + g.sy - 1) / g.sy;
  const int64_t wq = (g.w + g.pl + g.pr + g.sx - 1) / g.sx;
  const int64_t y_end = hq - y_end_cut;
  std::vector<float> src(g.planes * g.h * g.w);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f + static_cast<float>(i);
  constexpr float kUntouched = -7.0f;
  std::vector<float> dst(g.planes * g.sy * g.sx * hq * wq, kUntouched);
  kiln_pad_planes(dst.data(), src.data(), g.planes, g.h, g.w, g.sy, g.sx, hq, wq, g.pt, g.pl,
                  y_begin, y_end);
  int64_t i = 0;
  for (int64_t c = 0; c < g.planes; ++c) {
    for (int64_t py = 0; py < g.sy; ++py) {
      for (int64_t px = 0; px < g.sx; ++px) {
        for (int64_t yq = 0; yq < hq; ++yq) {
          for (int64_t xq = 0; xq < wq; ++xq, ++i) {
            const float want =
                yq >= y_begin && yq < y_end ? Expected(src, g, c, py, px, yq, xq) : kUntouched;
            ASSERT_EQ(dst[i], want)
                << "plane " << c << " phase (" << py << ", " << px << ") row " << yq << " column "
                << xq << " of " << g.h << "x" << g.w << " stride " << g.sy << "x" << g.sx;
          }
        }
      }
    }
  }
}

TEST(PadPlanesTest, MatchesTheDefinitionOverStridesAndPaddings) {
  for (int64_t s = 1; s <= 4; ++s) {
    for (int64_t pad : {0, 1, 3}) {
      for (int64_t w : {1, 5, 17, 40}) {
        Check({2, 6, w, s, s, pad, pad, pad, pad}, 0, 0);
      }
    }
  }
}

TEST(PadPlanesTest, UnevenPaddingAndStrides) {
  Check({3, 7, 9, 2, 3, 0, 2, 3, 0}, 0, 0);
  Check({1, 4, 11, 1, 2, 2, 0, 0, 1}, 0, 0);
}

TEST(PadPlanesTest, PaddingWiderThanTheInputIsAllZerosAroundIt) {
  Check({1, 2, 2, 1, 1, 5, 5, 6, 6}, 0, 0);
  Check({1, 2, 3, 2, 2, 5, 4, 7, 3}, 0, 0);
}

TEST(PadPlanesTest, WritesOnlyItsRowRange) {
  Check({2, 9, 13, 1, 1, 1, 1, 1, 1}, 3, 4);
  Check({2, 9, 13, 2, 2, 1, 1, 1, 1}, 1, 1);
  Check({1, 9, 13, 3, 1, 2, 2, 0, 0}, 2, 0);
}

}  // namespace
