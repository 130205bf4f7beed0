// RequantizeInKernel, for each qconv2d_u8s8 or qmatmul_u8s8 with a float32
// output:
//   1. Walk its readers, each the only reader of the one before and no graph
//      output: an optional relu (t >= 0) or clip (t in [alpha, beta]), then
//      the quantising chain QuantizeLinear imports as: div by a positive
//      scalar constant y_scale, round, an optional add of a scalar integer
//      constant zp, and a clip c to integer bounds inside [0, 255] (offset 0)
//      or [-128, 127] (offset 128: stored as uint8 with 128 added, as the
//      integer passes read int8 values).
//   2. Make the product's requantising form: scale and bias as float64 (the
//      frontend's exact values where it kept them, ExactValues) and the six
//      requant values (y_scale, the relu's or clip's bounds, zp + offset, the
//      clip's bounds + offset), a uint8 output u.
//   3. c's readers: a cast<u8>(c) (offset 0) or cast<u8>(add(c, 128))
//      (offset 128) is u itself; every other one reads cast<f32>(u), minus
//      128 for offset 128, which is c's value (c is never NaN here: the
//      product's sums are integers and its scales finite).
// The rounding of round(t / y_scale) commutes with the relu's and clip's
// bounds (a monotone rounding), so applying them to t in float64, as the
// float64 reference does, equals the float32 graph's order of operations.
#include "compiler/passes/requantize_in_kernel.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/kernel_abi.h"
#include "common/status_macros.h"
#include "compiler/ir/op_def.h"
#include "compiler/ops/op_registry.h"
#include "compiler/passes/infer_type.h"
#include "compiler/passes/integral_values.h"
#include "compiler/passes/qdq_operands.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Chain {
  double low = -kInf, high = kInf;  // the relu's or clip's bounds on t
  double y_scale = 0;
  double zero = 0;               // with the offset
  double q_low = 0, q_high = 0;  // with the offset
  int64_t offset = 0;
  Node* clip = nullptr;  // c
};

bool IsScalarFloat(const Node* n) {
  return n->is_constant() && n->type.dtype == DType::kFloat32 && n->type.NumElements() == 1;
}

// Step 1.
std::optional<Chain> MatchChain(const Readers& readers, const Node* product) {
  Chain chain;
  Node* r = readers.OnlyReader(product);
  if (r != nullptr && IsOp(r, "relu")) {
    chain.low = 0;
    r = readers.OnlyReader(r);
  } else if (r != nullptr && IsOp(r, "clip")) {
    const ActivationAttrs& a = std::get<ActivationAttrs>(r->attrs);
    chain.low = a.alpha;
    chain.high = a.beta;
    r = readers.OnlyReader(r);
  }
  if (r == nullptr || !IsOp(r, "div") || r->inputs.size() != 2 || !IsScalarFloat(r->inputs[1])) {
    return std::nullopt;
  }
  chain.y_scale = *ScalarConstant(r->inputs[1]);
  if (!(chain.y_scale > 0) || std::isinf(chain.y_scale)) return std::nullopt;
  r = readers.OnlyReader(r);
  if (r == nullptr || !IsOp(r, "round")) return std::nullopt;
  r = readers.OnlyReader(r);
  if (r != nullptr && IsOp(r, "add") && r->inputs.size() == 2 && IsScalarFloat(r->inputs[1])) {
    chain.zero = *ScalarConstant(r->inputs[1]);
    if (!IsIntegerValue(chain.zero)) return std::nullopt;
    r = readers.OnlyReader(r);
  }
  if (r == nullptr || !IsOp(r, "clip") || readers.is_output.count(r)) return std::nullopt;
  const ActivationAttrs& bounds = std::get<ActivationAttrs>(r->attrs);
  if (!IsIntegerValue(bounds.alpha) || !IsIntegerValue(bounds.beta) || bounds.alpha > bounds.beta) {
    return std::nullopt;
  }
  if (bounds.alpha >= 0 && bounds.beta <= 255) {
    chain.offset = 0;
  } else if (bounds.alpha >= -128 && bounds.beta <= 127) {
    chain.offset = 128;
  } else {
    return std::nullopt;
  }
  chain.zero += chain.offset;
  chain.q_low = bounds.alpha + chain.offset;
  chain.q_high = bounds.beta + chain.offset;
  chain.clip = r;
  return chain;
}

// Whether `n` is a scalar constant equal to `v`.
bool IsScalar(const Node* n, double v) {
  const std::optional<double> s = ScalarConstant(n);
  return s && *s == v;
}

// Whether `cast` is cast<u8>.
bool IsCastToUint8(const Node* cast) {
  return IsOp(cast, "cast") && cast->type.dtype == DType::kUInt8;
}

absl::StatusOr<bool> RequantizeInKernel(Graph& graph, const PassContext&) {
  const OpRegistry& ops = OpRegistry::Default();
  const Readers readers(graph);
  bool changed = false;
  for (Node* product : graph.TopologicalOrder()) {
    const bool conv = IsOp(product, "qconv2d_u8s8") && product->inputs.size() == 6;
    const bool matmul = IsOp(product, "qmatmul_u8s8") && product->inputs.size() == 5;
    if ((!conv && !matmul) || product->type.dtype != DType::kFloat32) continue;
    const std::optional<Chain> chain = MatchChain(readers, product);
    if (!chain) continue;
    // Step 2.
    const std::string& name = product->name;
    const int64_t channels = product->inputs[2]->type.shape[0];
    Node* scale = graph.AddConstant(
        name + "/scale64",
        MakeConstant(DType::kFloat64, {channels}, ExactValues(product->inputs[3])));
    Node* bias = graph.AddConstant(name + "/bias64", MakeConstant(DType::kFloat64, {channels},
                                                                  ExactValues(product->inputs[4])));
    Node* requant = graph.AddConstant(
        name + "/requant", MakeConstant(DType::kFloat64, {abi::kRequantValues},
                                        {chain->y_scale, chain->low, chain->high, chain->zero,
                                         chain->q_low, chain->q_high}));
    std::vector<Node*> operands = product->inputs;
    operands[3] = scale;
    operands[4] = bias;
    operands.push_back(requant);
    Node* u8 = graph.AddOp(name + "/q8", product->op, operands, product->attrs);
    // Step 3.
    Node* value = graph.AddOp(name + "/q8_f32", ops.Find("cast"), {u8}, CastAttrs{DType::kFloat32});
    if (chain->offset != 0) {
      Node* offset = graph.AddConstant(
          name + "/q8_offset",
          MakeConstant(DType::kFloat32, {}, {static_cast<double>(chain->offset)}));
      value = graph.AddOp(name + "/q8_value", ops.Find("sub"), {value, offset}, NoAttrs{});
    }
    Node* c = chain->clip;
    for (Node* r : readers.of.at(c)) {
      if (chain->offset == 0 && IsCastToUint8(r)) {
        graph.ReplaceAllUses(r, u8);
      } else if (chain->offset != 0 && IsOp(r, "add") && r->inputs[0] == c &&
                 IsScalar(r->inputs[1], static_cast<double>(chain->offset))) {
        auto it = readers.of.find(r);
        if (it == readers.of.end()) continue;
        for (Node* cast : it->second) {
          if (IsCastToUint8(cast)) graph.ReplaceAllUses(cast, u8);
        }
      }
    }
    graph.ReplaceAllUses(c, value);
    changed = true;
  }
  if (!changed) return false;
  graph.RemoveDeadNodes();
  KILN_RETURN_IF_ERROR(InferTypes(graph).status());
  return true;
}

}  // namespace

std::unique_ptr<Pass> CreateRequantizeInKernelPass() {
  return std::make_unique<FunctionPass>(PassInfo{"RequantizeInKernel", 2, {"InferType"}},
                                        RequantizeInKernel);
}

}  // namespace kiln
