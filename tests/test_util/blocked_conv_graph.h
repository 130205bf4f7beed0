// A conv in 16-channel blocks as ConvertLayoutNchwc writes one, for tests
// that compile it directly: its shape, its weights packed from OIHW by the
// layout's definition (independently of the compiler's packing), and the
// graph relu(conv + bias) between layout_transforms.
#ifndef KILN_TESTS_TEST_UTIL_BLOCKED_CONV_GRAPH_H_
#define KILN_TESTS_TEST_UTIL_BLOCKED_CONV_GRAPH_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compiler/ir/graph.h"
#include "tests/test_util/graph_building.h"

namespace kiln::testing {

inline constexpr int64_t kChannelBlock = 16;

struct BlockedConvShape {
  int64_t n, c, h, w, o, k, stride, pad;
  // The input's channel block: 16, or all of C when fewer (a stem's 3).
  int64_t in_block() const { return std::min(c, kChannelBlock); }
};

// OIHW -> O/16, C/cb, KH, KW, cb (in), 16 (out), zero past C and O.
inline std::vector<float> PackBlockedConvWeight(const std::vector<float>& w,
                                                const BlockedConvShape& p) {
  const int64_t ib = p.in_block();
  const int64_t cb = (p.c + ib - 1) / ib, ob = (p.o + kChannelBlock - 1) / kChannelBlock;
  std::vector<float> out(ob * cb * p.k * p.k * ib * kChannelBlock, 0.0f);
  for (int64_t o = 0; o < p.o; ++o)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t y = 0; y < p.k; ++y)
        for (int64_t x = 0; x < p.k; ++x) {
          const int64_t dst =
              ((((o / kChannelBlock * cb + c / ib) * p.k + y) * p.k + x) * ib + c % ib) *
                  kChannelBlock +
              o % kChannelBlock;
          out[dst] = w[((o * p.c + c) * p.k + y) * p.k + x];
        }
  return out;
}

// NCHW x -> NCHW16c -> relu(conv2d_nchwc(x, w, bias)) -> NCHW, with `w`
// (OIHW) and `bias` (O) packed into blocks.
inline Graph BlockedConvReluGraph(const BlockedConvShape& p, const std::vector<float>& w,
                                  const std::vector<float>& bias) {
  const int64_t ib = p.in_block();
  const int64_t ob = (p.o + kChannelBlock - 1) / kChannelBlock, cb = (p.c + ib - 1) / ib;
  std::vector<float> blocked_bias(ob * kChannelBlock, 0.0f);
  std::copy(bias.begin(), bias.end(), blocked_bias.begin());
  Graph g;
  Node* in = g.AddInput("x", {DType::kFloat32, {p.n, p.c, p.h, p.w}});
  Node* blocked = Op(g, "layout_transform", {in}, LayoutTransformAttrs{0, ib, 0});
  Conv2DAttrs a;
  a.strides = {p.stride, p.stride};
  a.padding = {p.pad, p.pad, p.pad, p.pad};
  Node* weight = g.AddConstant(
      "w", FloatValues({ob, cb, p.k, p.k, ib, kChannelBlock}, PackBlockedConvWeight(w, p)));
  Node* b = g.AddConstant("b", FloatValues({ob, kChannelBlock}, blocked_bias));
  Node* relu = Op(g, "relu", {Op(g, "conv2d_nchwc", {blocked, weight, b}, a)});
  g.AddOutput(Op(g, "layout_transform", {relu}, LayoutTransformAttrs{kChannelBlock, 0, p.o}));
  return g;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_BLOCKED_CONV_GRAPH_H_
