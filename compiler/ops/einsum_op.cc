// einsum (ONNX Einsum): one registry entry whose compute is the equation
// itself as a tensor expression, TE style: the output's labels index the
// output, every other label is a reduction variable, and the body is the
// product of the operands (C(i,k) = sum_j A(i,j) * B(j,k) for "ij,jk->ik").
// Repeated labels in one operand read its diagonal; "..." stands for the
// broadcast dims, right-aligned as NumPy does.
#include <algorithm>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "compiler/ops/attr_parsing.h"
#include "compiler/ops/op_registry.h"
#include "compiler/ops/register_ops.h"
#include "compiler/te/compute_context.h"

namespace kiln {
namespace {

using te::ComputeContext;
using te::Expr;

// Operand and output labels, "..." replaced by one label per broadcast dim
// (the digits '0'...'9', which equations cannot use).
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
  std::map<char, int64_t> sizes;
};

absl::StatusOr<EinsumSpec> ParseEinsum(const std::string& equation,
                                       const std::vector<TensorType>& in) {
  std::string eq;
  for (char ch : equation) {
    if (ch != ' ') eq.push_back(ch);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != in.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum '", equation, "' names ", terms.size(), " operands, got ", in.size()));
  }
  EinsumSpec spec;
  int64_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string& t = terms[i];
    const size_t dots = t.find("...");
    const int64_t named = static_cast<int64_t>(t.size()) - (dots == std::string::npos ? 0 : 3);
    const int64_t broadcast = in[i].rank() - named;
    if (broadcast < 0 || (dots == std::string::npos && broadcast != 0) || broadcast > 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("einsum term '", t, "' does not fit operand ", in[i].ToString()));
    }
    if (dots != std::string::npos) {
      ellipsis_rank = std::max(ellipsis_rank, broadcast);
      std::string labels;
      for (int64_t d = 0; d < broadcast; ++d)
        labels.push_back(static_cast<char>('0' + 10 - broadcast + d));
      t = t.substr(0, dots) + labels + t.substr(dots + 3);
    }
    for (size_t d = 0; d < t.size(); ++d) {
      const char ch = t[d];
      if (!std::isalpha(static_cast<unsigned char>(ch)) &&
          !std::isdigit(static_cast<unsigned char>(ch))) {
        return absl::InvalidArgumentError(
            absl::StrCat("einsum '", equation, "': label '", std::string(1, ch), "'"));
      }
      const int64_t size = in[i].shape[d];
      auto [it, inserted] = spec.sizes.emplace(ch, size);
      // A size-1 broadcast dim yields to the other operand's.
      if (!inserted && it->second != size) {
        if (std::isdigit(static_cast<unsigned char>(ch)) && (size == 1 || it->second == 1)) {
          it->second = std::max(it->second, size);
        } else {
          return absl::InvalidArgumentError(absl::StrCat("einsum '", equation, "': label '",
                                                         std::string(1, ch), "' is ", it->second,
                                                         " and ", size));
        }
      }
    }
  }
  std::string broadcast_labels;
  for (int64_t d = 0; d < ellipsis_rank; ++d)
    broadcast_labels.push_back(static_cast<char>('0' + 10 - ellipsis_rank + d));
  if (arrow != std::string::npos) {
    std::string out = eq.substr(arrow + 2);
    const size_t dots = out.find("...");
    if (dots != std::string::npos)
      out = out.substr(0, dots) + broadcast_labels + out.substr(dots + 3);
    for (char ch : out) {
      if (!spec.sizes.count(ch) || std::count(out.begin(), out.end(), ch) != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("einsum '", equation, "': output label '", std::string(1, ch), "'"));
      }
    }
    spec.output = out;
  } else {
    // Implicit output: the broadcast dims, then the labels used once, sorted.
    std::map<char, int> uses;
    for (const std::string& t : terms) {
      for (char ch : t) ++uses[ch];
    }
    spec.output = broadcast_labels;
    for (const auto& [ch, count] : uses) {
      if (count == 1 && std::isalpha(static_cast<unsigned char>(ch))) spec.output.push_back(ch);
    }
  }
  spec.inputs = std::move(terms);
  return spec;
}

}  // namespace

void RegisterEinsumOp(OpRegistry& r) {
  OpDef def;
  def.name = "einsum";
  def.pattern = OpPattern::kOutEWiseFusable;
  def.min_inputs = 1;
  def.max_inputs = 8;
  def.summary = "Einstein summation over attribute `equation` (\"ij,jk->ik\")";
  def.parse_attrs = [](const RawAttrs& raw) -> absl::StatusOr<Attrs> {
    KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"equation"}));
    auto it = raw.find("equation");
    const std::string* eq = it == raw.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (eq == nullptr) return absl::InvalidArgumentError("einsum needs `equation`");
    return Attrs(EinsumAttrs{*eq});
  };
  def.infer_type = [](const std::vector<TensorType>& in,
                      const Attrs& attrs) -> absl::StatusOr<TensorType> {
    for (const TensorType& t : in) {
      if (t.dtype != in[0].dtype || t.dtype == DType::kBool) {
        return absl::InvalidArgumentError("einsum operands must share one numeric type");
      }
    }
    KILN_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(std::get<EinsumAttrs>(attrs).equation, in));
    std::vector<int64_t> shape;
    for (char ch : spec.output) shape.push_back(spec.sizes.at(ch));
    return TensorType{in[0].dtype, shape};
  };
  def.compute = [](ComputeContext& ctx) {
    te::ExprBuilder& b = ctx.b();
    std::vector<TensorType> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.input_type(i));
    const EinsumSpec spec = *ParseEinsum(ctx.attrs<EinsumAttrs>().equation, in);
    std::map<char, Expr> index;
    for (size_t d = 0; d < spec.output.size(); ++d) index[spec.output[d]] = ctx.out()[d];
    std::vector<te::Var> reduce;
    for (const auto& [ch, size] : spec.sizes) {
      if (index.count(ch)) continue;
      reduce.push_back(ctx.ReduceVar(std::string("r_") + ch, size));
      index[ch] = b.Ref(reduce.back());
    }
    Expr product;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      std::vector<Expr> idx;
      for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
        // A broadcast dim of size 1 reads index 0.
        idx.push_back(in[i].shape[d] == 1 ? b.Int(0) : index.at(spec.inputs[i][d]));
      }
      Expr v = ctx.Input(static_cast<int>(i), idx);
      product = product ? b.Mul(product, v) : v;
    }
    if (reduce.empty()) return product;
    return b.Reduce(te::ReduceOp::kSum, reduce, product);
  };
  r.Register(std::move(def));
}

}  // namespace kiln
