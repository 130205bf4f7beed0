// Typed op attributes, one struct per op family. Parsed and validated once, when
// a graph is imported; passes and lowering read fields, never strings.
#ifndef KILN_COMPILER_IR_ATTRS_H_
#define KILN_COMPILER_IR_ATTRS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "compiler/ir/dtype.h"

namespace kiln {

struct NoAttrs {
  bool operator==(const NoAttrs&) const { return true; }
};

// softmax: the axis normalised over (negative counts from the end).
struct AxisAttrs {
  int64_t axis = -1;
  bool operator==(const AxisAttrs& o) const { return axis == o.axis; }
};

// reshape: the requested shape; -1 infers one dim, 0 copies the input's dim.
struct ReshapeAttrs {
  std::vector<int64_t> shape;
  bool operator==(const ReshapeAttrs& o) const { return shape == o.shape; }
};

// transpose: output dim i is input dim perm[i]; empty reverses the dims.
struct TransposeAttrs {
  std::vector<int64_t> perm;
  bool operator==(const TransposeAttrs& o) const { return perm == o.perm; }
};

// sum / max / mean over axes; empty axes reduce every dim.
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepdims = false;
  bool operator==(const ReduceAttrs& o) const {
    return axes == o.axes && keepdims == o.keepdims;
  }
};

// conv2d in NCHW / OIHW.
struct Conv2DAttrs {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
  bool operator==(const Conv2DAttrs& o) const {
    return strides == o.strides && padding == o.padding && dilation == o.dilation &&
           groups == o.groups;
  }
};

// batch_norm (inference): the channel axis and the variance epsilon.
struct BatchNormAttrs {
  int64_t axis = 1;
  float epsilon = 1e-5f;
  bool operator==(const BatchNormAttrs& o) const {
    return axis == o.axis && epsilon == o.epsilon;
  }
};

// dropout: the training-time drop rate (inference ignores it).
struct DropoutAttrs {
  float rate = 0.5f;
  bool operator==(const DropoutAttrs& o) const { return rate == o.rate; }
};

// Parameterised activations: leaky_relu (alpha), clip (alpha = min, beta = max),
// hard_sigmoid (alpha * x + beta, clamped to [0, 1]).
struct ActivationAttrs {
  float alpha = 0;
  float beta = 0;
  bool operator==(const ActivationAttrs& o) const { return alpha == o.alpha && beta == o.beta; }
};

// cast: the element type to convert to.
struct CastAttrs {
  DType to = DType::kFloat32;
  bool operator==(const CastAttrs& o) const { return to == o.to; }
};

// max_pool2d / avg_pool2d in NCHW.
struct Pool2DAttrs {
  std::vector<int64_t> kernel{1, 1};
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = false;     // avg_pool2d
  bool column_major_indices = false;  // max_pool2d_indices (ONNX storage_order = 1)
  bool operator==(const Pool2DAttrs& o) const {
    return kernel == o.kernel && strides == o.strides && padding == o.padding &&
           dilation == o.dilation && ceil_mode == o.ceil_mode &&
           count_include_pad == o.count_include_pad &&
           column_major_indices == o.column_major_indices;
  }
};

// layout_transform between NCHW (block 0) and NCHW{block}c: N, C/block, H, W, block,
// the channels zero-filled past `channels` (the NCHW channel count, which the
// blocked shape alone does not tell).
struct LayoutTransformAttrs {
  int64_t src_block = 0;
  int64_t dst_block = 0;
  int64_t channels = 0;
  bool operator==(const LayoutTransformAttrs& o) const {
    return src_block == o.src_block && dst_block == o.dst_block && channels == o.channels;
  }
};

// slice: one start and step per input dim (already clamped and normalised);
// the output shape says how many elements each dim keeps.
struct SliceAttrs {
  std::vector<int64_t> starts;
  std::vector<int64_t> steps;
  std::vector<int64_t> sizes;
  bool operator==(const SliceAttrs& o) const {
    return starts == o.starts && steps == o.steps && sizes == o.sizes;
  }
};

// pad (constant mode): `pads` = begins for every dim, then ends; the fill value.
// pad: `pads` (begins, then ends; negative crops). Mode constant fills with
// `value` (or the optional second input, a scalar), edge repeats the border
// element, reflect mirrors about it (pads below the dim).
struct PadAttrs {
  enum class Mode { kConstant, kEdge, kReflect };
  std::vector<int64_t> pads;
  float value = 0;
  Mode mode = Mode::kConstant;
  bool operator==(const PadAttrs& o) const {
    return pads == o.pads && value == o.value && mode == o.mode;
  }
};

// mod: the remainder's sign follows the divisor (Python), or with fmod the
// dividend (C).
struct ModAttrs {
  bool fmod = false;
  bool operator==(const ModAttrs& o) const { return fmod == o.fmod; }
};

// cumsum: along `axis`; exclusive leaves out the element itself; reverse
// sums from the end.
struct ScanAttrs {
  int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  bool operator==(const ScanAttrs& o) const {
    return axis == o.axis && exclusive == o.exclusive && reverse == o.reverse;
  }
};

// einsum: the equation as ONNX writes it ("bij,bjk->bik", "...ii->...i").
struct EinsumAttrs {
  std::string equation;
  bool operator==(const EinsumAttrs& o) const { return equation == o.equation; }
};

// scatter_elements: along `axis`, combining with the data by `reduction`.
struct ScatterAttrs {
  enum class Reduction { kNone, kAdd, kMul, kMax, kMin };
  int64_t axis = 0;
  Reduction reduction = Reduction::kNone;
  bool operator==(const ScatterAttrs& o) const {
    return axis == o.axis && reduction == o.reduction;
  }
};

// top_k_values / top_k_indices: the k largest (or smallest) along `axis`,
// in order (ties: the lower index first).
struct TopKAttrs {
  int64_t axis = -1;
  int64_t k = 1;
  bool largest = true;
  bool operator==(const TopKAttrs& o) const {
    return axis == o.axis && k == o.k && largest == o.largest;
  }
};

// grid_sample: how samples between pixels are made, what lies outside the
// image, and whether -1 and 1 are the corner pixels' centres or edges.
struct GridSampleAttrs {
  enum class Mode { kBilinear, kNearest, kBicubic };
  enum class Padding { kZeros, kBorder, kReflection };
  Mode mode = Mode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
  bool operator==(const GridSampleAttrs& o) const {
    return mode == o.mode && padding == o.padding && align_corners == o.align_corners;
  }
};

// reverse_sequence: each batch entry's first sequence_lens[b] steps along
// time_axis reversed, the rest as they are.
struct ReverseSequenceAttrs {
  int64_t batch_axis = 1;
  int64_t time_axis = 0;
  bool operator==(const ReverseSequenceAttrs& o) const {
    return batch_axis == o.batch_axis && time_axis == o.time_axis;
  }
};

// nonzero: how many of the input's elements are nonzero, the output's
// second dim. The importer reads it off the input's value (value_shape_ops.cc).
struct NonZeroAttrs {
  int64_t count = 0;
  bool operator==(const NonZeroAttrs& o) const { return count == o.count; }
};

// unique: the distinct slices along `axis` (every element, flattened, when
// it has none), `count` of them, in sorted order or in order of first
// occurrence; `output` picks ONNX's output: 0 the slices, 1 their first
// positions, 2 each slice's place among them, 3 how often each occurs.
struct UniqueAttrs {
  std::optional<int64_t> axis;
  bool sorted = true;
  int64_t output = 0;
  int64_t count = 0;
  bool operator==(const UniqueAttrs& o) const {
    return axis == o.axis && sorted == o.sorted && output == o.output && count == o.count;
  }
};

// attention (compiler/ops/attention_op.cc): softmax(q k^T * scale + mask) v
// over n1 x n2 entries (batch, heads). Each operand is a strided view of its
// input, in elements: entry (a, b)'s row r starts at offset + a * s1 + b * s2
// + r * row, and a row's d (q, k), dv (v) or t (mask) elements are
// contiguous. Strides may be 0 (broadcast). The output, out_shape, holds
// entry (a, b)'s row r at a * out.s1 + b * out.s2 + r * out.row (out.offset
// is 0): every element once, (n1 * n2, s, dv) in row-major order or as a
// head merge after attention would have placed them.
struct AttentionView {
  int64_t offset = 0, s1 = 0, s2 = 0, row = 0;
  bool operator==(const AttentionView& o) const {
    return offset == o.offset && s1 == o.s1 && s2 == o.s2 && row == o.row;
  }
};
struct AttentionAttrs {
  float scale = 1;
  int64_t n1 = 1, n2 = 1, s = 1, t = 1, d = 1, dv = 1;
  std::vector<int64_t> out_shape;
  AttentionView q, k, v, mask;  // mask read only when the op has a fourth input
  AttentionView out;
  bool operator==(const AttentionAttrs& o) const {
    return scale == o.scale && n1 == o.n1 && n2 == o.n2 && s == o.s && t == o.t && d == o.d &&
           dv == o.dv && out_shape == o.out_shape && q == o.q && k == o.k && v == o.v &&
           mask == o.mask && out == o.out;
  }
};

// The attribute values above by their ONNX spellings ("add", "reflect",
// "bicubic", ...): one place for the Kiln graph's parser and the ONNX
// importer. Empty for a spelling that is none of them.
std::optional<PadAttrs::Mode> PadModeNamed(absl::string_view name);
std::optional<ScatterAttrs::Reduction> ScatterReductionNamed(absl::string_view name);
std::optional<GridSampleAttrs::Mode> GridSampleModeNamed(absl::string_view name);
std::optional<GridSampleAttrs::Padding> GridSamplePaddingNamed(absl::string_view name);

using Attrs = std::variant<NoAttrs, AxisAttrs, ReshapeAttrs, TransposeAttrs, ReduceAttrs,
                           Conv2DAttrs, BatchNormAttrs, DropoutAttrs, ActivationAttrs, CastAttrs,
                           Pool2DAttrs, SliceAttrs, PadAttrs, ModAttrs, ScanAttrs, EinsumAttrs,
                           ScatterAttrs, TopKAttrs, GridSampleAttrs, ReverseSequenceAttrs,
                           NonZeroAttrs, UniqueAttrs, AttentionAttrs, LayoutTransformAttrs>;

// "axis=-1", "perm=[1,0]", "" for NoAttrs: the printed-IR form.
std::string AttrsToString(const Attrs& attrs);

// Feeds every field (and the variant index) into `out` as a canonical token string,
// for structural hashing.
void AppendAttrsCanonical(const Attrs& attrs, std::string& out);

}  // namespace kiln

#endif  // KILN_COMPILER_IR_ATTRS_H_
