// Evaluates tensor expressions on the host, element by element. Used to fold
// constants at compile time: slow but exact to the op definitions, and needs no
// code generation.
#ifndef KILN_COMPILER_TE_EVALUATOR_H_
#define KILN_COMPILER_TE_EVALUATOR_H_

#include <cstdint>
#include <vector>

#include "compiler/ir/dtype.h"
#include "compiler/te/expr.h"

namespace kiln::te {

// A buffer the expression may Load from (multi-dim indices, row-major).
struct EvalBuffer {
  DType dtype = DType::kFloat32;  // as stored; loads widen to the compute type
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Fills `out` (row-major over `out_shape`, element type `dtype`) with `value`
// evaluated at every index, binding `out_vars[d]` to the index along dim d.
void EvaluateIntoBuffer(const Expr& value, const std::vector<Var>& out_vars,
                        const std::vector<int64_t>& out_shape,
                        const std::vector<EvalBuffer>& buffers, DType dtype, void* out);

}  // namespace kiln::te

#endif  // KILN_COMPILER_TE_EVALUATOR_H_
