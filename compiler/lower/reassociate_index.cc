#include "compiler/lower/reassociate_index.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/lower/linear_form.h"
#include "compiler/te/expr_builder.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using te::ExprNode;

class Reassociator {
 public:
  Stmt Visit(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        const bool counts = s->for_kind != ForKind::kUnrolled;
        if (counts) ++depth_;
        depth_of_[s->var.get()] = counts ? depth_ : 0;
        Stmt body = Visit(s->children[0]);
        if (counts) --depth_;
        return MakeFor(s->var, s->for_kind, std::move(body));
      }
      case StmtKind::kStore:
        // A variable may be reused by loops at other depths (a tile's lane
        // loop in its init, update and store), so atom depths hold for one
        // store only.
        atom_depth_.clear();
        return MakeStore(s->buffer, Index(Loads(s->index)), Loads(s->value), Loads(s->predicate));
      case StmtKind::kPrefetch:
        atom_depth_.clear();
        return MakePrefetch(s->buffer, Index(Loads(s->index)), s->into_l1);
      case StmtKind::kCall:  // one call per statement: nothing to hoist
        return s;
      case StmtKind::kSeq: {
        std::vector<Stmt> children;
        for (const Stmt& c : s->children) children.push_back(Visit(c));
        return MakeSeq(std::move(children));
      }
    }
    return s;
  }

 private:
  // `e` with the index of each of its Loads regrouped. A reduction's
  // variables are loops codegen opens inside the store, one level deeper per
  // nested reduction.
  Expr Loads(const Expr& e) {
    if (!e) return e;
    NumberReduceVars(e, depth_);
    return b_.Rewrite(e, [this](const Expr& x) {
      if (x->kind != ExprKind::kLoad) return x;
      return b_.Rebuild(x, {Index(x->operands[0])});
    });
  }

  // Each node once per depth: shared nodes would otherwise be walked once
  // per path to them, exponentially many in a deep DAG.
  void NumberReduceVars(const Expr& e, int depth) {
    std::set<std::pair<const te::ExprNode*, int>> seen;
    std::function<void(const Expr&, int)> walk = [&](const Expr& x, int d) {
      if (!seen.emplace(x.get(), d).second) return;
      if (x->kind == ExprKind::kReduce) {
        ++d;
        for (const te::Var& v : x->reduce_vars) depth_of_[v.get()] = d;
      }
      for (const Expr& o : x->operands) walk(o, d);
    };
    walk(e, depth);
  }

  Expr Index(const Expr& e) {
    if (e->type != te::ScalarType::kI64 || e->kind != ExprKind::kBinary) return e;
    const LinearForm form = AnalyzeLinear(e);
    // Each node of `e` by order of first appearance: the tie-break between
    // atoms of one depth (the form keys them by address, which varies from
    // run to run) and the way back from the form's raw pointers to Exprs.
    std::unordered_map<const ExprNode*, std::pair<int, Expr>> nodes;
    std::function<void(const Expr&)> number = [&](const Expr& n) {
      if (!nodes.emplace(n.get(), std::make_pair(static_cast<int>(nodes.size()), n)).second) {
        return;
      }
      for (const Expr& o : n->operands) number(o);
    };
    number(e);
    std::vector<std::tuple<int, int, int64_t>> terms;  // depth, first seen, coefficient
    for (const auto& [atom, coefficient] : form.terms) {
      terms.emplace_back(DepthOf(atom), nodes.at(atom).first, coefficient);
    }
    std::sort(terms.begin(), terms.end());
    std::vector<Expr> by_order(nodes.size());
    for (const auto& [node, entry] : nodes) by_order[entry.first] = entry.second;
    Expr sum = b_.Int(form.constant);
    for (const auto& [depth, order, coefficient] : terms) {
      const Expr& atom = by_order[order];
      sum = b_.Add(sum, coefficient == 1 ? atom : b_.Mul(atom, b_.Int(coefficient)));
    }
    return sum;
  }

  // The deepest loop an atom varies with (a variable not bound by any loop
  // here counts as deepest, so nothing is hoisted past it).
  int DepthOf(const ExprNode* atom) {
    auto cached = atom_depth_.find(atom);
    if (cached != atom_depth_.end()) return cached->second;
    int depth = 0;
    if (atom->kind == ExprKind::kVar) {
      auto it = depth_of_.find(atom->var.get());
      depth = it == depth_of_.end() ? INT_MAX : it->second;
    }
    for (const Expr& o : atom->operands) depth = std::max(depth, DepthOf(o.get()));
    atom_depth_[atom] = depth;
    return depth;
  }

  te::ExprBuilder b_;
  int depth_ = 0;
  std::unordered_map<const te::VarNode*, int> depth_of_;
  std::unordered_map<const ExprNode*, int> atom_depth_;
};

}  // namespace

Stmt ReassociateIndices(const Stmt& s) { return Reassociator().Visit(s); }

}  // namespace kiln::lower
