// qmatmul_u8s8: a QDQ matrix product's integer products (compiler/passes/
// integer_qdq_matmul.cc makes it). Lowering hands it to the runtime's
// kiln_qmatmul_u8s8 (compiler/lower/qmatmul_call.cc); the compute below
// states the same value for every other path and for readers.
//   inputs: x uint8 (..., K); w int8 (NB, KP * 16): the weight (K, N) packed
//           as [n / 16][k / 4][n % 16][k % 4], NB = N / 16 and KP = K / 4
//           rounded up, zero past K and N (kiln_qmatmul_u8s8's packing);
//           correction int32 (N); scale and bias float32 (N), or neither.
//   output: float32 (..., N) =
//           (sum over k of x[..., k] * w(k, n) + correction[n]) * scale[n] + bias[n],
//           or without scale and bias (MatMulInteger) int32 (..., N) = the sum
//           plus correction[n] (kiln_qmatmul_u8s8_i32).
// With correction = -x_zero * the column's sum this is scale * sum (x - x_zero) * w.
// A sixth operand, requant float64 (6), makes the op requantise (compiler/
// passes/requantize_in_kernel.cc; kiln_qmatmul_u8s8_q8): scale and bias are
// then float64 and the output uint8, as compiler/ops/requantize_expr.h says.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/ops/requantize_expr.h"
#include "compiler/te/compute_context.h"
#include "compiler/te/expr_builder.h"

namespace kiln {
namespace {

using te::ComputeContext;
using te::Expr;

constexpr int64_t kGroup = abi::kQMatMulKGroup;
constexpr int64_t kBlock = abi::kQMatMulColumnBlock;

absl::StatusOr<TensorType> QMatMulRelation(const std::vector<TensorType>& in, const Attrs&) {
  const TensorType &x = in[0], &w = in[1], &corr = in[2];
  const bool requant = in.size() == 6;
  const bool scaled = in.size() >= 5;
  bool types_ok = x.dtype == DType::kUInt8 && w.dtype == DType::kInt8 &&
                  corr.dtype == DType::kInt32 && x.rank() >= 1 && w.rank() == 2 &&
                  corr.rank() == 1 && (scaled || in.size() == 3);
  for (size_t i = 3; types_ok && i < 5 && i < in.size(); ++i) {
    types_ok = in[i].dtype == (requant ? DType::kFloat64 : DType::kFloat32) &&
               in[i].shape == corr.shape;
  }
  if (types_ok && requant) {
    types_ok = in[5].dtype == DType::kFloat64 &&
               in[5].shape == std::vector<int64_t>{abi::kRequantValues};
  }
  if (!types_ok) {
    std::string got;
    for (const TensorType& t : in) absl::StrAppend(&got, got.empty() ? "" : ", ", t.ToString());
    return absl::InvalidArgumentError(absl::StrCat(
        "qmatmul_u8s8 wants uint8 x (..., K), int8 w (NB, KP * 16), int32 correction (N) and "
        "float32 scale and bias (N) or neither, or float64 ones and a float64 requant (6); got ",
        got));
  }
  const int64_t k = x.shape.back(), n = corr.shape[0];
  const std::vector<int64_t> packed{(n + kBlock - 1) / kBlock,
                                    (k + kGroup - 1) / kGroup * kGroup * kBlock};
  if (w.shape != packed) {
    return absl::InvalidArgumentError(absl::StrCat("qmatmul_u8s8 weight ", w.ToString(), " for K ",
                                                   k, " and N ", n, " (want (", packed[0], ", ",
                                                   packed[1], "))"));
  }
  std::vector<int64_t> out = x.shape;
  out.back() = n;
  return TensorType{requant ? DType::kUInt8 : scaled ? DType::kFloat32 : DType::kInt32, out};
}

// The sum in int64, exact, then the epilogue in float32 (or none).
Expr QMatMulCompute(ComputeContext& ctx) {
  te::ExprBuilder& b = ctx.b();
  te::Var k = ctx.ReduceVar("k", ctx.input_type(0).shape.back());
  std::vector<Expr> x_idx = ctx.out();
  x_idx.back() = b.Ref(k);
  const Expr n = ctx.out().back();
  const Expr group = b.Div(b.Ref(k), b.Int(kGroup));
  const Expr within =
      b.Add(b.Mul(b.Add(b.Mul(group, b.Int(kBlock)), b.Mod(n, b.Int(kBlock))), b.Int(kGroup)),
            b.Mod(b.Ref(k), b.Int(kGroup)));
  const Expr w = b.Cast(te::ScalarType::kI64, ctx.Input(1, {b.Div(n, b.Int(kBlock)), within}));
  const Expr x = b.Cast(te::ScalarType::kI64, ctx.Input(0, x_idx));
  Expr sum = b.Reduce(te::ReduceOp::kSum, {k}, b.Mul(x, w));
  sum = b.Add(sum, b.Cast(te::ScalarType::kI64, ctx.Input(2, {n})));
  if (ctx.num_inputs() == 3) return sum;
  if (ctx.num_inputs() == 6) return RequantizeExpr(ctx, sum, ctx.Input(3, {n}), ctx.Input(4, {n}), 5);
  return b.Add(b.Mul(b.Cast(te::ScalarType::kF32, sum), ctx.Input(3, {n})), ctx.Input(4, {n}));
}

}  // namespace

void RegisterQuantizedMatMulOp(OpRegistry& r) {
  OpDef def;
  def.name = "qmatmul_u8s8";
  def.pattern = OpPattern::kOpaque;
  def.min_inputs = 3;
  def.max_inputs = 6;
  def.summary =
      "a QDQ matmul's uint8 x int8 products in int32, scaled per column (float32) or not (int32)";
  def.parse_attrs = ParseNoAttrs;
  def.infer_type = QMatMulRelation;
  def.compute = QMatMulCompute;
  def.flops = [](const std::vector<TensorType>& in, const TensorType& out, const Attrs&) {
    return 2.0 * static_cast<double>(out.NumElements()) * static_cast<double>(in[0].shape.back());
  };
  r.Register(std::move(def));
}

}  // namespace kiln
