// Affine analysis of flattened index expressions.
//
// Schedules and the vector emitter both need to know how an index moves when
// one loop variable steps: by one element (a vector load), not at all (a
// broadcast), or irregularly (a gather). Flattening a split index produces
// (e / c) * c + e % c, which is just e; the analysis recognises that pair so a
// dimension split for tiling stays contiguous when it is put back together.
#ifndef KILN_COMPILER_LOWER_LINEAR_FORM_H_
#define KILN_COMPILER_LOWER_LINEAR_FORM_H_

#include <cstdint>
#include <map>
#include <optional>

#include "compiler/te/expr.h"

namespace kiln::lower {

// constant + sum(coefficient * atom). An atom is a variable or a
// sub-expression the analysis cannot see into (a Min, a lone division).
struct LinearForm {
  int64_t constant = 0;
  std::map<const te::ExprNode*, int64_t> terms;
};

// `e` (an i64 expression) as a linear form over atoms.
LinearForm AnalyzeLinear(const te::Expr& e);

// How much `e` changes when `x` steps by one, when that is the same at every
// point; nullopt when it is not (x sits inside an atom such as i % 7).
std::optional<int64_t> StrideAlong(const te::Expr& e, const te::VarNode* x);

// The coefficients of `e` over plain variables when `e` is affine in them
// (every atom a variable); nullopt otherwise.
std::optional<LinearForm> AffineInVars(const te::Expr& e);

// Whether `x` occurs in `e` (outside the reductions that bind it).
bool DependsOn(const te::Expr& e, const te::VarNode* x);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LINEAR_FORM_H_
