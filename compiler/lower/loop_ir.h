// The loop-nest IR a fused group is lowered to, and what codegen consumes.
//
// A LoopFunction computes its output buffer(s) from its input buffers with a
// statement tree of For / Store / Seq / Prefetch (a hint that a cache line
// will be read soon) / Call (a runtime function of common/kernel_abi.h).
// Expressions are te::Exprs whose Loads have been flattened to a single
// element index. Reductions stay as te::kReduce
// expressions inside a Store's value: codegen emits their loops in place.
// The loop passes that rewrite it are listed in loop_pipeline.h.
//
// Codegen turns a LoopFunction into a kernel of the ABI in
// common/kernel_abi.h: buffer i < num_params is args[i] (inputs first, then
// outputs, in the order of `buffers`); the others are temporaries from the
// runtime's workspace, or per-thread stack scratch when marked `local`; a
// kParallel loop runs through the runtime's parallel-for.
#ifndef KILN_COMPILER_LOWER_LOOP_IR_H_
#define KILN_COMPILER_LOWER_LOOP_IR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/dtype.h"
#include "compiler/te/expr.h"

namespace kiln::lower {

// kVectorized asks LLVM's loop vectoriser to widen the loop. kVector is
// explicit: the loop becomes straight-line vector code of width extent (every
// value that varies with the variable is one vector); schedules use it for
// register tiles, where the vectoriser's choices are not good enough.
// kUnrolled is unrolled by codegen itself, so each copy sees its variable as a
// constant (a register tile's row offsets fold into addresses).
enum class ForKind { kSerial, kParallel, kVectorized, kUnrolled, kVector };

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

enum class StmtKind { kFor, kStore, kSeq, kPrefetch, kCall };

// An argument of a kCall: with `buffer` >= 0, the address of that buffer's
// element `value`; else the i64 `value`.
struct CallArg {
  int buffer = -1;
  te::Expr value;
};

struct StmtNode {
  StmtKind kind = StmtKind::kSeq;
  // kFor: `var` runs over [0, var->extent) with `for_kind`; body in children[0].
  te::Var var;
  ForKind for_kind = ForKind::kSerial;
  // kStore: buffer[index] = value, only where `predicate` (a bool Expr, or
  // null for always) holds. Loads in `value` are made under the same
  // predicate, so a tile's padding lanes never touch memory.
  // kPrefetch: a hint to bring the cache line holding buffer[index] into L2,
  // or into L1 too where `into_l1` (it never faults, so the index may run
  // past the buffer).
  int buffer = -1;
  te::Expr index;
  te::Expr value;
  te::Expr predicate;
  // kFor: one child (the body); kSeq: the statements in order.
  std::vector<Stmt> children;
  // kCall: `callee`, a runtime function of common/kernel_abi.h, called with
  // `args`. For a stage whose loops would cost more to compile than they save
  // at run time (a conv's padded-input copy: conv_padding.cc); the callee
  // may read and write every buffer it is given.
  std::string callee;
  std::vector<CallArg> args;
  bool into_l1 = false;  // kPrefetch
};

Stmt MakeFor(te::Var var, ForKind kind, Stmt body);
Stmt MakeStore(int buffer, te::Expr index, te::Expr value, te::Expr predicate = nullptr);
Stmt MakeSeq(std::vector<Stmt> stmts);
Stmt MakePrefetch(int buffer, te::Expr index, bool into_l1 = false);
Stmt MakeCall(std::string callee, std::vector<CallArg> args);

// `s` with every loop that `rewrite` returns a statement for replaced by it;
// a loop it declines (returns null for) keeps its variable and kind, with
// its body rewritten the same way. What a loop pass that rewrites some loops
// whole and leaves the rest walks with.
Stmt RewriteLoops(const Stmt& s, const std::function<Stmt(const Stmt& loop)>& rewrite);

// `s` rebuilt with `f` applied to every expression of its stores (index,
// value, predicate; f sees null for an absent predicate), prefetches and
// calls.
Stmt MapExprs(const Stmt& s, const std::function<te::Expr(const te::Expr&)>& f);

// Whether `e`, or some store or prefetch expression of `s`, loads from
// `buffer`; a call given `buffer` counts as loading it.
bool LoadsBuffer(const te::Expr& e, int buffer);
bool StmtLoadsBuffer(const Stmt& s, int buffer);

struct BufferDecl {
  std::string name;
  te::ScalarType type = te::ScalarType::kF32;
  int64_t num_elements = 0;
  // A small scratch buffer private to each thread (codegen gives every
  // function that uses it its own stack copy), e.g. a row of accumulators.
  bool local = false;
  // The element type in memory where it is narrower than `type` (float16
  // stored, float32 computed; int8 stored, int64 computed). Unset: `type`'s
  // own (float32, int64, bool bytes, float64).
  std::optional<DType> storage;
};

struct LoopFunction {
  // A valid C identifier; the symbol codegen defines.
  std::string name;
  // Params first (inputs, then outputs), then temporaries.
  std::vector<BufferDecl> buffers;
  int num_params = 0;
  Stmt body;
};

// A buffer's element type in memory: its declared storage, else its compute
// type's own.
DType StorageDTypeOf(const BufferDecl& buffer);

// The bytes `fn`'s temporaries take from the kernel workspace pool while
// it runs (all but the thread-local ones, which live on the stack).
int64_t TemporaryBytes(const LoopFunction& fn);

// Indented pseudo-code, for IR dumps and tests.
std::string LoopFunctionToString(const LoopFunction& fn);

// Whether `a` and `b` are the same statements over the same variables and
// buffers, their expressions equal node for node (though built apart): what
// "a pass changed nothing" means for loop passes.
bool SameStmt(const Stmt& a, const Stmt& b);

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_LOOP_IR_H_
