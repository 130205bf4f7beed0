// What an op's compute function sees: its inputs as index-expression accessors,
// the output element's indices, typed attributes and the types involved.
//
// An accessor returns the expression for one input element. Lowering decides
// what stands behind it — a Load from a buffer, or the producer op's own
// compute inlined (how injective producers are fused into their consumers).
#ifndef KILN_COMPILER_TE_COMPUTE_CONTEXT_H_
#define KILN_COMPILER_TE_COMPUTE_CONTEXT_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/attrs.h"
#include "compiler/ir/dtype.h"
#include "compiler/ir/tensor_type.h"
#include "compiler/te/expr.h"
#include "compiler/te/expr_builder.h"

namespace kiln::te {

using Accessor = std::function<Expr(const std::vector<Expr>& indices)>;

// The compute type of a tensor element type (see compiler/ir/dtype.h).
ScalarType ScalarTypeOf(DType dtype);

// The unary op that keeps a compute-type value to what `dtype` can hold, for
// types narrower than their compute type; none for the others.
std::optional<UnaryOp> NarrowingOp(DType dtype);

class ComputeContext {
 public:
  ComputeContext(ExprBuilder& builder, const Attrs& attrs,
                 const std::vector<TensorType>& input_types, const TensorType& output_type,
                 std::vector<Accessor> inputs, std::vector<Expr> output_indices)
      : builder_(builder),
        attrs_(attrs),
        input_types_(input_types),
        output_type_(output_type),
        inputs_(std::move(inputs)),
        output_indices_(std::move(output_indices)) {}

  ExprBuilder& b() { return builder_; }
  template <typename T>
  const T& attrs() const {
    return std::get<T>(attrs_);
  }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  const TensorType& input_type(int i) const { return input_types_[i]; }
  const TensorType& output_type() const { return output_type_; }
  ScalarType out_scalar() const { return ScalarTypeOf(output_type_.dtype); }
  // The indices of the output element being computed, one per output dim.
  const std::vector<Expr>& out() const { return output_indices_; }
  // Input i's element at `indices` (one per input dim).
  Expr Input(int i, const std::vector<Expr>& indices) const { return inputs_[i](indices); }
  // Input i read at the output indices under NumPy broadcasting (right-aligned,
  // size-1 dims read index 0).
  Expr BroadcastInput(int i);
  Var ReduceVar(std::string name, int64_t extent) {
    return builder_.NewVar(std::move(name), extent);
  }

 private:
  ExprBuilder& builder_;
  const Attrs& attrs_;
  const std::vector<TensorType>& input_types_;
  const TensorType& output_type_;
  std::vector<Accessor> inputs_;
  std::vector<Expr> output_indices_;
};

}  // namespace kiln::te

#endif  // KILN_COMPILER_TE_COMPUTE_CONTEXT_H_
