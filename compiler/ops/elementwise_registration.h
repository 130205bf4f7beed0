// The shapes of elementwise op entries (one call per op in the registry):
// shared by the families of elementwise ops, each in a file of its own.
#ifndef KILN_COMPILER_OPS_ELEMENTWISE_REGISTRATION_H_
#define KILN_COMPILER_OPS_ELEMENTWISE_REGISTRATION_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/attrs.h"
#include "compiler/ir/tensor_type.h"
#include "compiler/ops/op_registry.h"
#include "compiler/te/compute_context.h"

namespace kiln {

// Same dtypes, NumPy-broadcast shapes.
absl::StatusOr<TensorType> BroadcastRelation(const std::vector<TensorType>& in, const Attrs&);
// The input's type, which must be float32.
absl::StatusOr<TensorType> SameFloatRelation(const std::vector<TensorType>& in, const Attrs&);
// The input's type, which must not be bool.
absl::StatusOr<TensorType> SameNumericRelation(const std::vector<TensorType>& in, const Attrs&);

// BroadcastRelation for arithmetic: bool refused (ONNX has no bool
// arithmetic; NumPy's and LLVM's i1 disagree on what it would mean).
absl::StatusOr<TensorType> NumericBroadcastRelation(const std::vector<TensorType>& in,
                                                    const Attrs& attrs);

// a OP b with NumPy broadcasting (Broadcast pattern), typed by `relation`
// (default: NumericBroadcastRelation).
void RegisterBinary(
    OpRegistry& r, const char* name, te::BinaryOp op, const char* summary,
    std::function<absl::StatusOr<TensorType>(const std::vector<TensorType>&, const Attrs&)>
        relation = NumericBroadcastRelation);
// f(x), ElemWise; float32 only when `float_only`.
void RegisterUnary(OpRegistry& r, const char* name, const char* summary, bool float_only,
                   std::function<te::Expr(te::ComputeContext&, te::Expr)> f);
// a OP b as bool, with NumPy broadcasting.
void RegisterCompare(OpRegistry& r, const char* name, te::CompareOp op, const char* summary);
// f(x, attrs): ElemWise float32 with ActivationAttrs read from two named
// float attributes.
void RegisterActivation(OpRegistry& r, const char* name, const char* summary,
                        const char* alpha_name, float alpha_default, const char* beta_name,
                        float beta_default,
                        std::function<te::Expr(te::ComputeContext&, te::Expr,
                                               const ActivationAttrs&)> f);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_ELEMENTWISE_REGISTRATION_H_
