// grid_sample (ONNX GridSample, PyTorch's grid_sample): each output pixel
// samples the input image at the normalised (x, y) the grid holds for it,
// bilinearly, at the nearest pixel or bicubically (Keys, a = -0.75), with
// zeros, the border or a reflection outside the image. One registry entry
// whose compute is the sampling formula, as PyTorch's CPU kernel defines it
// (coordinates padded before interpolation, except bicubic, which pads
// each of its 16 taps); the image reads are gathers at computed, clamped
// indices.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/ops/shape_relations.h"
#include "compiler/te/compute_context.h"

namespace kiln {
namespace {

using te::BinaryOp;
using te::CompareOp;
using te::ComputeContext;
using te::Expr;
using te::ExprBuilder;
using te::UnaryOp;
using Mode = GridSampleAttrs::Mode;
using Padding = GridSampleAttrs::Padding;

class Sampler {
 public:
  explicit Sampler(ComputeContext& ctx)
      : ctx_(ctx), b_(ctx.b()), a_(ctx.attrs<GridSampleAttrs>()) {
    const std::vector<int64_t>& xs = ctx.input_type(0).shape;
    height_ = xs[2];
    width_ = xs[3];
  }

  Expr Sample() {
    const std::vector<Expr>& o = ctx_.out();  // n, c, h, w
    Expr gx = ctx_.Input(1, {o[0], o[2], o[3], b_.Int(0)});
    Expr gy = ctx_.Input(1, {o[0], o[2], o[3], b_.Int(1)});
    t_ = gx->type;
    Expr x = Unnormalize(gx, width_);
    Expr y = Unnormalize(gy, height_);
    if (a_.mode == Mode::kBicubic) return Bicubic(x, y);
    x = Padded(x, width_);
    y = Padded(y, height_);
    if (a_.mode == Mode::kNearest) {
      return Pixel(ToIndex(b_.Unary(UnaryOp::kRound, y)), ToIndex(b_.Unary(UnaryOp::kRound, x)));
    }
    Expr x0 = b_.Unary(UnaryOp::kFloor, x), y0 = b_.Unary(UnaryOp::kFloor, y);
    Expr wx = b_.Sub(x, x0), wy = b_.Sub(y, y0);
    Expr ix = ToIndex(x0), iy = ToIndex(y0);
    Expr ix1 = b_.Add(ix, b_.Int(1)), iy1 = b_.Add(iy, b_.Int(1));
    Expr top = Lerp(Pixel(iy, ix), Pixel(iy, ix1), wx);
    Expr bottom = Lerp(Pixel(iy1, ix), Pixel(iy1, ix1), wx);
    return Lerp(top, bottom, wy);
  }

 private:
  Expr C(double v) { return b_.Constant(t_, v); }
  Expr Lerp(Expr p, Expr q, Expr w) { return b_.Add(p, b_.Mul(b_.Sub(q, p), w)); }
  Expr ToIndex(Expr v) { return b_.Cast(te::ScalarType::kI64, v); }

  // [-1, 1] to pixel coordinates.
  Expr Unnormalize(Expr g, int64_t size) {
    if (a_.align_corners) return b_.Mul(b_.Add(g, C(1)), C(0.5 * (size - 1)));
    return b_.Div(b_.Sub(b_.Mul(b_.Add(g, C(1)), C(static_cast<double>(size))), C(1)), C(2));
  }

  Expr Clip(Expr v, int64_t size) {
    return b_.Min(b_.Max(v, C(0)), C(static_cast<double>(size - 1)));
  }

  // Reflected into [low, high] (given doubled, as PyTorch does).
  Expr Reflect(Expr v, int64_t twice_low, int64_t twice_high) {
    if (twice_low == twice_high) return C(0);
    const double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
    Expr d = b_.Unary(UnaryOp::kAbs, b_.Sub(v, C(low)));
    Expr extra = b_.Binary(BinaryOp::kMod, d, C(span));
    Expr flips = b_.Unary(UnaryOp::kFloor, b_.Div(d, C(span)));
    Expr half = b_.Unary(UnaryOp::kFloor, b_.Mul(flips, C(0.5)));
    Expr even = b_.Compare(CompareOp::kEQ, b_.Sub(flips, b_.Mul(half, C(2))), C(0));
    return b_.Select(even, b_.Add(extra, C(low)), b_.Add(b_.Sub(C(span), extra), C(low)));
  }

  Expr Padded(Expr v, int64_t size) {
    switch (a_.padding) {
      case Padding::kZeros: return v;
      case Padding::kBorder: return Clip(v, size);
      case Padding::kReflection:
        return Clip(a_.align_corners ? Reflect(v, 0, 2 * (size - 1)) : Reflect(v, -1, 2 * size - 1),
                    size);
    }
    return v;
  }

  // The image at integer pixel (iy, ix): 0 outside it.
  Expr Pixel(Expr iy, Expr ix) {
    const std::vector<Expr>& o = ctx_.out();
    Expr inside = b_.Binary(BinaryOp::kAnd, b_.InRange(iy, height_), b_.InRange(ix, width_));
    Expr v = ctx_.Input(0, {o[0], o[1], b_.ClampIndex(iy, height_), b_.ClampIndex(ix, width_)});
    return b_.Select(inside, v, C(0));
  }

  // A bicubic tap: its integer coordinate padded as the padding mode says.
  Expr TapIndex(Expr i, int64_t size) {
    if (a_.padding == Padding::kZeros) return i;
    Expr f = b_.Cast(t_, i);
    return ToIndex(Padded(f, size));
  }

  // Keys' cubic weights for the four taps at distance t from the first inner one.
  std::vector<Expr> CubicWeights(Expr t) {
    const double a = -0.75;
    auto near = [&](Expr z) {  // |z| <= 1
      return b_.Add(b_.Mul(b_.Mul(b_.Sub(b_.Mul(C(a + 2), z), C(a + 3)), z), z), C(1));
    };
    auto far = [&](Expr z) {  // 1 < |z| < 2
      Expr p = b_.Add(b_.Mul(b_.Sub(b_.Mul(C(a), z), C(5 * a)), z), C(8 * a));
      return b_.Sub(b_.Mul(p, z), C(4 * a));
    };
    Expr one_minus = b_.Sub(C(1), t);
    return {far(b_.Add(t, C(1))), near(t), near(one_minus), far(b_.Add(one_minus, C(1)))};
  }

  Expr Bicubic(Expr x, Expr y) {
    Expr x0 = b_.Unary(UnaryOp::kFloor, x), y0 = b_.Unary(UnaryOp::kFloor, y);
    std::vector<Expr> wx = CubicWeights(b_.Sub(x, x0)), wy = CubicWeights(b_.Sub(y, y0));
    Expr ix = ToIndex(x0), iy = ToIndex(y0);
    Expr sum;
    for (int j = 0; j < 4; ++j) {
      Expr row;
      Expr ty = TapIndex(b_.Add(iy, b_.Int(j - 1)), height_);
      for (int i = 0; i < 4; ++i) {
        Expr tx = TapIndex(b_.Add(ix, b_.Int(i - 1)), width_);
        Expr term = b_.Mul(Pixel(ty, tx), wx[i]);
        row = row ? b_.Add(row, term) : term;
      }
      Expr weighted = b_.Mul(row, wy[j]);
      sum = sum ? b_.Add(sum, weighted) : weighted;
    }
    return sum;
  }

  ComputeContext& ctx_;
  ExprBuilder& b_;
  const GridSampleAttrs& a_;
  int64_t height_ = 0;
  int64_t width_ = 0;
  te::ScalarType t_ = te::ScalarType::kF32;
};

absl::StatusOr<Attrs> ParseGridSample(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"mode", "padding_mode", "align_corners"}));
  GridSampleAttrs a;
  auto text = [&](const char* key, const char* fallback) {
    auto it = raw.find(key);
    const std::string* s = it == raw.end() ? nullptr : std::get_if<std::string>(&it->second);
    return s ? *s : std::string(fallback);
  };
  const std::string mode = text("mode", "bilinear"), padding = text("padding_mode", "zeros");
  std::optional<Mode> named_mode = GridSampleModeNamed(mode);
  std::optional<Padding> named_padding = GridSamplePaddingNamed(padding);
  if (!named_mode || !named_padding) {
    return absl::InvalidArgumentError(absl::StrCat("grid_sample mode '", mode,
                                                   "', padding_mode '", padding, "'"));
  }
  a.mode = *named_mode;
  a.padding = *named_padding;
  KILN_ASSIGN_OR_RETURN(int64_t align, GetIntAttr(raw, "align_corners", 0));
  a.align_corners = align != 0;
  return Attrs(a);
}

}  // namespace

void RegisterGridSampleOp(OpRegistry& r) {
  OpDef def;
  def.name = "grid_sample";
  def.pattern = OpPattern::kInjective;
  def.min_inputs = def.max_inputs = 2;
  def.summary =
      "samples NCHW images at a grid's normalised points (attributes mode, padding_mode, "
      "align_corners)";
  def.parse_attrs = ParseGridSample;
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs&) -> absl::StatusOr<TensorType> {
    KILN_RETURN_IF_ERROR(RequireFloat(in));
    const TensorType& x = in[0];
    const TensorType& grid = in[1];
    if (x.rank() != 4 || grid.rank() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grid_sample wants images [N, C, H, W] and a grid [N, H_out, W_out, 2], got ",
          x.ToString(), " and ", grid.ToString()));
    }
    return TensorType{x.dtype, {x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]}};
  };
  def.compute = [](ComputeContext& ctx) { return Sampler(ctx).Sample(); };
  r.Register(std::move(def));
}

}  // namespace kiln
