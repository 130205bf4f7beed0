// What every step of lowering one fused group shares (lower_group.cc and the
// schedule pieces it calls: conv_padding, row_reduction, plane_prefetch):
// the group's nodes and parameters, the shape of each buffer, the builder
// every expression is made by, and the inliner that turns a node's element
// into an expression over the parameters.
#ifndef KILN_COMPILER_LOWER_GROUP_CONTEXT_H_
#define KILN_COMPILER_LOWER_GROUP_CONTEXT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/te/expr.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {

using VarSet = std::set<const te::VarNode*>;

// Work (elements times reduction length) above which an outer loop goes parallel.
inline constexpr int64_t kParallelWorkThreshold = 1 << 15;

// A reduction hoisted out of the loops around it (lower_group.cc, step 3):
// its value, stored in a temporary indexed by the variables it depends on.
struct HoistedTemp {
  std::vector<te::Var> vars;
  te::Expr value;
};

struct GroupContext {
  // `members`: the group's op nodes in topological order; the last is the root.
  explicit GroupContext(const std::vector<const Node*>& members);

  // Single-element constants are baked into the code as immediates.
  static bool IsBaked(const Node* n);
  // The element of `n` at `idx`: a load for a parameter, an immediate for a
  // baked constant, else its op's compute over its inputs' elements, inlined
  // (memoised by node and index, so shared producers stay shared nodes).
  te::Expr ValueOf(const Node* n, const std::vector<te::Expr>& idx);
  // The variables free in `e` (memoised).
  const VarSet& FreeVars(const te::Expr& e);
  // The buffer a load's id names: temporaries carry ids -1, -2, ... until
  // `temp_base` places them after the parameters.
  int BufferId(int id) const { return id < 0 ? temp_base + (-1 - id) : id; }
  // Row-major element index of `idx` in `shape`.
  te::Expr FlatIndex(const std::vector<int64_t>& shape, const std::vector<te::Expr>& idx);
  // `root` with its multi-dimensional loads flattened by `shapes`.
  te::Expr Flatten(const te::Expr& root);
  // The same with the memo the caller keeps, so the stores of one stage,
  // which share most of their nodes, flatten each node once.
  te::Expr Flatten(const te::Expr& root, std::unordered_map<const te::ExprNode*, te::Expr>& memo);

  const std::vector<const Node*>& members;
  std::unordered_set<const Node*> member_set;
  // The group's inputs from outside it, in first-use order, and their indices.
  std::vector<const Node*> params;
  std::unordered_map<const Node*, int> param_index;
  // Handed to the LoweredGroup with the function (the loop passes build on it).
  std::unique_ptr<te::ExprBuilder> builder = std::make_unique<te::ExprBuilder>();
  te::ExprBuilder& b = *builder;
  // ValueOf's memo; a schedule may seed it to replace a node's element.
  std::map<std::pair<const Node*, std::vector<const te::ExprNode*>>, te::Expr> memo;
  // Per buffer of the function, its logical shape.
  std::vector<std::vector<int64_t>> shapes;
  int temp_base = 0;

 private:
  te::Expr BakedValue(const Node* n);
  std::unordered_map<const te::ExprNode*, VarSet> free_;
};

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_GROUP_CONTEXT_H_
