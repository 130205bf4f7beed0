// An index expression evaluated at every point of its variables' ranges, so
// tests of index rewrites can compare a rewrite with the original everywhere.
#ifndef KILN_TESTS_TEST_UTIL_INDEX_VALUES_H_
#define KILN_TESTS_TEST_UTIL_INDEX_VALUES_H_

#include <cstdint>
#include <vector>

#include "compiler/te/evaluator.h"
#include "compiler/te/expr.h"

namespace kiln::testing {

// `e` at every point of [0, extent) over `vars`, row-major.
inline std::vector<int64_t> IndexValues(const te::Expr& e, const std::vector<te::Var>& vars) {
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (const te::Var& v : vars) {
    shape.push_back(v->extent);
    n *= v->extent;
  }
  std::vector<int64_t> out(n);
  te::EvaluateIntoBuffer(e, vars, shape, {}, DType::kInt64, out.data());
  return out;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_INDEX_VALUES_H_
