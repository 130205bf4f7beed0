// WinogradConv: the blocked 3x3 convs that Winograd's F(m x m, 3x3)
// computes faster (m = PassConfig::winograd_tile), rewritten as
// conv2d_nchwc_winograd_f2, _f3 or _f4 (lowered by lower/winograd_conv.cc). The
// estimate it decides by is WinogradPaysOff, here so it can be tested on
// its own.
#ifndef KILN_COMPILER_PASSES_WINOGRAD_CONV_H_
#define KILN_COMPILER_PASSES_WINOGRAD_CONV_H_

#include <cstdint>
#include <memory>

#include "compiler/pass/pass.h"

namespace kiln {

// The transformed weights' size above which a conv stays direct: F(m x m,
// 3x3) keeps (m + 2)^2 values per input and output channel (16, 25 or 36) where
// the conv keeps 9, and the model holds them for as long as it is loaded.
inline constexpr int64_t kMaxWinogradWeightBytes = int64_t{16} << 20;
// The most bytes the kernel's transformed input and products (V and M:
// (m + 2)^2 / m^2 = 4 or 2.25 times the input and the output) may take: a
// 1024x1024 image of 64 channels would want 2 GB of workspace where the
// direct conv wants its padded input.
inline constexpr int64_t kMaxWinogradWorkspaceBytes = int64_t{64} << 20;

// A 3x3, stride-1 conv of `images` images, `channels` in and `outputs` out
// (both whole blocks of 16), output `height` x `width`: whether F(tile x
// tile, 3x3) is estimated to take at most 0.8 of the direct conv's time
// (the estimate is in the .cc), its weights fit kMaxWinogradWeightBytes and
// its V and M kMaxWinogradWorkspaceBytes.
bool WinogradPaysOff(int tile, int64_t images, int64_t channels, int64_t outputs, int64_t height,
                     int64_t width);

std::unique_ptr<Pass> CreateWinogradConvPass();

}  // namespace kiln

#endif  // KILN_COMPILER_PASSES_WINOGRAD_CONV_H_
