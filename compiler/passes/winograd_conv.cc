// WinogradConv: conv2d_nchwc -> conv2d_nchwc_winograd_f2/_f3/_f4 where it pays.
//
// Design note
// -----------
// A 3x3 conv at stride 1 does 9 multiply-adds per output and input channel.
// Winograd's F(m x m, 3x3) (Lavin and Gray, 2015) computes an m x m tile of
// outputs from an alpha x alpha tile of inputs (alpha = m + 2) with alpha^2:
// each input tile is transformed (V = Bt d B), multiplied element by element
// with the transformed weights (U = G g Gt, computed at compile time) and
// summed over input channels -- alpha^2 independent GEMMs of tiles x
// channels x outputs -- and the products transformed back (Y = At M A).
// F(2x2, 3x3): 16 per 4 outputs, 2.25x fewer multiply-adds; F(3x3, 3x3): 25
// per 9, 3.24x; F(4x4, 3x3): 36 per 16, 4x fewer; for two transforms (adds,
// memory-bound) and 16/9, 25/9 or 36/9 the weights. TVM and NNPACK pick it per conv the same way
// (TVM's op strategy and its tuner); ONNX Runtime's MLAS has no Winograd convs.
//
// Which m (PassConfig::winograd_tile): F(4x4, 3x3) rounds far more than
// the direct sum -- its transforms scale by up to 8 and 1/24, and the
// products it sums cancel -- and F(2x2, 3x3) hardly more. Measured against
// float64 on 256-channel tiles (uniform inputs, error over the sum of
// |x| |w|): direct 0.9e-8, F(2x2) 3.6e-8, F(3x3) 1.1e-7, F(4x4) 3.6e-7 to
// 3.8e-7 (other points, 0, -1, 1, 1/2, -2, moved it by 5%). On the zoo's
// fcn_resnet50 (against float64; tolerance twice PyTorch's own float32
// error, 2.2e-4) the direct convs gave 1.04e-4, F(2x2) 1.01e-4, F(3x3)
// 1.51e-4 and F(4x4) 2.58e-4. So F(2x2, 3x3) is the default, and F(3x3)
// and F(4x4) are choices for whom that error is fine. A conv where the
// chosen m does not pay or fit the caps below takes the next smaller one.
//
// The estimate (WinogradPaysOff), in cycles of one core, with F = 64 FLOPs
// a cycle (two 16-lane FMA ports):
//     direct   = max(2 * 9 * outputs * C * O / F / 0.92,  weight bytes / 16)
//     winograd = max(2 * alpha^2 * tiles * C * O / F / 0.85,
//                    alpha^2/9 x weight bytes / 16)
//                + 100 alpha^2 / 36 cycles per input tile and block of 16
//                  channels + 80 alpha^2 / 36 per output tile and block
// where 0.92 and 0.85 are the fractions of the FMA peak the direct conv and
// the short-K GEMMs reach, 16 bytes a cycle is the weights' stream from L3
// or memory, and the transform costs are about one cycle per vector load,
// store and add of a tile's lines. A ragged edge (14x14 outputs in 4x4
// tiles compute 16x16) counts whole tiles. Winograd is taken when it is at
// most 0.8 of direct, and its weights fit kMaxWinogradWeightBytes: that
// keeps resnet18's 512-channel 7x7 convs from F(4x4, 3x3) and F(3x3, 3x3)
// (36 and 25 MiB each, from memory on every call at batch 1), while
// F(2x2, 3x3)'s 16 MiB is the cap itself and ran faster (AMD EPYC, Zen 5,
// 1 thread: 0.92 -> 0.61 ms each).
//
// Nor may V and M outgrow kMaxWinogradWorkspaceBytes (large images).
//
// `--disable-passes WinogradConv`, opt level 1 or winograd_tile 0 keeps
// every conv direct.
#include "compiler/passes/winograd_conv.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"

namespace kiln {
namespace {

bool IsCandidate(const Node& n) {
  if (!n.is_op() || n.op->name != "conv2d_nchwc" || n.inputs.size() < 2) return false;
  if (!std::holds_alternative<Conv2DAttrs>(n.attrs)) return false;
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(n.attrs);
  const std::vector<int64_t>& w = n.inputs[1]->type.shape;
  if (w.size() != 6 || n.type.rank() != 5) return false;
  return a.groups == 1 && w[2] == 3 && w[3] == 3 && w[4] == 16 && w[5] == 16 && a.strides[0] == 1 &&
         a.strides[1] == 1 && a.dilation[0] == 1 && a.dilation[1] == 1 &&
         n.type.dtype == DType::kFloat32 && n.inputs[1]->is_constant();
}

absl::StatusOr<bool> WinogradConv(Graph& graph, const PassContext& ctx) {
  const int tile = ctx.config.winograd_tile;
  if (tile == 0) return false;
  bool changed = false;
  for (Node* n : graph.TopologicalOrder()) {
    if (!IsCandidate(*n)) continue;
    const std::vector<int64_t>& w = n->inputs[1]->type.shape;
    const std::vector<int64_t>& o = n->type.shape;
    // The chosen algorithm, or the largest smaller one that pays and fits.
    int m = tile;
    while (m >= 2 && !WinogradPaysOff(m, o[0], w[1] * 16, w[0] * 16, o[2], o[3])) --m;
    if (m < 2) continue;
    const OpDef* winograd = OpRegistry::Default().Find(absl::StrCat("conv2d_nchwc_winograd_f", m));
    if (winograd == nullptr) return absl::InternalError("conv2d_nchwc_winograd is not registered");
    Node* rewritten = graph.AddOp(n->name, winograd, n->inputs, n->attrs);
    rewritten->type = n->type;
    rewritten->type_known = true;
    graph.ReplaceAllUses(n, rewritten);
    changed = true;
  }
  if (changed) graph.RemoveDeadNodes();
  return changed;
}

}  // namespace

bool WinogradPaysOff(int tile, int64_t images, int64_t channels, int64_t outputs, int64_t height,
                     int64_t width) {
  constexpr double kFlopsPerCycle = 64, kBytesPerCycle = 16;
  const double alpha = tile + 2, products = alpha * alpha;
  const double c = static_cast<double>(channels), k = static_cast<double>(outputs);
  const double pixels = static_cast<double>(images * height * width);
  const double tiles =
      static_cast<double>(images * ((height + tile - 1) / tile) * ((width + tile - 1) / tile));
  const double weight_bytes = 9 * c * k * 4;
  if (products / 9 * weight_bytes > static_cast<double>(kMaxWinogradWeightBytes)) return false;
  if (products * tiles * (c + k) * 4 > static_cast<double>(kMaxWinogradWorkspaceBytes)) {
    return false;
  }
  const double direct =
      std::max(2 * 9 * pixels * c * k / kFlopsPerCycle / 0.92, weight_bytes / kBytesPerCycle);
  const double winograd = std::max(2 * products * tiles * c * k / kFlopsPerCycle / 0.85,
                                   products / 9 * weight_bytes / kBytesPerCycle) +
                          (100 * tiles * c / 16 + 80 * tiles * k / 16) * products / 36;
  return winograd <= 0.8 * direct;
}

std::unique_ptr<Pass> CreateWinogradConvPass() {
  return std::make_unique<FunctionPass>(PassInfo{"WinogradConv", 2, {"InferType"}}, WinogradConv);
}

}  // namespace kiln
