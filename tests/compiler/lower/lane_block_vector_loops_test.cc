// BlockLaneDividedVectorLoops: a channels-last loop reading blocked channels
// (c / 16, c % 16) becomes blocks of 16 lanes with contiguous loads; loops it
// cannot make contiguous stay as they were. Checked on the printed IR and by
// interpreting both loop nests.
#include "compiler/lower/lane_block_vector_loops.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::lower {
namespace {

using te::Expr;
using te::ExprKind;
using ::testing::HasSubstr;
using ::testing::Not;

using Buffers = std::vector<std::vector<double>>;

// Integer indices and float loads, enough for the nests built here.
struct Interpreter {
  std::unordered_map<const te::VarNode*, int64_t> vars;
  Buffers* buffers = nullptr;

  double Eval(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return static_cast<double>(e->int_value);
      case ExprKind::kVar:
        return static_cast<double>(vars.at(e->var.get()));
      case ExprKind::kLoad:
        return (*buffers)[e->buffer].at(static_cast<size_t>(Eval(e->operands[0])));
      case ExprKind::kBinary: {
        const double a = Eval(e->operands[0]), b = Eval(e->operands[1]);
        const int64_t ia = static_cast<int64_t>(a), ib = static_cast<int64_t>(b);
        switch (e->binary_op()) {
          case te::BinaryOp::kAdd:
            return a + b;
          case te::BinaryOp::kMul:
            return a * b;
          case te::BinaryOp::kDiv:
            return static_cast<double>(ia / ib);
          case te::BinaryOp::kMod:
            return static_cast<double>(ia % ib);
          default:
            ADD_FAILURE() << "unexpected op";
            return 0;
        }
      }
      default:
        ADD_FAILURE() << "unexpected expression";
        return 0;
    }
  }

  void Run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kStore:
        (*buffers)[s->buffer].at(static_cast<size_t>(Eval(s->index))) = Eval(s->value);
        return;
      case StmtKind::kFor:
        for (int64_t i = 0; i < s->var->extent; ++i) {
          vars[s->var.get()] = i;
          Run(s->children[0]);
        }
        return;
      default:
        ADD_FAILURE() << "unexpected statement";
    }
  }
};

Buffers Interpret(const Stmt& s, Buffers buffers) {
  Interpreter in;
  in.buffers = &buffers;
  in.Run(s);
  return buffers;
}

std::string Dump(const Stmt& body) {
  LoopFunction fn;
  fn.name = "f";
  fn.buffers = {{"in", te::ScalarType::kF32, 1}, {"out", te::ScalarType::kF32, 1}};
  fn.num_params = 2;
  fn.body = body;
  return LoopFunctionToString(fn);
}

// out[p * C + c] = in[(c / 16) * P * 16 + p * 16 + lane(c)] for p < P, c < C:
// blocked (C/16, P, 16) to channels-last (P, C); `lane` is c % 16, or
// 2 * (c % 16) for a read that no split makes contiguous.
Stmt ChannelsLastCopy(te::ExprBuilder& b, int64_t pixels, int64_t channels, bool strided) {
  te::Var p = b.NewVar("p", pixels), c = b.NewVar("c", channels);
  Expr lane = b.Mod(b.Ref(c), b.Int(16));
  if (strided) lane = b.Mul(lane, b.Int(2));
  Expr from = b.Add(
      b.Add(b.Mul(b.Div(b.Ref(c), b.Int(16)), b.Int(pixels * 16 * 2)), b.Mul(b.Ref(p), b.Int(32))),
      lane);
  Expr to = b.Add(b.Mul(b.Ref(p), b.Int(channels)), b.Ref(c));
  return MakeFor(
      p, ForKind::kSerial,
      MakeFor(c, ForKind::kVectorized, MakeStore(1, to, b.Load(0, te::ScalarType::kF32, {from}))));
}

Buffers Inputs(int64_t pixels, int64_t channels) {
  Buffers buffers(2);
  for (int64_t i = 0; i < (channels + 15) / 16 * pixels * 32; ++i) buffers[0].push_back(i * 0.5);
  buffers[1].assign(pixels * channels, -1);
  return buffers;
}

TEST(LaneBlockVectorLoopsTest, BlockedReadBecomesContiguousVectors) {
  te::ExprBuilder b;
  const Stmt before = ChannelsLastCopy(b, 3, 48, false);
  const Stmt after = BlockLaneDividedVectorLoops(before, b);
  const std::string dump = Dump(after);
  EXPECT_THAT(dump, HasSubstr("for cb in [0, 3)"));
  EXPECT_THAT(dump, HasSubstr("vector for cv in [0, 16)"));
  const std::string store = dump.substr(dump.find("b1["));
  EXPECT_THAT(store, Not(HasSubstr("/"))) << dump;
  EXPECT_THAT(store, Not(HasSubstr("%"))) << dump;
  const Buffers want = Interpret(before, Inputs(3, 48)), got = Interpret(after, Inputs(3, 48));
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(want[1][48 + 17], (3 * 32 + 32 + 1) * 0.5);  // p 1, c 17: block 1, lane 1
}

TEST(LaneBlockVectorLoopsTest, LeavesLoopsItCannotMakeContiguous) {
  te::ExprBuilder b;
  // 40 channels: not whole blocks. A read of every other lane: strided even
  // along the blocks' lanes.
  for (const Stmt& before : {ChannelsLastCopy(b, 3, 40, false), ChannelsLastCopy(b, 3, 48, true)}) {
    const std::string dump = Dump(BlockLaneDividedVectorLoops(before, b));
    EXPECT_EQ(dump, Dump(before));
    EXPECT_THAT(dump, HasSubstr("vectorized for c in"));
  }
}

}  // namespace
}  // namespace kiln::lower
