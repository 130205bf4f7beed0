// ConvertLayoutNchwc: conv chains in blocked channels (NCHW16c).
//
// Design note
// -----------
// Rewrites, in one walk over the graph in topological order, every float32
// conv2d with groups 1 and constant weights (and bias) into conv2d_nchwc,
// every depthwise one (groups = C = O) into conv2d_nchwc_depthwise, every
// grouped one whose groups lie within blocks (below) into
// conv2d_nchwc_grouped, and keeps their consumers in the blocked layout
// where they allow it:
//
//     x --T--> conv' --> relu' --> conv' --> add' --> max_pool' --T^-1--> flatten
//                \________________________________/
//   (T = layout_transform NCHW -> NCHW16c, T^-1 back; primes are blocked ops)
//
// What stays blocked: conv2d (as conv2d_nchwc or conv2d_nchwc_depthwise);
// relu, sigmoid, tanh, clip, hard_sigmoid, hard_swish, leaky_relu; add,
// sub, mul, div of two blocked values of one shape, of a blocked value and
// a blocked one value per (n, c) (a squeeze-excitation scale), or of a
// blocked value and a constant that is a scalar or per channel ((C, 1, 1)
// or (1, C, 1, 1), BatchNorm's scale and shift when FoldScaleAxis could not
// fold them) -- but never a blocked divisor (below); max_pool2d and
// avg_pool2d; sum and mean over H and W, kept (global pooling, whose
// (N, C/16, 1, 1, 16) result feeds an SE block's 1x1 convs blocked); a
// concat along the channels whose pieces, but the last, are whole blocks
// (a concat of blocks, still made in place at batch 1). So
// a MobileNetV3 is blocked from the stem conv to the pooled features:
//
//     x -T-> conv' -> dwconv' -> hard_sigmoid', mul' (hardswish) -+-> mul' -> conv' -> ...
//                                    mean' -> conv' -> relu' -> conv' -> hard_sigmoid' -/
//
// Per-channel constants are re-laid at compile time as (C/16, 1, 1, 16),
// padded with 0 (1 for a divisor), conv weights OIHW as O/16, C/c, KH, KW,
// c, 16, zero past O and C, depthwise weights (C, 1, KH, KW) as C/16, KH,
// KW, 16, grouped weights (O, w, KH, KW) as O/16, KH, KW, w, 16, biases as
// (O/16, 16). Everything else (flatten, dense, other
// concats, graph outputs) reads the NCHW value through one layout_transform
// back, made once per blocked value; a conv whose input is not blocked reads
// it through one transform forward. So transforms sit only at the
// boundaries of the blocked region, and FuseOps treats them as injective
// ops: the transform forward is a copy kernel of its own (0.13-0.15 ms for
// resnet18's image at batch 1), and so is the transform back after the last
// conv (FuseOps fuses only elementwise consumers into a conv's epilogue).
//
// The block is the host's vector (kLanes = 16 float32 lanes of a 512-bit
// register; lowering assumes that width) for every output; an input with
// fewer than 16 channels (an image's 3) is one block of all of them, so the
// stem conv reads NHWC instead of padding 3 channels to 16. The padded
// channels of a blocked value hold whatever the ops compute from zeros:
// finite for every op kept blocked, and multiplied by zero weights in the
// next conv, dropped by the transform back. (A blocked divisor would put
// 0/0 = NaN there, which zero weights do not cancel: it stays NCHW.)
//
// Compared with TVM's AlterOpLayout / ConvertLayout: TVM asks each op's
// strategy for its preferred layout and inserts layout_transforms on every
// mismatching edge, then cancels inverse pairs; this pass decides the region
// directly, forward only, with a fixed block. ORT's NCHWc transformer (MLAS)
// is the closer model: it also rewrites Conv to NchwcConv with packed
// weights, keeps elementwise ops, pools and BatchNorm blocked, and reorders
// only at the boundaries; it also takes the stem's NCHW input directly
// (an NCHW-input NchwcConv) and fuses the activation and residual add into
// the conv, which FuseOps does here.
//
// Grouped convs: with groups of w channels in and out (C = O), w dividing 16
// (RegNet's 8), every group lies inside one block, and output block b reads
// input block b alone: output lane k reads input lanes k / w * w + j (j < w)
// of its own block. That is conv2d_nchwc_grouped, weights (C/16, KH, KW, w,
// 16), lowered as register tiles like the depthwise conv
// (lower/blocked_depthwise.cc): per tap and j, each pixel's input line is
// permuted in registers (one load per line, LLVM's vpermilps + vpermpd) and
// multiplied by a weight vector. At w = 16 (a group a block) it is
// conv2d_nchwc with groups = C/16 instead (weights O/16, 1, KH, KW, 16, 16),
// whose GEMM broadcasts the channels from memory. Other grouped convs (groups
// wider than a block, or straddling blocks) stay NCHW, and kAuto leaves
// their graph alone. MLAS does not block grouped convs (ORT runs RegNet's
// NCHW). Measured on an AMD EPYC (Zen 5, AVX-512, 2 cores shared with other
// builds), regnet_y_400mf, 1 thread, the 16 grouped convs' kernel medians
// summed, alternating builds, 3 rounds:
//                          NCHW (gemm 1x64,   conv2d_nchwc, block-diagonal    grouped
//                          K = 72 per group)  16x16 weights (2x the FMAs)     op
//     batch 1              2.31 ms            1.44-1.49 ms                    1.10-1.14
//     batch 8              -                  11.9-12.1                       8.6-9.4
// (the model's p50 at batch 1, 1 thread: 5.5-5.7 ms with the block-diagonal
// GEMM, 5.1-5.4 with the grouped op). The whole model, p50 in ms on that
// host in a quiet spell, 2-5 alternating rounds (kiln-bench, ort_bench.js):
//                      --nchwc off   auto        ONNX Runtime 1.30
//     b1, 1 thread     6.0-6.2       4.8-4.9     6.8-6.9
//     b1, 2 threads    3.3-3.4       2.5-2.6     3.6-3.8
//     b8, 1 thread     47-49         38-39       56.4-56.5
//     b8, 2 threads    25.6-26.6     20.2-20.3   30.4
//
// When it runs (PassConfig::nchwc_layout): kOn converts every conv it can;
// kAuto only graphs of four or more convs, all of them convertible, every
// concat one of whole blocks, and only when the region needs at most
// 2 + convs / 10 transforms (FewTransforms): the image in and the
// classifier's features out, not a pair around every block. kAuto is the
// default.
//
// Channels-last stretches (ConvNeXt): each depthwise conv is followed by a
// permute to NHWC, a LayerNorm over the channels and the MLP, and a permute
// back, then the layer scale and the residual add:
//
//     r' -> dwconv' -T^-1-> permute(0,2,3,1) -> LN -> MLP -> permute(0,3,1,2) -T-> mul' -> add'
//      \_____________________________________________________________________________________/
//
// NHWC and NCHW16c both hold a pixel's 16 channels of a block contiguous,
// so a transform fused with its permute is a copy of whole vectors (once
// BlockLaneDividedVectorLoops makes the channels-last side read blocks):
// FewTransforms does not count them, the permute back is taken into blocks
// (its transform joins the layer scale and residual add in one kernel) and
// the residual stream stays blocked from the stem to the pooled features.
// convnext_tiny on an AMD EPYC (Zen 5), p50, 3 alternating rounds,
// --nchwc off against auto: b1 1 thread 43.3 -> 39.6 ms, b1 2 threads
// 22.7 -> 20.3, b8 1 thread 337 -> 303; the 18 depthwise convs went from
// 3.4 ms in NCHW to 1.0 ms blocked and the permutes' copies from 1.9 to
// 0.5 ms (b1, 1 thread). (Before, every permute cost a transform each way,
// and forced on the model was slower: 78 -> 90-92 ms on an Intel Xeon.)
// Measured on an Intel Xeon (AVX-512) shared with other jobs, builds
// without and with the pass alternating, 11 rounds; resnet18's sum of
// per-kernel medians, minimum (median) over the rounds, in ms:
//     batch 1, 1 thread     23.3 (31.9) -> 21.4 (22.5)
//     batch 1, 2 threads    25.0 (38.5) -> 22.8 (25.6)
//     batch 8, 1 thread      348 (456)  ->  261 (360)
//     batch 8, 2 threads     355 (610)  ->  286 (458)
// (per layer: lower/blocked_conv.cc). With depthwise convs blocked
// (lower/blocked_depthwise.cc) and SE blocks, hardswish and global pooling
// kept blocked, kiln-bench on the same "Intel(R) Xeon(R) Processor"
// (2 cores, load average 4-8 from other builds), the build before against
// this one alternating, 3 rounds; the minimum over the rounds of the sum of
// per-kernel medians, in ms:
//                              b1 1 thread  b1 2 threads  b8 1 thread  b8 2 threads
//     mobilenet_v2             5.51 -> 4.52  7.94 -> 5.34  52.3 -> 45.9  71.9 -> 44.8
//     mobilenet_v3_large       6.07 -> 4.16  7.40 -> 5.11  73.3 -> 43.4  69.0 -> 48.3
// regnet_y_400mf forced on, its grouped convs then still NCHW: 9.5-10.2 ->
// 10.0-11.3 ms (b1, 1 thread; grouped convs blocked: above). kAuto now
// also converts the model zoo's mobilenet_v3_small (sum 0.90-0.95 ->
// 0.45-0.48 ms, b1, 1 thread) and lraspp_mobilenet_v3_large (1.74-1.81 ->
// 1.07-1.25 ms; its head reads the features through 3 transforms), both
// within the zoo's tolerance of PyTorch; deeplabv3_mobilenet_v3_large has
// a concat (ASPP) and stays NCHW. Against ONNX Runtime 1.30 (MLAS NCHWc),
// bench/compare_models.py, best p50 of 2 rounds, kiln/ort, with the load
// average at 6 (every latency 3-4x its quiet value, so rough):
//                              b1 1 thread  b1 2 threads  b8 1 thread  b8 2 threads
//     mobilenet_v2             0.84         0.49          0.64         0.52
//     mobilenet_v3_large       0.87         0.58          1.06         0.52
// (at b8 the engine ran the batch as 8 slices of one row, so the two
// classifier dense layers streamed their 10 MB of weights 8 times; they
// now run once on the whole batch, engine/row_chunks.h's tail.)
#include "compiler/passes/convert_layout_nchwc.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int_math.h"
#include "common/status_macros.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"

namespace kiln {
namespace {

constexpr int64_t kBlock = 16;  // float32 lanes of the host vector (lower::kLanes)

std::shared_ptr<ConstantData> FloatData(std::vector<int64_t> shape, const std::vector<float>& v) {
  auto data = std::make_shared<ConstantData>();
  data->type = TensorType{DType::kFloat32, std::move(shape)};
  data->bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return data;
}

// Depthwise: one input channel per output channel, as many as the input's.
bool IsDepthwise(const Node& conv) {
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv.attrs);
  const std::vector<int64_t>& ws = conv.inputs[1]->type.shape;
  return a.groups > 1 && ws[1] == 1 && ws[0] == a.groups &&
         conv.inputs[0]->type.shape[1] == a.groups;
}

// Grouped within blocks: groups of the same width w in and out (C = O),
// w dividing the block, so every group lies inside one block of 16 channels
// and an output block reads the input block of its own index alone.
bool IsGroupedWithinBlocks(const Node& conv) {
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv.attrs);
  const std::vector<int64_t>& ws = conv.inputs[1]->type.shape;
  const int64_t width = ws[1];
  return a.groups > 1 && width > 1 && kBlock % width == 0 && ws[0] == a.groups * width &&
         conv.inputs[0]->type.shape[1] == ws[0];
}

// Whether `conv` becomes a conv2d_nchwc (or conv2d_nchwc_depthwise).
bool Convertible(const Node& conv) {
  const Conv2DAttrs& a = std::get<Conv2DAttrs>(conv.attrs);
  return (a.groups == 1 || IsDepthwise(conv) || IsGroupedWithinBlocks(conv)) &&
         conv.type.dtype == DType::kFloat32 && conv.inputs[1]->is_constant() &&
         (conv.inputs.size() < 3 || conv.inputs[2]->is_constant());
}

// Whether `concat` can join blocked values: along the channels of a float32
// NCHW value, every piece but the last a whole number of blocks, so the
// blocked concat is a concat of whole blocks (the last piece's padded
// channels land past the output's channels, where padding belongs).
bool ConcatKeepsBlocks(const Node& concat) {
  if (concat.type.rank() != 4 || concat.type.dtype != DType::kFloat32) return false;
  const int64_t axis = std::get<AxisAttrs>(concat.attrs).axis;
  if (axis != 1 && axis != -3) return false;
  for (size_t i = 0; i + 1 < concat.inputs.size(); ++i) {
    if (concat.inputs[i]->type.rank() != 4 || concat.inputs[i]->type.shape[1] % kBlock != 0) {
      return false;
    }
  }
  return true;
}

// A float32 transpose by `perm` whose channels (axis `channels` of its
// result) are whole blocks: between NCHW16c and NHWC, each pixel's 16
// channels of a block are contiguous in both layouts, so a transform fused
// with such a permute is a copy of whole vectors.
bool IsBlockAlignedPermute(const Node& n, const std::vector<int64_t>& perm, int channels) {
  return n.is_op() && n.op->name == "transpose" && n.type.rank() == 4 &&
         n.type.dtype == DType::kFloat32 && std::get<TransposeAttrs>(n.attrs).perm == perm &&
         n.type.shape[channels] % kBlock == 0;
}

// ConvNeXt's permute back to NCHW after its MLP.
bool IsChannelsLastToFirst(const Node& n) { return IsBlockAlignedPermute(n, {0, 3, 1, 2}, 1); }

// ConvNeXt's permute to channels-last before its LayerNorm.
bool IsChannelsFirstToLast(const Node& n) { return IsBlockAlignedPermute(n, {0, 2, 3, 1}, 3); }

// NchwcLayout::kAuto: graphs with at least kMinConvs convs, every one of
// them convertible (ResNet-style), and every concat one that keeps blocks.
// A grouped conv whose groups straddle blocks stays NCHW and cuts the blocked region with a
// transform each way; a concat that cannot stay blocked takes its inputs
// through transforms back, which FuseOps joins into the concat's kernel, so
// an inception block's branches could no longer write their slices in place
// (ConcatInPlace). A blocked concat at batch 1 is written in place as well:
// each block of channels is contiguous.
bool WinsOn(const Graph& graph) {
  constexpr int kMinConvs = 4;
  int convs = 0;
  for (const Node* n : graph.TopologicalOrder()) {
    if (n->is_op() && n->op->name == "concat" && !ConcatKeepsBlocks(*n)) return false;
    if (!n->is_op() || n->op->name != "conv2d") continue;
    if (!Convertible(*n)) return false;
    ++convs;
  }
  return convs >= kMinConvs;
}

// NchwcLayout::kAuto, once the region is known: at most two transforms
// (the input in, the classifier's read back) and one more per ten convs.
// A region that other ops cut into pieces pays a transform each way per
// piece -- except where the other side is channels-last (ConvNeXt's
// LayerNorm and MLP between its depthwise convs): there a transform and the
// permute fuse into a copy of whole vectors, which is not counted.
bool FewTransforms(int transforms, int convs) { return transforms <= 2 + convs / 10; }

class LayoutConverter {
 public:
  // `automatic`: give up (the graph unchanged) when the region would need
  // more transforms than FewTransforms allows.
  LayoutConverter(Graph& g, bool automatic)
      : g_(g), ops_(OpRegistry::Default()), automatic_(automatic) {}

  absl::StatusOr<bool> Run() {
    const std::vector<Node*> order = g_.TopologicalOrder();
    for (Node* n : order) {
      if (!n->is_op() || !n->type_known) continue;
      KILN_RETURN_IF_ERROR(Convert(n));
    }
    if (blocked_.empty()) return false;
    if (automatic_ && !FewTransforms(Transforms(order), convs_)) {
      g_.RemoveDeadNodes();  // the blocked nodes, used by nothing yet
      return false;
    }
    // The boundary: every reader of an original node left (and the outputs)
    // reads the blocked value transformed back.
    for (Node* n : order) {
      auto it = blocked_.find(n);
      if (it == blocked_.end()) continue;
      KILN_ASSIGN_OR_RETURN(Node* back, Unblocked(n, it->second));
      g_.ReplaceAllUses(n, back);
    }
    g_.RemoveDeadNodes();
    return true;
  }

 private:
  // How many transforms the region needs: forward, one per NCHW value a
  // blocked op reads; back, one per blocked value read outside the region.
  int Transforms(const std::vector<Node*>& order) const {
    std::unordered_set<Node*> read_outside;
    for (Node* n : order) {
      if (!n->is_op() || blocked_.count(n) || IsChannelsFirstToLast(*n)) continue;
      for (Node* in : n->inputs) {
        if (blocked_.count(in)) read_outside.insert(in);
      }
    }
    for (Node* out : g_.outputs()) {
      if (blocked_.count(out)) read_outside.insert(out);
    }
    int forward = 0;
    for (const auto& [x, t] : blocked_inputs_) forward += IsChannelsLastToFirst(*x) ? 0 : 1;
    return forward + static_cast<int>(read_outside.size());
  }

  absl::Status Convert(Node* n) {
    const std::string& op = n->op->name;
    if (op == "conv2d") return ConvertConv(n);
    if (op == "relu" || op == "sigmoid" || op == "tanh" || op == "clip" || op == "hard_sigmoid" ||
        op == "hard_swish" || op == "leaky_relu") {
      Node* in = BlockedForm(n->inputs[0]);
      if (in == nullptr || n->inputs.size() != 1) return absl::OkStatus();
      return Emit(n, op, {in}, n->attrs);
    }
    if (op == "max_pool2d" || op == "avg_pool2d") {
      Node* in = BlockedForm(n->inputs[0]);
      if (in == nullptr) return absl::OkStatus();
      return Emit(n, op, {in}, n->attrs);
    }
    if (op == "sum" || op == "mean") return ConvertSpatialReduce(n);
    if (op == "add" || op == "sub" || op == "mul" || op == "div") return ConvertBinary(n);
    if (op == "concat") return ConvertConcat(n);
    return absl::OkStatus();
  }

  // A concat of blocked values along the channels, as a concat of blocks
  // (axis 1 of N, C/16, H, W, 16). Pieces not blocked join through a
  // transform forward, if at least one piece is blocked.
  absl::Status ConvertConcat(Node* n) {
    if (!ConcatKeepsBlocks(*n)) return absl::OkStatus();
    std::vector<Node*> inputs;
    bool any_blocked = false;
    for (Node* in : n->inputs) {
      if (auto it = blocked_.find(in); it != blocked_.end()) {
        inputs.push_back(it->second);
        any_blocked = true;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Node* t, Blocked(in, kBlock));
      inputs.push_back(t);
    }
    if (!any_blocked) return absl::OkStatus();
    return Emit(n, "concat", std::move(inputs), AxisAttrs{1});
  }

  // `x` in 16-channel blocks without a new transform: its blocked
  // replacement, or the transform forward a conv already reads it through
  // (so a pool beside a conv on the block's input, as in an inception
  // block, stays blocked and its concat can be made in place); else null.
  Node* BlockedForm(Node* x) const {
    if (auto it = blocked_.find(x); it != blocked_.end()) return it->second;
    auto it = blocked_inputs_.find(x);
    if (it != blocked_inputs_.end() && it->second->type.shape.back() == kBlock) return it->second;
    return nullptr;
  }

  // A sum or mean over H and W, kept (global pooling): the same reduction
  // over the blocked value's H and W, (N, C/16, 1, 1, 16).
  absl::Status ConvertSpatialReduce(Node* n) {
    auto in = blocked_.find(n->inputs[0]);
    if (in == blocked_.end()) return absl::OkStatus();
    const ReduceAttrs& a = std::get<ReduceAttrs>(n->attrs);
    std::vector<int64_t> axes = a.axes;
    for (int64_t& axis : axes) axis = axis < 0 ? axis + 4 : axis;
    std::sort(axes.begin(), axes.end());
    if (!a.keepdims || axes != std::vector<int64_t>{2, 3}) return absl::OkStatus();
    return Emit(n, n->op->name, {in->second}, ReduceAttrs{{2, 3}, true});
  }

  // Adds `op` over blocked inputs as the blocked form of `n`, typed.
  absl::Status Emit(Node* n, const std::string& op, std::vector<Node*> inputs, Attrs attrs) {
    KILN_ASSIGN_OR_RETURN(Node* b,
                          AddTyped(n->name + ".nchwc", op, std::move(inputs), std::move(attrs)));
    blocked_[n] = b;
    return absl::OkStatus();
  }

  absl::StatusOr<Node*> AddTyped(std::string name, const std::string& op, std::vector<Node*> inputs,
                                 Attrs attrs) {
    const OpDef* def = ops_.Find(op);
    std::vector<TensorType> types;
    for (const Node* in : inputs) types.push_back(in->type);
    KILN_ASSIGN_OR_RETURN(TensorType type, def->infer_type(types, attrs));
    Node* node = g_.AddOp(std::move(name), def, std::move(inputs), std::move(attrs));
    node->type = std::move(type);
    node->type_known = true;
    return node;
  }

  Node* AddFloatConstant(std::string name, std::vector<int64_t> shape,
                         const std::vector<float>& v) {
    return g_.AddConstant(std::move(name), FloatData(std::move(shape), v));
  }

  // NCHW `x` in blocks of `block` channels, one transform per value.
  absl::StatusOr<Node*> Blocked(Node* x, int64_t block) {
    auto it = blocked_inputs_.find(x);
    if (it != blocked_inputs_.end() && it->second->type.shape.back() == block) return it->second;
    KILN_ASSIGN_OR_RETURN(Node* t, AddTyped(x->name + ".to_nchwc", "layout_transform", {x},
                                             LayoutTransformAttrs{0, block, 0}));
    blocked_inputs_[x] = t;
    return t;
  }

  // A conv's bias, if it has one, after `inputs`: (blocks, 16), zero past
  // its `channels`.
  void AppendBlockedBias(const Node* n, int64_t channels, std::vector<Node*>& inputs) {
    if (n->inputs.size() != 3) return;
    const Node* bias = n->inputs[2];
    const int64_t blocks = CeilDiv(channels, kBlock);
    std::vector<float> b(blocks * kBlock, 0.0f);
    std::copy_n(bias->value->data<float>(), channels, b.begin());
    inputs.push_back(AddFloatConstant(bias->name + ".nchwc", {blocks, kBlock}, b));
  }

  // `x` in 16-channel blocks: the blocked op that computes it, else a
  // transform of it (Blocked).
  absl::StatusOr<Node*> InBlocks(Node* x) {
    if (auto it = blocked_.find(x); it != blocked_.end()) return it->second;
    return Blocked(x, kBlock);
  }

  absl::StatusOr<Node*> Unblocked(Node* original, Node* blocked) {
    return AddTyped(original->name + ".to_nchw", "layout_transform", {blocked},
                    LayoutTransformAttrs{kBlock, 0, original->type.shape[1]});
  }

  // conv2d(x, W, b) -> conv2d_nchwc(x', W', b').
  absl::Status ConvertConv(Node* n) {
    if (!Convertible(*n)) return absl::OkStatus();
    if (IsDepthwise(*n)) return ConvertDepthwise(n);
    if (IsGroupedWithinBlocks(*n)) return ConvertGroupedWithinBlocks(n);
    Node* x = n->inputs[0];
    Node* w = n->inputs[1];
    const std::vector<int64_t>& ws = w->type.shape;
    const int64_t o = ws[0], c = ws[1], kh = ws[2], kw = ws[3];
    Node* data;
    int64_t ib;
    if (auto it = blocked_.find(x); it != blocked_.end()) {
      data = it->second;
      ib = kBlock;
    } else {
      ib = std::min(c, kBlock);
      KILN_ASSIGN_OR_RETURN(data, Blocked(x, ib));
    }
    const int64_t ob = CeilDiv(o, kBlock), cb = CeilDiv(c, ib);
    const float* src = w->value->data<float>();
    std::vector<float> packed(ob * cb * kh * kw * ib * kBlock, 0.0f);
    for (int64_t oi = 0; oi < o; ++oi) {
      for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t y = 0; y < kh * kw; ++y) {
          const int64_t dst =
              (((oi / kBlock * cb + ci / ib) * kh * kw + y) * ib + ci % ib) * kBlock + oi % kBlock;
          packed[dst] = src[(oi * c + ci) * kh * kw + y];
        }
      }
    }
    std::vector<Node*> inputs{
        data, AddFloatConstant(w->name + ".nchwc", {ob, cb, kh, kw, ib, kBlock}, packed)};
    AppendBlockedBias(n, o, inputs);
    ++convs_;
    return Emit(n, "conv2d_nchwc", std::move(inputs), n->attrs);
  }

  // conv2d(x, W, b), groups = C = O -> conv2d_nchwc_depthwise(x', W', b'):
  // W (C, 1, KH, KW) as (C/16, KH, KW, 16), zero past C.
  absl::Status ConvertDepthwise(Node* n) {
    Node* x = n->inputs[0];
    Node* w = n->inputs[1];
    const std::vector<int64_t>& ws = w->type.shape;
    const int64_t c = ws[0], kh = ws[2], kw = ws[3];
    KILN_ASSIGN_OR_RETURN(Node * data, InBlocks(x));
    const int64_t cb = CeilDiv(c, kBlock);
    const float* src = w->value->data<float>();
    std::vector<float> packed(cb * kh * kw * kBlock, 0.0f);
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t y = 0; y < kh * kw; ++y) {
        packed[((ci / kBlock) * kh * kw + y) * kBlock + ci % kBlock] = src[ci * kh * kw + y];
      }
    }
    std::vector<Node*> inputs{data,
                              AddFloatConstant(w->name + ".nchwc", {cb, kh, kw, kBlock}, packed)};
    AppendBlockedBias(n, c, inputs);
    ++convs_;
    return Emit(n, "conv2d_nchwc_depthwise", std::move(inputs), n->attrs);
  }

  // conv2d(x, W, b), groups of width w dividing 16 (C = O) ->
  // conv2d_nchwc_grouped(x', W', b'): W (O, w, KH, KW) as (O/16, KH, KW, w,
  // 16), zero past O. At w = 16, a group a block, conv2d_nchwc with one group
  // per block instead: W as (O/16, 1, KH, KW, 16, 16), no zeros to skip, and
  // its GEMM broadcasts input channels from memory where the grouped
  // lowering would permute them in registers.
  absl::Status ConvertGroupedWithinBlocks(Node* n) {
    Node* x = n->inputs[0];
    Node* w = n->inputs[1];
    const std::vector<int64_t>& ws = w->type.shape;
    const int64_t o = ws[0], width = ws[1], kh = ws[2], kw = ws[3];
    KILN_ASSIGN_OR_RETURN(Node * data, InBlocks(x));
    const int64_t ob = CeilDiv(o, kBlock);
    const float* src = w->value->data<float>();
    // Output channel oi, input j of its group, tap y: where it is packed.
    std::vector<float> packed(ob * kh * kw * width * kBlock, 0.0f);
    for (int64_t oi = 0; oi < o; ++oi) {
      for (int64_t j = 0; j < width; ++j) {
        for (int64_t y = 0; y < kh * kw; ++y) {
          packed[((oi / kBlock * kh * kw + y) * width + j) * kBlock + oi % kBlock] =
              src[(oi * width + j) * kh * kw + y];
        }
      }
    }
    const bool whole_blocks = width == kBlock;
    std::vector<int64_t> packed_shape{ob, kh, kw, width, kBlock};
    if (whole_blocks) packed_shape = {ob, 1, kh, kw, kBlock, kBlock};  // the same order
    std::vector<Node*> inputs{data, AddFloatConstant(w->name + ".nchwc", packed_shape, packed)};
    AppendBlockedBias(n, o, inputs);
    ++convs_;
    if (!whole_blocks) return Emit(n, "conv2d_nchwc_grouped", std::move(inputs), n->attrs);
    Conv2DAttrs attrs = std::get<Conv2DAttrs>(n->attrs);
    attrs.groups = ob;
    return Emit(n, "conv2d_nchwc", std::move(inputs), attrs);
  }

  // Both operands blocked (one shape), or one blocked and the other a
  // constant scalar or per-channel vector, re-laid.
  absl::Status ConvertBinary(Node* n) {
    if (n->inputs.size() != 2 || n->type.rank() != 4 || n->type.dtype != DType::kFloat32) {
      return absl::OkStatus();
    }
    std::vector<Node*> inputs;
    bool any_blocked = false;
    for (Node* in : n->inputs) {
      // A blocked divisor's padded lanes may be zero: 0/0 would put NaN
      // there, which the next conv's zero weights do not cancel.
      const bool divisor = n->op->name == "div" && in == n->inputs[1];
      if (auto it = blocked_.find(in);
          it != blocked_.end() && !divisor && Broadcasts(in->type, n->type)) {
        inputs.push_back(it->second);
        any_blocked = true;
        continue;
      }
      // Channels-last values permuted back join through a transform, which
      // fuses with the permute into a copy of vectors (ConvNeXt's layer
      // scale and residual add then run blocked, beside the next conv).
      if (IsChannelsLastToFirst(*in) && !divisor && in->type.shape == n->type.shape) {
        KILN_ASSIGN_OR_RETURN(Node * t, Blocked(in, kBlock));
        inputs.push_back(t);
        any_blocked = true;
        continue;
      }
      Node* c = PerChannelConstant(in, n->type.shape[1], n->op->name == "div" ? 1.0f : 0.0f);
      if (c == nullptr) return absl::OkStatus();
      inputs.push_back(c);
    }
    if (!any_blocked) return absl::OkStatus();
    return Emit(n, n->op->name, std::move(inputs), n->attrs);
  }

  // Whether a blocked operand of type `in` broadcasts to `out` in the blocked
  // layout too: the same shape, or one value per (n, c) (an SE block's scale).
  static bool Broadcasts(const TensorType& in, const TensorType& out) {
    if (in.shape == out.shape) return true;
    const std::vector<int64_t>& s = in.shape;
    return s.size() == 4 && (s[0] == out.shape[0] || s[0] == 1) && s[1] == out.shape[1] &&
           s[2] == 1 && s[3] == 1;
  }

  // A scalar constant as it is; a per-channel one, (C, 1, 1) or (1, C, 1, 1),
  // as (C/16, 1, 1, 16) with `fill` in the padded channels; else null.
  Node* PerChannelConstant(Node* in, int64_t channels, float fill) {
    if (!in->is_constant() || in->type.dtype != DType::kFloat32) return nullptr;
    if (in->type.NumElements() == 1 && in->type.rank() <= 1) return in;
    const std::vector<int64_t>& s = in->type.shape;
    const bool per_channel = (s == std::vector<int64_t>{channels, 1, 1}) ||
                             (s == std::vector<int64_t>{1, channels, 1, 1});
    if (!per_channel) return nullptr;
    std::vector<float> v(CeilDiv(channels, kBlock) * kBlock, fill);
    std::copy_n(in->value->data<float>(), channels, v.begin());
    return AddFloatConstant(in->name + ".nchwc", {CeilDiv(channels, kBlock), 1, 1, kBlock}, v);
  }

  Graph& g_;
  const OpRegistry& ops_;
  // Original NCHW node -> its blocked replacement.
  std::unordered_map<Node*, Node*> blocked_;
  // NCHW values a conv reads -> their transform into blocks.
  std::unordered_map<Node*, Node*> blocked_inputs_;
  int convs_ = 0;  // converted
  const bool automatic_;
};

}  // namespace

std::unique_ptr<Pass> CreateConvertLayoutNchwcPass() {
  return std::make_unique<FunctionPass>(
      PassInfo{"ConvertLayoutNchwc", 1, {"InferType"}},
      [](Graph& graph, const PassContext& ctx) -> absl::StatusOr<bool> {
        switch (ctx.config.nchwc_layout) {
          case NchwcLayout::kOff:
            return false;
          case NchwcLayout::kAuto:
            if (!WinsOn(graph)) return false;
            break;
          case NchwcLayout::kOn:
            break;
        }
        return LayoutConverter(graph, ctx.config.nchwc_layout == NchwcLayout::kAuto).Run();
      });
}

}  // namespace kiln
