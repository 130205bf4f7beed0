#include "compiler/ir/attrs.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

std::string List(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

struct Printer {
  std::string operator()(const NoAttrs&) const { return ""; }
  std::string operator()(const AxisAttrs& a) const { return absl::StrCat("axis=", a.axis); }
  std::string operator()(const ReshapeAttrs& a) const {
    return absl::StrCat("shape=", List(a.shape));
  }
  std::string operator()(const TransposeAttrs& a) const {
    return absl::StrCat("perm=", List(a.perm));
  }
  std::string operator()(const ReduceAttrs& a) const {
    return absl::StrCat("axes=", List(a.axes), ", keepdims=", a.keepdims ? 1 : 0);
  }
  std::string operator()(const Conv2DAttrs& a) const {
    return absl::StrCat("strides=", List(a.strides), ", padding=", List(a.padding),
                        ", dilation=", List(a.dilation), ", groups=", a.groups);
  }
  std::string operator()(const BatchNormAttrs& a) const {
    return absl::StrCat("axis=", a.axis, ", epsilon=", FloatBits(a.epsilon));
  }
  std::string operator()(const DropoutAttrs& a) const {
    return absl::StrCat("rate=", FloatBits(a.rate));
  }
  std::string operator()(const ActivationAttrs& a) const {
    return absl::StrCat("alpha=", FloatBits(a.alpha), ", beta=", FloatBits(a.beta));
  }
  std::string operator()(const CastAttrs& a) const { return absl::StrCat("to=", DTypeName(a.to)); }
  std::string operator()(const Pool2DAttrs& a) const {
    return absl::StrCat("kernel=", List(a.kernel), ", strides=", List(a.strides),
                        ", padding=", List(a.padding), ", dilation=", List(a.dilation),
                        ", ceil_mode=", a.ceil_mode ? 1 : 0,
                        ", count_include_pad=", a.count_include_pad ? 1 : 0,
                        a.column_major_indices ? ", column_major_indices=1" : "");
  }
  std::string operator()(const SliceAttrs& a) const {
    return absl::StrCat("starts=", List(a.starts), ", steps=", List(a.steps), ", sizes=",
                        List(a.sizes));
  }
  std::string operator()(const ModAttrs& a) const { return absl::StrCat("fmod=", a.fmod ? 1 : 0); }
  std::string operator()(const ScatterAttrs& a) const {
    static const char* kReductions[] = {"none", "add", "mul", "max", "min"};
    return absl::StrCat("axis=", a.axis, ", reduction=",
                        kReductions[static_cast<int>(a.reduction)]);
  }
  std::string operator()(const TopKAttrs& a) const {
    return absl::StrCat("axis=", a.axis, ", k=", a.k, ", largest=", a.largest ? 1 : 0);
  }
  std::string operator()(const GridSampleAttrs& a) const {
    static const char* kModes[] = {"bilinear", "nearest", "bicubic"};
    static const char* kPaddings[] = {"zeros", "border", "reflection"};
    return absl::StrCat("mode=", kModes[static_cast<int>(a.mode)],
                        ", padding_mode=", kPaddings[static_cast<int>(a.padding)],
                        ", align_corners=", a.align_corners ? 1 : 0);
  }
  std::string operator()(const ReverseSequenceAttrs& a) const {
    return absl::StrCat("batch_axis=", a.batch_axis, ", time_axis=", a.time_axis);
  }
  std::string operator()(const NonZeroAttrs& a) const { return absl::StrCat("count=", a.count); }
  std::string operator()(const UniqueAttrs& a) const {
    return absl::StrCat("axis=", a.axis ? absl::StrCat(*a.axis) : "none",
                        ", sorted=", a.sorted ? 1 : 0, ", output=", a.output, ", count=", a.count);
  }
  std::string operator()(const EinsumAttrs& a) const {
    return absl::StrCat("equation=\"", a.equation, "\"");
  }
  std::string operator()(const ScanAttrs& a) const {
    return absl::StrCat("axis=", a.axis, ", exclusive=", a.exclusive ? 1 : 0,
                        ", reverse=", a.reverse ? 1 : 0);
  }
  std::string operator()(const PadAttrs& a) const {
    static const char* kModes[] = {"constant", "edge", "reflect"};
    return absl::StrCat("pads=", List(a.pads), ", value=", FloatBits(a.value),
                        ", mode=", kModes[static_cast<int>(a.mode)]);
  }
  std::string operator()(const LayoutTransformAttrs& a) const {
    auto layout = [](int64_t block) {
      return block == 0 ? std::string("NCHW") : absl::StrCat("NCHW", block, "c");
    };
    return absl::StrCat("src_layout=", layout(a.src_block), ", dst_layout=", layout(a.dst_block),
                        ", channels=", a.channels);
  }
  std::string operator()(const AttentionAttrs& a) const {
    auto view = [](const AttentionView& v) {
      return absl::StrCat("[", v.offset, ",", v.s1, ",", v.s2, ",", v.row, "]");
    };
    return absl::StrCat("scale=", FloatBits(a.scale), ", n=[", a.n1, ",", a.n2, "], s=", a.s,
                        ", t=", a.t, ", d=", a.d, ", dv=", a.dv, ", out_shape=", List(a.out_shape),
                        ", q=", view(a.q), ", k=", view(a.k), ", v=", view(a.v),
                        ", mask=", view(a.mask), ", out=", view(a.out));
  }
  // Exact and readable: the shortest decimal plus the bit pattern.
  static std::string FloatBits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return absl::StrCat(f, "(0x", absl::Hex(bits), ")");
  }
};

}  // namespace

std::optional<PadAttrs::Mode> PadModeNamed(absl::string_view name) {
  if (name == "constant") return PadAttrs::Mode::kConstant;
  if (name == "edge") return PadAttrs::Mode::kEdge;
  if (name == "reflect") return PadAttrs::Mode::kReflect;
  return std::nullopt;
}

std::optional<ScatterAttrs::Reduction> ScatterReductionNamed(absl::string_view name) {
  using R = ScatterAttrs::Reduction;
  if (name == "none") return R::kNone;
  if (name == "add") return R::kAdd;
  if (name == "mul") return R::kMul;
  if (name == "max") return R::kMax;
  if (name == "min") return R::kMin;
  return std::nullopt;
}

std::optional<GridSampleAttrs::Mode> GridSampleModeNamed(absl::string_view name) {
  if (name == "bilinear") return GridSampleAttrs::Mode::kBilinear;
  if (name == "nearest") return GridSampleAttrs::Mode::kNearest;
  if (name == "bicubic") return GridSampleAttrs::Mode::kBicubic;
  return std::nullopt;
}

std::optional<GridSampleAttrs::Padding> GridSamplePaddingNamed(absl::string_view name) {
  if (name == "zeros") return GridSampleAttrs::Padding::kZeros;
  if (name == "border") return GridSampleAttrs::Padding::kBorder;
  if (name == "reflection") return GridSampleAttrs::Padding::kReflection;
  return std::nullopt;
}

std::string AttrsToString(const Attrs& attrs) { return std::visit(Printer{}, attrs); }

void AppendAttrsCanonical(const Attrs& attrs, std::string& out) {
  // The printed form names every field, so with the variant index it is canonical.
  absl::StrAppend(&out, "attrs#", attrs.index(), "{", AttrsToString(attrs), "}");
}

}  // namespace kiln
