#include "compiler/lower/loop_partition.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/int_math.h"
#include "compiler/lower/linear_form.h"

namespace kiln::lower {
namespace {

using te::BinaryOp;
using te::CompareOp;
using te::Expr;
using te::ExprKind;
using te::Var;

// Inclusive range of the loop variable.
struct Interval {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
};

class Partitioner {
 public:
  explicit Partitioner(te::ExprBuilder& b) : b_(b) {}

  Stmt Visit(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kStore:
      case StmtKind::kPrefetch:
      case StmtKind::kCall:
        return s;
      case StmtKind::kSeq: {
        std::vector<Stmt> children;
        bool changed = false;
        for (const Stmt& c : s->children) {
          children.push_back(Visit(c));
          changed |= children.back() != c;
        }
        return changed ? MakeSeq(std::move(children)) : s;
      }
      case StmtKind::kFor: {
        extent_[s->var.get()] = s->var->extent;
        Stmt body = Visit(s->children[0]);
        extent_.erase(s->var.get());
        if (s->for_kind == ForKind::kVectorized ||
            (s->for_kind == ForKind::kSerial && IsSmallLaneNest(body))) {
          if (std::optional<Stmt> split = Partition(s->var, s->for_kind, body)) return *split;
        }
        return body == s->children[0] ? s : MakeFor(s->var, s->for_kind, body);
      }
    }
    return s;
  }

 private:
  // The head / interior / tail split of `for x: body`, or nullopt when no
  // bound in the body is removable.
  std::optional<Stmt> Partition(const Var& x, ForKind kind, const Stmt& body) {
    ranges_ = extent_;
    std::vector<Expr> exprs;
    CollectExprs(body, exprs);
    std::unordered_set<const te::ExprNode*> seen;
    std::unordered_set<const te::ExprNode*> proven;  // bounds that hold in the interior
    Interval inside{0, x->extent - 1};
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!seen.insert(e.get()).second) return;
      if (e->kind == ExprKind::kReduce) {
        for (const Var& v : e->reduce_vars) ranges_[v.get()] = v->extent;
      }
      for (const Expr& o : e->operands) visit(o);
      std::optional<Interval> holds = BoundInterval(e, x.get(), proven);
      // A bound that holds nowhere in the loop stays as it is.
      if (!holds || std::max<int64_t>(holds->lo, 0) > std::min(holds->hi, x->extent - 1)) return;
      inside.lo = std::max(inside.lo, holds->lo);
      inside.hi = std::min(inside.hi, holds->hi);
      proven.insert(e.get());
    };
    for (const Expr& e : exprs) visit(e);
    if (proven.empty() || inside.lo > inside.hi) return std::nullopt;

    std::vector<Stmt> parts;
    auto shifted = [&](const Stmt& s, int64_t from, int64_t count) {
      Var t = b_.NewVar(x->name, count);
      Expr to = b_.Add(b_.Ref(t), b_.Int(from));
      return MakeFor(t, kind, SubstituteStmt(s, x, to));
    };
    if (inside.lo > 0) parts.push_back(shifted(body, 0, inside.lo));
    parts.push_back(shifted(Simplify(body, proven), inside.lo, inside.hi - inside.lo + 1));
    if (inside.hi < x->extent - 1) {
      parts.push_back(shifted(body, inside.hi + 1, x->extent - 1 - inside.hi));
    }
    return parts.size() == 1 ? parts[0] : MakeSeq(std::move(parts));
  }

  // Whether `s` is a few stores, each under a loop over vector lanes, with
  // only serial loops around them: the body of a blocked-layout pixel loop
  // (NCHW16c: a pixel's 16 channels are the lanes, so padding bounds depend
  // on the pixel loops around the lane loop, not on the vectorised loop the
  // pass otherwise splits). Partitioning the pixel loops leaves the interior
  // pixels without selects and clamps. Few stores, as each loop split makes
  // up to three copies of its body.
  static bool IsSmallLaneNest(const Stmt& s) {
    constexpr int kMaxStores = 3;
    int stores = 0;
    std::function<bool(const Stmt&, bool)> walk = [&](const Stmt& t, bool in_lanes) {
      switch (t->kind) {
        case StmtKind::kStore:
          ++stores;
          return in_lanes;
        case StmtKind::kPrefetch:
        case StmtKind::kCall:
          return false;
        case StmtKind::kSeq:
          for (const Stmt& c : t->children) {
            if (!walk(c, in_lanes)) return false;
          }
          return true;
        case StmtKind::kFor:
          if (t->for_kind == ForKind::kVectorized || t->for_kind == ForKind::kVector) {
            return !in_lanes && walk(t->children[0], true);
          }
          return t->for_kind == ForKind::kSerial && !in_lanes && walk(t->children[0], false);
      }
      return false;
    };
    return walk(s, false) && stores <= kMaxStores;
  }

  // Where `e` -- a comparison, or a min / max against a constant, over an
  // affine index that moves with x -- holds (compares true, or the min / max
  // returns its affine side) for every value of the other variables.
  std::optional<Interval> BoundInterval(
      const Expr& e, const te::VarNode* x,
      const std::unordered_set<const te::ExprNode*>& proven) {
    if (e->operands.size() != 2 || e->operands[0]->type != te::ScalarType::kI64) return std::nullopt;
    // A clamp inside a clamp (max(0, min(y, H - 1))): judge the outer one on
    // what the inner one leaves inside the interior.
    auto unclamped = [&](Expr v) {
      while (proven.count(v.get()) && v->kind == ExprKind::kBinary) {
        v = v->operands[1]->kind == ExprKind::kIntImm ? v->operands[0] : v->operands[1];
      }
      return v;
    };
    const Expr a = unclamped(e->operands[0]);
    const Expr b = unclamped(e->operands[1]);
    // Normalised to d <= upper or d >= lower, d affine.
    Expr d;
    std::optional<int64_t> upper, lower;
    if (e->kind == ExprKind::kCompare) {
      d = b_.Sub(a, b);
      switch (e->compare_op()) {
        case CompareOp::kLT: upper = -1; break;
        case CompareOp::kLE: upper = 0; break;
        case CompareOp::kGT: lower = 1; break;
        case CompareOp::kGE: lower = 0; break;
        default: return std::nullopt;
      }
    } else if (e->kind == ExprKind::kBinary &&
               (e->binary_op() == BinaryOp::kMin || e->binary_op() == BinaryOp::kMax)) {
      const bool b_const = b->kind == ExprKind::kIntImm, a_const = a->kind == ExprKind::kIntImm;
      if (b_const == a_const) return std::nullopt;
      d = b_const ? a : b;
      const int64_t c = b_const ? b->int_value : a->int_value;
      // min(d, c) is d when d <= c; max(d, c) is d when d >= c.
      (e->binary_op() == BinaryOp::kMin ? upper : lower) = c;
    } else {
      return std::nullopt;
    }
    std::optional<LinearForm> form = AffineInVars(d);
    if (!form) return std::nullopt;
    int64_t cx = 0, rmin = form->constant, rmax = form->constant;
    for (const auto& [atom, coefficient] : form->terms) {
      const te::VarNode* v = atom->var.get();
      if (v == x) {
        cx = coefficient;
        continue;
      }
      auto it = ranges_.find(v);
      if (it == ranges_.end()) return std::nullopt;
      const int64_t top = it->second - 1;
      rmin += std::min<int64_t>(0, coefficient * top);
      rmax += std::max<int64_t>(0, coefficient * top);
    }
    if (cx == 0) return std::nullopt;  // no partition can change it
    Interval r;
    if (upper) {  // cx * x + rmax <= upper
      if (cx > 0) r.hi = FloorDiv(*upper - rmax, cx);
      else r.lo = CeilDiv(rmax - *upper, -cx);
    } else {  // cx * x + rmin >= lower
      if (cx > 0) r.lo = CeilDiv(*lower - rmin, cx);
      else r.hi = FloorDiv(rmin - *lower, -cx);
    }
    return r;
  }

  // The body with proven comparisons true and proven clamps dropped.
  Stmt Simplify(const Stmt& s, const std::unordered_set<const te::ExprNode*>& proven) {
    std::unordered_map<const te::ExprNode*, Expr> memo;
    std::function<Expr(const Expr&)> visit = [&](const Expr& e) -> Expr {
      if (!e) return e;
      auto it = memo.find(e.get());
      if (it != memo.end()) return it->second;
      std::vector<Expr> ops;
      for (const Expr& o : e->operands) ops.push_back(visit(o));
      Expr result;
      if (proven.count(e.get())) {
        if (e->kind == ExprKind::kCompare) {
          result = b_.Bool(true);
        } else {  // min / max: the non-constant side
          result = e->operands[1]->kind == ExprKind::kIntImm ? ops[0] : ops[1];
        }
      } else if (e->kind == ExprKind::kBinary && e->binary_op() == BinaryOp::kAnd &&
                 (ops[0]->IsIntConst(1) || ops[1]->IsIntConst(1))) {
        result = ops[0]->IsIntConst(1) ? ops[1] : ops[0];
      } else {
        bool changed = false;
        for (size_t i = 0; i < ops.size(); ++i) changed |= ops[i] != e->operands[i];
        result = changed ? b_.Rebuild(e, std::move(ops)) : e;
      }
      memo.emplace(e.get(), result);
      return result;
    };
    return MapExprs(s, visit);
  }

  Stmt SubstituteStmt(const Stmt& s, const Var& x, const Expr& to) {
    return MapExprs(s, [&](const Expr& e) { return e ? b_.Substitute(e, {x}, {to}) : e; });
  }

  // Every expression of the statements in `s`; loops inside add their ranges.
  void CollectExprs(const Stmt& s, std::vector<Expr>& out) {
    switch (s->kind) {
      case StmtKind::kStore:
      case StmtKind::kPrefetch:
        for (const Expr& e : {s->index, s->value, s->predicate}) {
          if (e) out.push_back(e);
        }
        return;
      case StmtKind::kCall:
        for (const CallArg& a : s->args) out.push_back(a.value);
        return;
      case StmtKind::kSeq:
        for (const Stmt& c : s->children) CollectExprs(c, out);
        return;
      case StmtKind::kFor:
        ranges_[s->var.get()] = s->var->extent;
        CollectExprs(s->children[0], out);
        return;
    }
  }

  te::ExprBuilder& b_;
  std::unordered_map<const te::VarNode*, int64_t> extent_;  // enclosing loops
  std::unordered_map<const te::VarNode*, int64_t> ranges_;  // ... and those inside
};

}  // namespace

Stmt PartitionBoundaryLoops(const Stmt& body, te::ExprBuilder& builder) {
  Partitioner p(builder);
  return p.Visit(body);
}

}  // namespace kiln::lower
