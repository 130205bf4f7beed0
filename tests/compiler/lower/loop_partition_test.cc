// Loop partitioning: a padded read splits into head, interior and tail, and
// the interior reads without bounds. Checked on the printed IR (the exact
// split points are hand-computed) and by interpreting both loop nests.
#include "compiler/lower/loop_partition.h"

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::lower {
namespace {

using te::CompareOp;
using te::Expr;
using te::ExprKind;
using ::testing::HasSubstr;
using ::testing::Not;

// A tiny interpreter for the integer and float expressions used here.
class Interpreter {
 public:
  std::unordered_map<const te::VarNode*, int64_t> vars;
  std::vector<std::vector<double>>* buffers = nullptr;

  double Eval(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm: return static_cast<double>(e->int_value);
      case ExprKind::kFloatImm: return e->float_value;
      case ExprKind::kVar: return static_cast<double>(vars.at(e->var.get()));
      case ExprKind::kLoad: return (*buffers)[e->buffer].at(static_cast<size_t>(Eval(e->operands[0])));
      case ExprKind::kSelect: return Eval(e->operands[0]) ? Eval(e->operands[1]) : Eval(e->operands[2]);
      case ExprKind::kCompare: {
        const double a = Eval(e->operands[0]), b = Eval(e->operands[1]);
        switch (e->compare_op()) {
          case CompareOp::kLT: return a < b;
          case CompareOp::kLE: return a <= b;
          case CompareOp::kGT: return a > b;
          case CompareOp::kGE: return a >= b;
          default: return a == b;
        }
      }
      case ExprKind::kBinary: {
        const double a = Eval(e->operands[0]), b = Eval(e->operands[1]);
        switch (e->binary_op()) {
          case te::BinaryOp::kAdd: return a + b;
          case te::BinaryOp::kSub: return a - b;
          case te::BinaryOp::kMul: return a * b;
          case te::BinaryOp::kMin: return std::min(a, b);
          case te::BinaryOp::kMax: return std::max(a, b);
          case te::BinaryOp::kAnd: return a && b;
          default: ADD_FAILURE() << "unexpected op"; return 0;
        }
      }
      default: ADD_FAILURE() << "unexpected expression"; return 0;
    }
  }

  void Run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kStore:
        (*buffers)[s->buffer].at(static_cast<size_t>(Eval(s->index))) = Eval(s->value);
        return;
      case StmtKind::kSeq:
        for (const Stmt& c : s->children) Run(c);
        return;
      case StmtKind::kFor:
        for (int64_t i = 0; i < s->var->extent; ++i) {
          vars[s->var.get()] = i;
          Run(s->children[0]);
        }
        return;
    }
  }
};

std::string Dump(const Stmt& body) {
  LoopFunction fn;
  fn.name = "f";
  fn.buffers = {{"in", te::ScalarType::kF32, 8}, {"out", te::ScalarType::kF32, 30}};
  fn.num_params = 2;
  fn.body = body;
  return LoopFunctionToString(fn);
}

// Buffer 1 after running `s` on `buffers`.
std::vector<double> Output(const Stmt& s, std::vector<std::vector<double>> buffers) {
  Interpreter run;
  run.buffers = &buffers;
  run.Run(s);
  return buffers[1];
}

// The line after the first line of `dump` holding `header` from `from` on:
// the store of the loop it opens.
std::string StoreAfter(const std::string& dump, const std::string& header, size_t from = 0) {
  const size_t header_end = dump.find('\n', dump.find(header, from));
  return dump.substr(header_end + 1, dump.find('\n', header_end + 1) - header_end - 1);
}

// out[w * 10 + x] = in[clamp(x + w - 1)] where 0 <= x + w - 1 < 8, else 0,
// for w in [0, 3) outside x in [0, 10): the interior is where the bounds
// hold for every w: x - 1 >= 0 and x + 1 < 8, so x in [1, 7).
TEST(LoopPartitionTest, SplitsPaddedReadIntoHeadInteriorAndTail) {
  te::ExprBuilder b;
  te::Var w = b.NewVar("w", 3), x = b.NewVar("x", 10);
  Expr pos = b.Sub(b.Add(b.Ref(x), b.Ref(w)), b.Int(1));
  Expr inside = b.Binary(te::BinaryOp::kAnd, b.Compare(CompareOp::kGE, pos, b.Int(0)),
                         b.Compare(CompareOp::kLT, pos, b.Int(8)));
  Expr clamped = b.Max(b.Int(0), b.Min(pos, b.Int(7)));
  Expr value = b.Select(inside, b.Load(0, te::ScalarType::kF32, {clamped}), b.Float(0));
  Stmt body = MakeFor(
      w, ForKind::kSerial,
      MakeFor(x, ForKind::kVectorized,
              MakeStore(1, b.Add(b.Mul(b.Ref(w), b.Int(10)), b.Ref(x)), value)));
  Stmt split = PartitionBoundaryLoops(body, b);

  const std::string dump = Dump(split);
  EXPECT_THAT(dump, HasSubstr("vectorized for x in [0, 1)"));
  EXPECT_THAT(dump, HasSubstr("vectorized for x in [0, 6)"));
  EXPECT_THAT(dump, HasSubstr("vectorized for x in [0, 3)"));
  // The interior's store (the line after its loop header) has no select and
  // no clamp left.
  const std::string interior_store = StoreAfter(dump, "[0, 6)");
  EXPECT_THAT(interior_store, HasSubstr("b0["));
  EXPECT_THAT(interior_store, Not(HasSubstr("select")));
  EXPECT_THAT(interior_store, Not(HasSubstr("max(")));

  const std::vector<std::vector<double>> buffers = {{1, 2, 3, 4, 5, 6, 7, 8},
                                                    std::vector<double>(30, -1)};
  EXPECT_EQ(Output(body, buffers), Output(split, buffers));
}

// A bound that never holds inside the loop leaves the loop alone.
TEST(LoopPartitionTest, LeavesLoopWhenNoIterationIsInside) {
  te::ExprBuilder b;
  te::Var x = b.NewVar("x", 4);
  Expr value = b.Select(b.Compare(CompareOp::kGE, b.Ref(x), b.Int(9)), b.Float(1), b.Float(0));
  Stmt body = MakeFor(x, ForKind::kVectorized, MakeStore(1, b.Ref(x), value));
  EXPECT_EQ(PartitionBoundaryLoops(body, b), body);
}

// A blocked-layout read (NCHW16c: each pixel's channels are the lanes l):
// the padding bounds depend on the serial pixel loop y around the vector
// loop, which is split the same way, 1 + 6 + 3 rows for y - 1 >= 0 and
// y + 1 < 8. A serial loop that stores outside a lane loop is left alone.
TEST(LoopPartitionTest, SplitsSerialPixelLoopAroundLanes) {
  te::ExprBuilder b;
  te::Var y = b.NewVar("y", 10), l = b.NewVar("l", 4);
  auto tap = [&](int64_t t) {
    Expr pos = b.Add(b.Ref(y), b.Int(t - 1));
    Expr inside = b.Binary(te::BinaryOp::kAnd, b.Compare(CompareOp::kGE, pos, b.Int(0)),
                           b.Compare(CompareOp::kLT, pos, b.Int(8)));
    Expr clamped = b.Max(b.Int(0), b.Min(pos, b.Int(7)));
    return b.Select(inside,
                    b.Load(0, te::ScalarType::kF32, {b.Add(b.Mul(clamped, b.Int(4)), b.Ref(l))}),
                    b.Float(0));
  };
  Stmt body = MakeFor(
      y, ForKind::kSerial,
      MakeFor(l, ForKind::kVector,
              MakeStore(1, b.Add(b.Mul(b.Ref(y), b.Int(4)), b.Ref(l)), b.Add(tap(0), tap(2)))));
  Stmt split = PartitionBoundaryLoops(body, b);

  LoopFunction fn;
  fn.name = "f";
  fn.buffers = {{"in", te::ScalarType::kF32, 32}, {"out", te::ScalarType::kF32, 40}};
  fn.num_params = 2;
  fn.body = split;
  const std::string dump = LoopFunctionToString(fn);
  EXPECT_THAT(dump, HasSubstr("for y in [0, 1)"));
  EXPECT_THAT(dump, HasSubstr("for y in [0, 6)"));
  EXPECT_THAT(dump, HasSubstr("for y in [0, 3)"));
  const std::string interior_store = StoreAfter(dump, "vector for", dump.find("[0, 6)"));
  EXPECT_THAT(interior_store, HasSubstr("b0["));
  EXPECT_THAT(interior_store, Not(HasSubstr("select")));
  EXPECT_THAT(interior_store, Not(HasSubstr("max(")));

  std::vector<double> in(32);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 1.5 * i - 7;
  EXPECT_EQ(Output(body, {in, std::vector<double>(40, -1)}),
            Output(split, {in, std::vector<double>(40, -1)}));

  // A store at y without a lane loop around it is not a pixel loop.
  Expr inside = b.Compare(CompareOp::kGE, b.Sub(b.Ref(y), b.Int(1)), b.Int(0));
  Stmt plain = MakeFor(y, ForKind::kSerial,
                       MakeStore(1, b.Ref(y), b.Select(inside, b.Float(1), b.Float(0))));
  EXPECT_EQ(PartitionBoundaryLoops(plain, b), plain);
}

}  // namespace
}  // namespace kiln::lower
