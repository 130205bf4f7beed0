#include "compiler/lower/loop_ir.h"

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::lower {

Stmt MakeFor(te::Var var, ForKind kind, Stmt body) {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::kFor;
  s->var = std::move(var);
  s->for_kind = kind;
  s->children = {std::move(body)};
  return s;
}

Stmt MakeStore(int buffer, te::Expr index, te::Expr value, te::Expr predicate) {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::kStore;
  s->buffer = buffer;
  s->index = std::move(index);
  s->value = std::move(value);
  s->predicate = std::move(predicate);
  return s;
}

Stmt MakeSeq(std::vector<Stmt> stmts) {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::kSeq;
  s->children = std::move(stmts);
  return s;
}

Stmt RewriteLoops(const Stmt& s, const std::function<Stmt(const Stmt& loop)>& rewrite) {
  switch (s->kind) {
    case StmtKind::kSeq: {
      std::vector<Stmt> children;
      for (const Stmt& c : s->children) children.push_back(RewriteLoops(c, rewrite));
      return MakeSeq(std::move(children));
    }
    case StmtKind::kStore:
    case StmtKind::kPrefetch:
    case StmtKind::kCall:
      return s;
    case StmtKind::kFor:
      break;
  }
  if (Stmt replaced = rewrite(s)) return replaced;
  return MakeFor(s->var, s->for_kind, RewriteLoops(s->children[0], rewrite));
}

Stmt MakePrefetch(int buffer, te::Expr index, bool into_l1) {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::kPrefetch;
  s->buffer = buffer;
  s->index = std::move(index);
  s->into_l1 = into_l1;
  return s;
}

Stmt MakeCall(std::string callee, std::vector<CallArg> args) {
  auto s = std::make_shared<StmtNode>();
  s->kind = StmtKind::kCall;
  s->callee = std::move(callee);
  s->args = std::move(args);
  return s;
}

Stmt MapExprs(const Stmt& s, const std::function<te::Expr(const te::Expr&)>& f) {
  switch (s->kind) {
    case StmtKind::kStore:
      return MakeStore(s->buffer, f(s->index), f(s->value), f(s->predicate));
    case StmtKind::kPrefetch:
      return MakePrefetch(s->buffer, f(s->index), s->into_l1);
    case StmtKind::kCall: {
      std::vector<CallArg> args = s->args;
      for (CallArg& a : args) a.value = f(a.value);
      return MakeCall(s->callee, std::move(args));
    }
    case StmtKind::kSeq: {
      std::vector<Stmt> children;
      for (const Stmt& c : s->children) children.push_back(MapExprs(c, f));
      return MakeSeq(std::move(children));
    }
    case StmtKind::kFor:
      return MakeFor(s->var, s->for_kind, MapExprs(s->children[0], f));
  }
  return s;
}

bool LoadsBuffer(const te::Expr& e, int buffer) {
  if (e->kind == te::ExprKind::kLoad && e->buffer == buffer) return true;
  for (const te::Expr& o : e->operands) {
    if (LoadsBuffer(o, buffer)) return true;
  }
  return false;
}

bool StmtLoadsBuffer(const Stmt& s, int buffer) {
  if (s->kind == StmtKind::kStore || s->kind == StmtKind::kPrefetch) {
    for (const te::Expr& e : {s->index, s->value, s->predicate}) {
      if (e && LoadsBuffer(e, buffer)) return true;
    }
  }
  for (const CallArg& a : s->args) {
    if (a.buffer == buffer || LoadsBuffer(a.value, buffer)) return true;
  }
  for (const Stmt& c : s->children) {
    if (StmtLoadsBuffer(c, buffer)) return true;
  }
  return false;
}

namespace {
const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "for";
    case ForKind::kParallel:
      return "parallel for";
    case ForKind::kVectorized:
      return "vectorized for";
    case ForKind::kUnrolled:
      return "unrolled for";
    case ForKind::kVector:
      return "vector for";
  }
  return "for";
}

void Print(const Stmt& s, int indent, std::string& out) {
  std::string pad(indent * 2, ' ');
  switch (s->kind) {
    case StmtKind::kFor:
      absl::StrAppend(&out, pad, ForKindName(s->for_kind), " ", s->var->name, " in [0, ",
                      s->var->extent, "):\n");
      Print(s->children[0], indent + 1, out);
      break;
    case StmtKind::kStore:
      if (s->predicate) absl::StrAppend(&out, pad, "if ", te::ExprToString(s->predicate), ": ");
      absl::StrAppend(&out, s->predicate ? "" : pad, "b", s->buffer, "[", te::ExprToString(s->index),
                      "] = ", te::ExprToString(s->value), "\n");
      break;
    case StmtKind::kSeq:
      for (const Stmt& c : s->children) Print(c, indent, out);
      break;
    case StmtKind::kPrefetch:
      absl::StrAppend(&out, pad, s->into_l1 ? "prefetch to L1 b" : "prefetch b", s->buffer, "[",
                      te::ExprToString(s->index), "]\n");
      break;
    case StmtKind::kCall:
      absl::StrAppend(&out, pad, s->callee, "(");
      for (size_t i = 0; i < s->args.size(); ++i) {
        const CallArg& a = s->args[i];
        absl::StrAppend(&out, i ? ", " : "", a.buffer >= 0 ? absl::StrCat("&b", a.buffer, "[") : "",
                        te::ExprToString(a.value), a.buffer >= 0 ? "]" : "");
      }
      absl::StrAppend(&out, ")\n");
      break;
  }
}
}  // namespace

namespace {

// Node pairs found equal, so shared subexpressions are compared once.
using EqualPairs = std::set<std::pair<const te::ExprNode*, const te::ExprNode*>>;

bool SameExpr(const te::Expr& a, const te::Expr& b, EqualPairs& equal) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (equal.count({a.get(), b.get()})) return true;
  if (a->kind != b->kind || a->type != b->type || a->int_value != b->int_value ||
      std::memcmp(&a->float_value, &b->float_value, sizeof a->float_value) != 0 ||
      a->op != b->op || a->var != b->var || a->buffer != b->buffer ||
      a->reduce_vars != b->reduce_vars || a->operands.size() != b->operands.size()) {
    return false;
  }
  for (size_t i = 0; i < a->operands.size(); ++i) {
    if (!SameExpr(a->operands[i], b->operands[i], equal)) return false;
  }
  equal.insert({a.get(), b.get()});
  return true;
}

bool SameStmt(const Stmt& a, const Stmt& b, EqualPairs& equal) {
  if (a == b) return true;
  if (a->kind != b->kind || a->var != b->var || a->for_kind != b->for_kind ||
      a->buffer != b->buffer || a->children.size() != b->children.size() ||
      !SameExpr(a->index, b->index, equal) || !SameExpr(a->value, b->value, equal) ||
      !SameExpr(a->predicate, b->predicate, equal) || a->callee != b->callee ||
      a->args.size() != b->args.size()) {
    return false;
  }
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (a->args[i].buffer != b->args[i].buffer ||
        !SameExpr(a->args[i].value, b->args[i].value, equal)) {
      return false;
    }
  }
  for (size_t i = 0; i < a->children.size(); ++i) {
    if (!SameStmt(a->children[i], b->children[i], equal)) return false;
  }
  return true;
}

}  // namespace

bool SameStmt(const Stmt& a, const Stmt& b) {
  EqualPairs equal;
  return SameStmt(a, b, equal);
}

DType StorageDTypeOf(const BufferDecl& buffer) {
  if (buffer.storage) return *buffer.storage;
  switch (buffer.type) {
    case te::ScalarType::kF32:
      return DType::kFloat32;
    case te::ScalarType::kI64:
      return DType::kInt64;
    case te::ScalarType::kBool:
      return DType::kBool;
    case te::ScalarType::kF64:
      return DType::kFloat64;
  }
  return DType::kFloat32;
}

int64_t TemporaryBytes(const LoopFunction& fn) {
  int64_t bytes = 0;
  for (size_t i = fn.num_params; i < fn.buffers.size(); ++i) {
    const BufferDecl& b = fn.buffers[i];
    if (!b.local) bytes += b.num_elements * DTypeSize(StorageDTypeOf(b));
  }
  return bytes;
}

std::string LoopFunctionToString(const LoopFunction& fn) {
  std::string out = absl::StrCat("func ", fn.name, "(");
  for (int i = 0; i < static_cast<int>(fn.buffers.size()); ++i) {
    const BufferDecl& b = fn.buffers[i];
    absl::StrAppend(&out, i == fn.num_params ? " | temps: " : (i ? ", " : ""), "b", i, ":",
                    b.name, ":", te::ScalarTypeName(b.type), "[", b.num_elements, "]");
    if (b.storage) absl::StrAppend(&out, " stored ", DTypeName(*b.storage));
  }
  absl::StrAppend(&out, ")\n");
  Print(fn.body, 1, out);
  return out;
}

}  // namespace kiln::lower
