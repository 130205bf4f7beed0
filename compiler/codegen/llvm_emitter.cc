// Emitting LLVM IR for a loop nest.
//
// Shape of the module:
//   void name(ptr args)                 entry: loads the param pointers, calls impl
//   internal void name.impl(ptr noalias b0, ...)
//                                       allocates temporaries, runs the body, frees
//   internal void name.par<k>(ptr closure, i64 begin, i64 end)
//                                       one per parallel loop: its iterations
//                                       [begin, end), state reloaded from closure
// Expressions are DAGs with heavy sharing, so every value is memoised per Expr
// pointer in a stack of scopes: a loop body opens a scope, and a value computed
// outside a loop is reused inside it, never the reverse. Reductions keep their
// accumulator in an entry-block alloca that mem2reg turns into a register;
// float accumulation carries `reassoc` so the vectoriser may reorder it. Float
// ops carry `contract`, so a*b+c becomes one FMA.
//
// Vector loops (ForKind::kVector) are emitted without a loop: an expression
// that varies with the loop variable becomes one <extent x T> value, an
// invariant one stays scalar and is splatted where it meets a vector. A load
// whose index steps by one element is a vector load; one whose lanes read a
// fixed pattern within one vector's width (a grouped conv's (lane / w) * w +
// j) one load and a shuffle (LaneWindow); any other varying index a gather.
// A store's predicate splits into invariant conjuncts (a branch around the
// store) and varying ones (the lane mask of masked loads/stores).
//
// With bounds checks (bounds_check.h) the entry also reads the fault slot
// args[num_params] and hands it to impl, and each parallel body finds it in
// its closure. Every load and store is preceded by its check, whose failure
// path jumps to the function's one early return (impl's frees the
// temporaries first); after each parallel loop impl reads the slot and
// returns too if a body faulted. Without checks none of this is emitted.
#include "compiler/codegen/llvm_emitter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/status_macros.h"
#include "compiler/codegen/bounds_check.h"
#include "compiler/codegen/element_conversion.h"
#include "compiler/codegen/transpose_rows.h"
#include "compiler/lower/linear_form.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/ModRef.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::codegen {
namespace {

using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;
using te::Expr;
using te::ExprKind;
using te::ScalarType;

// Bounds [low, high] on every value of the float expression `e` but NaN, as
// far as min and max with constants show (a clip's, as emitted below:
// NaN passes through them, anything else lands between the constants).
std::pair<double, double> FloatBounds(const Expr& e) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (e->kind == ExprKind::kFloatImm && !std::isnan(e->float_value)) {
    return {e->float_value, e->float_value};
  }
  if (e->kind == ExprKind::kBinary &&
      (e->binary_op() == te::BinaryOp::kMin || e->binary_op() == te::BinaryOp::kMax)) {
    const auto [a_low, a_high] = FloatBounds(e->operands[0]);
    const auto [c_low, c_high] = FloatBounds(e->operands[1]);
    if (e->binary_op() == te::BinaryOp::kMin) {
      return {std::min(a_low, c_low), std::min(a_high, c_high)};
    }
    return {std::max(a_low, c_low), std::max(a_high, c_high)};
  }
  return {-kInf, kInf};
}

// Whether every value of float `e` is NaN or inside int32's range. The
// bounds stop at 2^31 - 128, the largest float32 below 2^31: a constant
// above it may round to 2^31 as a float32.
bool ClampedWithinInt32(const Expr& e) {
  if (!te::IsFloat(e->type)) return false;
  const auto [low, high] = FloatBounds(e);
  return low >= -2147483520.0 && high <= 2147483520.0;
}

class Emitter {
 public:
  Emitter(const lower::LoopFunction& fn, bool bounds_checks, llvm::LLVMContext& ctx,
          llvm::Module& module)
      : fn_(fn), checks_(bounds_checks), ctx_(ctx), m_(module), b_(ctx) {}

  absl::Status Emit() {
    llvm::Type* ptr = b_.getPtrTy();
    // Checked: impl's last parameter is the fault slot.
    std::vector<llvm::Type*> params(fn_.num_params + (checks_ ? 1 : 0), ptr);
    auto* impl_type = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    llvm::Function* impl = llvm::Function::Create(
        impl_type, llvm::Function::InternalLinkage, fn_.name + ".impl", m_);
    for (int i = 0; i < fn_.num_params; ++i) {
      impl->addParamAttr(i, llvm::Attribute::NoAlias);
      impl->addParamAttr(i, llvm::Attribute::NoCapture);
    }
    AddFunctionAttrs(impl);

    // Entry wrapper with the kernel ABI.
    auto* entry_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false);
    llvm::Function* entry = llvm::Function::Create(entry_type, llvm::Function::ExternalLinkage,
                                                   fn_.name, m_);
    AddFunctionAttrs(entry);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    std::vector<llvm::Value*> args;
    for (int i = 0; i < fn_.num_params; ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i);
      args.push_back(b_.CreateLoad(ptr, slot, absl::StrCat("arg", i)));
    }
    if (checks_) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), fn_.num_params);
      args.push_back(b_.CreateLoad(ptr, slot, "fault"));
    }
    b_.CreateCall(impl, args);
    b_.CreateRetVoid();

    // Implementation.
    llvm::FastMathFlags contract;
    contract.setAllowContract();
    b_.setFastMathFlags(contract);
    func_ = impl;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
    for (int i = 0; i < fn_.num_params; ++i) buffers_.push_back(impl->getArg(i));
    if (checks_) fault_ = impl->getArg(fn_.num_params);
    llvm::FunctionCallee alloc = m_.getOrInsertFunction(
        abi::kWorkspaceAlloc, llvm::FunctionType::get(ptr, {b_.getInt64Ty()}, false));
    // What LLVM knows of aligned_alloc's result, said for the runtime's pool:
    // a fresh block that nothing else points into, 64-byte aligned.
    if (auto* decl = llvm::dyn_cast<llvm::Function>(alloc.getCallee())) {
      decl->addRetAttr(llvm::Attribute::NoAlias);
      decl->addRetAttr(
          llvm::Attribute::getWithAlignment(ctx_, llvm::Align(abi::kWorkspaceAlignment)));
    }
    llvm::FunctionCallee release = m_.getOrInsertFunction(
        abi::kWorkspaceFree, llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
    llvm::Value* all_granted = nullptr;
    for (size_t i = fn_.num_params; i < fn_.buffers.size(); ++i) {
      if (fn_.buffers[i].local) {
        buffers_.push_back(LocalBuffer(i));
        continue;
      }
      const int64_t bytes = fn_.buffers[i].num_elements * DTypeSize(StorageDType(i));
      llvm::Value* block = b_.CreateCall(alloc, {b_.getInt64(bytes)}, fn_.buffers[i].name);
      buffers_.push_back(block);
      llvm::Value* granted = b_.CreateIsNotNull(block);
      all_granted = all_granted ? b_.CreateAnd(all_granted, granted) : granted;
    }
    auto free_and_return = [&] {
      for (size_t i = fn_.num_params; i < fn_.buffers.size(); ++i) {
        if (!fn_.buffers[i].local) b_.CreateCall(release, {buffers_[i]});
      }
      b_.CreateRetVoid();
    };
    // A temporary the system refused (null): free the others (free ignores
    // null) and return before anything is written; the caller reports it.
    if (all_granted != nullptr) {
      llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx_, "temporaries_granted", impl);
      llvm::BasicBlock* refused = llvm::BasicBlock::Create(ctx_, "temporaries_refused", impl);
      b_.CreateCondBr(all_granted, run, refused,
                      llvm::MDBuilder(ctx_).createBranchWeights(1 << 20, 1));
      b_.SetInsertPoint(refused);
      free_and_return();
      b_.SetInsertPoint(run);
    }
    scopes_.emplace_back();
    absl::Status st = EmitStmt(fn_.body);
    if (!st.ok()) return st;
    free_and_return();
    if (fault_exit_ != nullptr) {
      b_.SetInsertPoint(fault_exit_);
      free_and_return();
    }

    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(m_, &os)) {
      return absl::InternalError(absl::StrCat("generated LLVM IR is invalid: ", os.str()));
    }
    return absl::OkStatus();
  }

 private:
  DType StorageDType(int buffer) const { return lower::StorageDTypeOf(fn_.buffers[buffer]); }
  llvm::Type* StorageType(int buffer) {
    return StorageElementType(ctx_, StorageDType(buffer));
  }
  llvm::Align StorageAlign(int buffer) const {
    return llvm::Align(DTypeSize(StorageDType(buffer)));
  }
  bool NarrowStorage(int buffer) const { return fn_.buffers[buffer].storage.has_value(); }
  // A loaded element (or vector) in its compute type. A float32 buffer stored
  // as integers (a constant panel the contraction schedule narrowed) converts
  // straight to float; every other narrow type widens as element_conversion.h says.
  llvm::Value* Widen(int buffer, llvm::Value* stored) {
    const DType storage = StorageDType(buffer);
    if (fn_.buffers[buffer].type == ScalarType::kF32 && IsIntegerDType(storage)) {
      llvm::Type* f32 = b_.getFloatTy();
      if (auto* vector = llvm::dyn_cast<llvm::VectorType>(stored->getType())) {
        f32 = llvm::VectorType::get(f32, vector->getElementCount());
      }
      return IsUnsignedDType(storage) ? b_.CreateUIToFP(stored, f32) : b_.CreateSIToFP(stored, f32);
    }
    return WidenFromStorage(b_, storage, stored);
  }

  // With bounds checks: `index` (scalar, or a vector under `mask`, null for
  // every lane) must lie inside `buffer`, or the current function returns.
  void CheckBounds(int buffer, llvm::Value* index, llvm::Value* mask, bool is_store) {
    if (!checks_) return;
    if (fault_exit_ == nullptr) fault_exit_ = llvm::BasicBlock::Create(ctx_, "bounds.exit", func_);
    EmitBoundsCheck(b_, {buffer, fn_.buffers[buffer].num_elements, index, mask, is_store},
                    fault_, fault_exit_);
  }

  void AddFunctionAttrs(llvm::Function* f) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    // Skylake-class CPUs default to 256-bit vectors; Kiln's loops are long and
    // regular enough that 512-bit ones pay.
    f->addFnAttr("prefer-vector-width", "512");
    f->addFnAttr("min-legal-vector-width", "512");
  }

  llvm::Type* ValueType(ScalarType t) {
    switch (t) {
      case ScalarType::kF32: return b_.getFloatTy();
      case ScalarType::kI64: return b_.getInt64Ty();
      case ScalarType::kBool: return b_.getInt1Ty();
      case ScalarType::kF64: return b_.getDoubleTy();
    }
    return b_.getFloatTy();
  }

  // Stack scratch in the current function's entry block: private to a thread.
  llvm::Value* LocalBuffer(size_t i) {
    llvm::Type* array = llvm::ArrayType::get(StorageType(static_cast<int>(i)),
                                             fn_.buffers[i].num_elements);
    llvm::IRBuilder<> tmp(&func_->getEntryBlock(), func_->getEntryBlock().begin());
    llvm::AllocaInst* a = tmp.CreateAlloca(array, nullptr, fn_.buffers[i].name);
    a->setAlignment(llvm::Align(64));
    return a;
  }

  llvm::AllocaInst* EntryAlloca(llvm::Type* type, const char* name) {
    llvm::IRBuilder<> tmp(&func_->getEntryBlock(), func_->getEntryBlock().begin());
    return tmp.CreateAlloca(type, nullptr, name);
  }

  // A counted loop [begin, end) of `var`; `body` emits the loop body.
  // Emitted already rotated (a guard, then a body that tests `iv + 1 ==
  // end` at its end), the form LLVM's loop passes want: LICM gets a
  // preheader without a loop-rotate round trip, and the exit test needs no
  // IndVarSimplify to become the compare-and-branch on one register that
  // tiny loops (a depthwise 3x3 window) depend on. The guard is left out
  // when the bounds are constants that make it true, and a loop of one
  // iteration is just its body (no loop pass is left to delete it).
  template <typename Body>
  absl::Status EmitLoop(const te::VarNode* var, llvm::Value* begin, llvm::Value* end,
                        ForKind kind, const Body& body) {
    const auto* begin_constant = llvm::dyn_cast<llvm::ConstantInt>(begin);
    const auto* end_constant = llvm::dyn_cast<llvm::ConstantInt>(end);
    const bool constant_bounds = begin_constant != nullptr && end_constant != nullptr;
    if (constant_bounds && begin_constant->getSExtValue() + 1 == end_constant->getSExtValue()) {
      vars_[var] = begin;
      scopes_.emplace_back();
      absl::Status st = body();
      scopes_.pop_back();
      vars_.erase(var);
      return st;
    }
    llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx_, var->name + ".body", func_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, var->name + ".exit", func_);
    if (constant_bounds && begin_constant->getSExtValue() < end_constant->getSExtValue()) {
      b_.CreateBr(loop);
    } else {
      b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, exit);
    }
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    b_.SetInsertPoint(loop);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, var->name);
    iv->addIncoming(begin, pre);
    vars_[var] = iv;
    scopes_.emplace_back();
    absl::Status st = body();
    scopes_.pop_back();
    vars_.erase(var);  // the induction variable does not dominate what follows
    if (!st.ok()) return st;
    llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
    iv->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpEQ(next, end), exit, loop);
    AttachLoopMetadata(back, kind);
    b_.SetInsertPoint(exit);
    return absl::OkStatus();
  }

  // A body made only of unrolled and vector loops: a register tile. Loops
  // around one must not be unrolled by LLVM, whose copies of the tile would
  // need more than the 32 vector registers and spill.
  static bool IsRegisterTile(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kStore:
      case StmtKind::kPrefetch:
      case StmtKind::kCall:
        return false;
      case StmtKind::kSeq:
        for (const Stmt& c : s->children) {
          if (!IsRegisterTile(c)) return false;
        }
        return !s->children.empty();
      case StmtKind::kFor:
        if (s->for_kind == ForKind::kVector) return true;
        return s->for_kind == ForKind::kUnrolled && IsRegisterTile(s->children[0]);
    }
    return false;
  }

  // Loop metadata for a serial loop around a register tile.
  static constexpr ForKind kNoUnroll = static_cast<ForKind>(-1);

  void AttachLoopMetadata(llvm::BranchInst* back, ForKind kind) {
    std::vector<llvm::Metadata*> ops{nullptr};
    if (kind == kNoUnroll) {
      ops.push_back(
          llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")}));
    }
    if (kind == ForKind::kVectorized) {
      ops.push_back(llvm::MDNode::get(
          ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                 llvm::ConstantAsMetadata::get(b_.getTrue())}));
    } else if (kind == ForKind::kUnrolled) {
      ops.push_back(
          llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.enable")}));
    }
    if (ops.size() == 1) return;
    llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
    md->replaceOperandWith(0, md);
    back->setMetadata(llvm::LLVMContext::MD_loop, md);
  }

  absl::Status EmitStmt(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kSeq:
        for (const Stmt& c : s->children) {
          absl::Status st = EmitStmt(c);
          if (!st.ok()) return st;
        }
        return absl::OkStatus();
      case StmtKind::kStore:
        return EmitPredicatedStore(s);
      case StmtKind::kPrefetch:
        return EmitPrefetch(s);
      case StmtKind::kCall:
        return EmitCall(s);
      case StmtKind::kFor:
        if (lane_var_ != nullptr) {
          return absl::InternalError("a loop inside a vector loop cannot be emitted");
        }
        if (s->for_kind == ForKind::kParallel) return EmitParallelFor(s);
        if (s->for_kind == ForKind::kUnrolled) {
          if (std::optional<TransposedStore> t = MatchTransposedStore(s)) {
            return EmitTransposedStore(*t);
          }
          return EmitUnrolled(s);
        }
        if (s->for_kind == ForKind::kVector) return EmitVectorFor(s);
        return EmitLoop(s->var.get(), b_.getInt64(0), b_.getInt64(s->var->extent),
                        IsRegisterTile(s->children[0]) ? kNoUnroll : s->for_kind,
                        [&] { return EmitStmt(s->children[0]); });
    }
    return absl::OkStatus();
  }

  // Each iteration emitted in turn with the variable bound to a constant.
  absl::Status EmitUnrolled(const Stmt& s) {
    const te::VarNode* var = s->var.get();
    for (int64_t i = 0; i < var->extent; ++i) {
      vars_[var] = b_.getInt64(i);
      scopes_.emplace_back();
      absl::Status st = EmitStmt(s->children[0]);
      scopes_.pop_back();
      if (!st.ok()) return st;
    }
    vars_.erase(var);
    return absl::OkStatus();
  }

  // A register tile stored with its rows (an unrolled loop) one element
  // apart and its lanes `stride` apart: the NCHW store of a channel-lanes
  // conv tile (rows are pixels, lanes channels), optionally split in several
  // vector blocks (an unrolled loop between rows and lanes). Emitted as a
  // transpose and one masked store per lane (transpose_rows.h) instead of a
  // scatter per row. The predicate's conjuncts must each depend on the rows
  // or on the lanes, not both: they become the stores' row and lane masks.
  struct TransposedStore {
    const te::VarNode* row = nullptr;
    const te::VarNode* block = nullptr;  // null when the lanes are one block
    const te::VarNode* lane = nullptr;
    const lower::StmtNode* store = nullptr;
    int64_t stride = 0;
    std::vector<Expr> outer, row_conds, lane_conds;  // by what they depend on
  };

  std::optional<TransposedStore> MatchTransposedStore(const Stmt& rows) {
    TransposedStore t;
    t.row = rows->var.get();
    if (t.row->extent < 2 || t.row->extent > kTransposeRows) return std::nullopt;
    const lower::StmtNode* s = rows->children[0].get();
    if (s->kind == StmtKind::kFor && s->for_kind == ForKind::kUnrolled) {
      t.block = s->var.get();
      s = s->children[0].get();
    }
    if (s->kind != StmtKind::kFor || s->for_kind != ForKind::kVector ||
        s->var->extent != kTransposeLanes) {
      return std::nullopt;
    }
    t.lane = s->var.get();
    t.store = s->children[0].get();
    if (t.store->kind != StmtKind::kStore ||
        fn_.buffers[t.store->buffer].type != ScalarType::kF32 || NarrowStorage(t.store->buffer) ||
        lower::LoadsBuffer(t.store->value, t.store->buffer)) {
      return std::nullopt;
    }
    const std::optional<int64_t> along_lanes = lower::StrideAlong(t.store->index, t.lane);
    if (!along_lanes || *along_lanes == 1 || *along_lanes == 0 ||
        lower::StrideAlong(t.store->index, t.row) != 1) {
      return std::nullopt;
    }
    t.stride = *along_lanes;
    if (t.store->predicate) {
      std::vector<Expr> all;
      Conjuncts(t.store->predicate, all);
      for (const Expr& c : all) {
        const bool by_row = lower::DependsOn(c, t.row);
        const bool by_lane = lower::DependsOn(c, t.lane);
        if (by_row && by_lane) return std::nullopt;
        (by_row ? t.row_conds : by_lane ? t.lane_conds : t.outer).push_back(c);
      }
    }
    return t;
  }

  llvm::Value* AllOf(const std::vector<Expr>& conds, bool vector) {
    llvm::Value* all = nullptr;
    for (const Expr& c : conds) {
      llvm::Value* v = vector ? EmitV(c) : EmitExpr(c);
      all = all ? b_.CreateAnd(all, v) : v;
    }
    return all;
  }

  // Row `r` of a transposed store, inside its vector state: the value under
  // the lane mask, computed only where the row's conditions hold (its loads
  // may lie past the buffer otherwise; zeros there), and whether they hold.
  std::pair<llvm::Value*, llvm::Value*> EmitTileRow(const TransposedStore& t, int64_t r,
                                                    llvm::Value* lane_mask) {
    vars_[t.row] = b_.getInt64(r);
    scopes_.emplace_back();
    vmemo_.clear();
    llvm::Value* ok = AllOf(t.row_conds, false);
    llvm::BasicBlock* before = b_.GetInsertBlock();
    llvm::BasicBlock* join = nullptr;
    if (ok != nullptr) {
      llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx_, "tile.row", func_);
      join = llvm::BasicBlock::Create(ctx_, "tile.row.end", func_);
      b_.CreateCondBr(ok, then, join);
      b_.SetInsertPoint(then);
      scopes_.emplace_back();
    }
    mask_ = lane_mask;
    llvm::Value* value = Splat(EmitV(t.store->value));
    mask_ = nullptr;
    if (join != nullptr) {
      // Nothing computed under the branch may be reused after it.
      scopes_.pop_back();
      vmemo_.clear();
      llvm::BasicBlock* computed = b_.GetInsertBlock();
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
      llvm::PHINode* phi = b_.CreatePHI(value->getType(), 2);
      phi->addIncoming(value, computed);
      phi->addIncoming(llvm::Constant::getNullValue(value->getType()), before);
      value = phi;
    }
    scopes_.pop_back();
    return {value, ok ? ok : b_.getTrue()};
  }

  absl::Status EmitTransposedStore(const TransposedStore& t) {
    const int64_t blocks = t.block ? t.block->extent : 1;
    const llvm::Align align(4);
    llvm::Type* f32 = b_.getFloatTy();
    for (int64_t block = 0; block < blocks; ++block) {
      if (t.block) vars_[t.block] = b_.getInt64(block);
      scopes_.emplace_back();
      llvm::BasicBlock* done = nullptr;
      if (llvm::Value* cond = AllOf(t.outer, false)) {
        llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx_, "tile.store", func_);
        done = llvm::BasicBlock::Create(ctx_, "tile.done", func_);
        b_.CreateCondBr(cond, then, done);
        b_.SetInsertPoint(then);
        scopes_.emplace_back();
      }
      lane_var_ = t.lane;
      lanes_ = kTransposeLanes;
      depends_.clear();
      vmemo_.clear();
      scopes_.emplace_back();
      llvm::Value* lane_mask = AllOf(t.lane_conds, true);
      std::vector<llvm::Value*> rows;
      std::vector<llvm::Value*> row_ok;
      for (int64_t r = 0; r < t.row->extent; ++r) {
        auto [value, ok] = EmitTileRow(t, r, lane_mask);
        rows.push_back(value);
        row_ok.push_back(ok);
      }
      vars_.erase(t.row);
      vmemo_.clear();
      depends_.clear();
      scopes_.pop_back();
      lane_var_ = nullptr;

      std::vector<llvm::Value*> columns = TransposeRows(b_, rows);
      llvm::Value* rows_mask =
          llvm::Constant::getNullValue(llvm::FixedVectorType::get(b_.getInt1Ty(), kTransposeRows));
      for (size_t r = 0; r < row_ok.size(); ++r) {
        rows_mask = b_.CreateInsertElement(rows_mask, row_ok[r], b_.getInt64(r));
      }
      // Lane l's column starts at the index of row 0, lane 0, plus l strides.
      vars_[t.row] = b_.getInt64(0);
      vars_[t.lane] = b_.getInt64(0);
      scopes_.emplace_back();
      llvm::Value* base = EmitExpr(t.store->index);
      scopes_.pop_back();
      vars_.erase(t.lane);
      vars_.erase(t.row);
      for (int l = 0; l < kTransposeLanes; ++l) {
        llvm::Value* index = b_.CreateAdd(base, b_.getInt64(l * t.stride));
        // Not inbounds: masked-off lanes may point past the end.
        llvm::Value* addr = b_.CreateGEP(f32, buffers_[t.store->buffer], index);
        llvm::Value* mask = rows_mask;
        if (lane_mask != nullptr) {
          llvm::Value* lane_ok = b_.CreateExtractElement(lane_mask, b_.getInt64(l));
          mask = b_.CreateAnd(mask, b_.CreateVectorSplat(kTransposeRows, lane_ok));
        }
        if (checks_) {
          // Row r of the column is element index + r.
          std::vector<llvm::Constant*> rows_iota;
          for (int r = 0; r < kTransposeRows; ++r) rows_iota.push_back(b_.getInt64(r));
          llvm::Value* indices = b_.CreateAdd(b_.CreateVectorSplat(kTransposeRows, index),
                                              llvm::ConstantVector::get(rows_iota));
          CheckBounds(t.store->buffer, indices, mask, /*is_store=*/true);
        }
        b_.CreateMaskedStore(columns[l], addr, align, mask);
      }
      if (done != nullptr) {
        scopes_.pop_back();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
      }
      scopes_.pop_back();
    }
    if (t.block) vars_.erase(t.block);
    return absl::OkStatus();
  }

  absl::Status EmitVectorFor(const Stmt& s) {
    lane_var_ = s->var.get();
    lanes_ = static_cast<unsigned>(s->var->extent);
    depends_.clear();
    vmemo_.clear();
    scopes_.emplace_back();
    absl::Status st = EmitStmt(s->children[0]);
    scopes_.pop_back();
    lane_var_ = nullptr;
    depends_.clear();
    vmemo_.clear();
    return st;
  }

  bool Varies(const Expr& e) {
    if (lane_var_ == nullptr) return false;
    auto it = depends_.find(e.get());
    if (it != depends_.end()) return it->second;
    bool v = e->kind == ExprKind::kVar && e->var.get() == lane_var_;
    for (const Expr& o : e->operands) {
      if (v) break;
      v = Varies(o);
    }
    depends_[e.get()] = v;
    return v;
  }

  static void Conjuncts(const Expr& e, std::vector<Expr>& out) {
    if (e->kind == ExprKind::kBinary && e->binary_op() == te::BinaryOp::kAnd) {
      Conjuncts(e->operands[0], out);
      Conjuncts(e->operands[1], out);
    } else {
      out.push_back(e);
    }
  }

  absl::Status EmitPredicatedStore(const Stmt& s) {
    std::vector<Expr> invariant, varying;
    if (s->predicate) {
      std::vector<Expr> all;
      Conjuncts(s->predicate, all);
      for (const Expr& c : all) (Varies(c) ? varying : invariant).push_back(c);
    }
    llvm::BasicBlock* cont = nullptr;
    if (!invariant.empty()) {
      llvm::Value* cond = EmitExpr(invariant[0]);
      for (size_t i = 1; i < invariant.size(); ++i)
        cond = b_.CreateAnd(cond, EmitExpr(invariant[i]));
      llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx_, "store.if", func_);
      cont = llvm::BasicBlock::Create(ctx_, "store.end", func_);
      b_.CreateCondBr(cond, then, cont);
      b_.SetInsertPoint(then);
      scopes_.emplace_back();
    }
    if (!varying.empty()) {
      vmemo_.clear();  // loads made under this mask must not be reused unmasked
      llvm::Value* mask = EmitV(varying[0]);
      for (size_t i = 1; i < varying.size(); ++i) mask = b_.CreateAnd(mask, EmitV(varying[i]));
      mask_ = mask;
    }
    EmitStore(s);
    if (mask_ != nullptr) {
      mask_ = nullptr;
      vmemo_.clear();
    }
    if (cont != nullptr) {
      scopes_.pop_back();
      vmemo_.clear();
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
    return absl::OkStatus();
  }

  // llvm.prefetch(read, locality 2: into L2, or 3: into L1 too, data).
  // Outside vector loops only: one line per statement.
  absl::Status EmitPrefetch(const Stmt& s) {
    if (lane_var_ != nullptr) return absl::InternalError("a prefetch cannot be vectorised");
    llvm::Type* mem = StorageType(s->buffer);
    llvm::Value* addr = b_.CreateGEP(mem, buffers_[s->buffer], EmitExpr(s->index));
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {addr->getType()},
                       {addr, b_.getInt32(0), b_.getInt32(s->into_l1 ? 3 : 2), b_.getInt32(1)});
    return absl::OkStatus();
  }

  // A call into the runtime (common/kernel_abi.h): void callee(args...),
  // buffers passed as element addresses, the rest as i64. The callee touches
  // only memory its arguments point to, which lets LLVM keep values across
  // it. Bounds-checked kernels do not check its arguments: lowering computes
  // them from shapes alone, never from data.
  absl::Status EmitCall(const Stmt& s) {
    if (lane_var_ != nullptr) return absl::InternalError("a call cannot be vectorised");
    std::vector<llvm::Type*> types;
    std::vector<llvm::Value*> values;
    for (const lower::CallArg& a : s->args) {
      llvm::Value* v = EmitExpr(a.value);
      if (a.buffer >= 0) v = b_.CreateGEP(StorageType(a.buffer), buffers_[a.buffer], v);
      types.push_back(v->getType());
      values.push_back(v);
    }
    llvm::FunctionCallee callee =
        m_.getOrInsertFunction(s->callee, llvm::FunctionType::get(b_.getVoidTy(), types, false));
    if (auto* decl = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
      decl->setDoesNotThrow();
      decl->setWillReturn();
      decl->setMemoryEffects(llvm::MemoryEffects::argMemOnly());
    }
    b_.CreateCall(callee, values);
    return absl::OkStatus();
  }

  void EmitStore(const Stmt& s) {
    const DType storage = StorageDType(s->buffer);
    llvm::Type* mem = StorageType(s->buffer);
    if (lane_var_ == nullptr) {
      llvm::Value* index = EmitExpr(s->index);
      llvm::Value* value = NarrowToStorage(b_, storage, EmitExpr(s->value));
      CheckBounds(s->buffer, index, nullptr, /*is_store=*/true);
      b_.CreateStore(value, b_.CreateInBoundsGEP(mem, buffers_[s->buffer], index));
      return;
    }
    llvm::Value* value = NarrowToStorage(b_, storage, Splat(EmitV(s->value)));
    if (checks_) CheckBounds(s->buffer, Splat(EmitV(s->index)), mask_, /*is_store=*/true);
    const llvm::Align align = StorageAlign(s->buffer);
    std::optional<int64_t> stride = lower::StrideAlong(s->index, lane_var_);
    if (stride == 1) {
      llvm::Value* addr =
          b_.CreateInBoundsGEP(mem, buffers_[s->buffer], ScalarAtLaneZero(s->index));
      if (mask_ != nullptr) {
        b_.CreateMaskedStore(value, addr, align, mask_);
      } else {
        b_.CreateAlignedStore(value, addr, align);
      }
      return;
    }
    llvm::Value* addrs = b_.CreateInBoundsGEP(mem, buffers_[s->buffer], Splat(EmitV(s->index)));
    b_.CreateMaskedScatter(value, addrs, align, mask_ ? mask_ : AllLanes());
  }

  llvm::Type* VectorOf(llvm::Type* scalar) {
    return llvm::FixedVectorType::get(scalar, lanes_);
  }

  // The scalar or vector type of `model`'s shape with element `scalar`.
  llvm::Type* TypeLike(llvm::Type* scalar, llvm::Value* model) {
    return model->getType()->isVectorTy() ? VectorOf(scalar) : scalar;
  }

  llvm::Value* AllLanes() { return llvm::ConstantInt::getTrue(VectorOf(b_.getInt1Ty())); }

  llvm::Value* Splat(llvm::Value* v) {
    return v->getType()->isVectorTy() ? v : b_.CreateVectorSplat(lanes_, v);
  }

  // `e` evaluated with the vector loop's variable at 0: the first lane.
  llvm::Value* ScalarAtLaneZero(const Expr& e) {
    vars_[lane_var_] = b_.getInt64(0);
    scopes_.emplace_back();
    llvm::Value* v = EmitExpr(e);
    scopes_.pop_back();
    vars_.erase(lane_var_);
    return v;
  }

  // `e` inside a vector loop: a vector when it varies with the loop variable.
  llvm::Value* EmitV(const Expr& e) {
    if (!Varies(e)) return EmitExpr(e);
    auto it = vmemo_.find(e.get());
    if (it != vmemo_.end()) return it->second;
    llvm::Value* v = EmitVUncached(e);
    vmemo_[e.get()] = v;
    return v;
  }

  llvm::Value* EmitVUncached(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kVar: {
        std::vector<llvm::Constant*> lanes;
        for (unsigned i = 0; i < lanes_; ++i) lanes.push_back(b_.getInt64(i));
        return llvm::ConstantVector::get(lanes);
      }
      case ExprKind::kLoad: {
        llvm::Type* mem = StorageType(e->buffer);
        const llvm::Align align = StorageAlign(e->buffer);
        // Whichever way it is loaded below, its elements are these lanes'.
        if (checks_) CheckBounds(e->buffer, Splat(EmitV(e->operands[0])), mask_, false);
        llvm::Value* v;
        std::optional<int64_t> stride = lower::StrideAlong(e->operands[0], lane_var_);
        if (stride == 1) {
          llvm::Value* addr = b_.CreateInBoundsGEP(mem, buffers_[e->buffer],
                                                   ScalarAtLaneZero(e->operands[0]));
          if (mask_ != nullptr) {
            v = b_.CreateMaskedLoad(VectorOf(mem), addr, align, mask_,
                                    llvm::Constant::getNullValue(VectorOf(mem)));
          } else {
            v = b_.CreateAlignedLoad(VectorOf(mem), addr, align);
          }
        } else if (stride && *stride >= 2 && *stride <= 4) {
          v = EmitStridedLoad(e, *stride);
        } else if (std::optional<std::vector<int64_t>> offsets = LaneWindow(e->operands[0]);
                   offsets && mask_ == nullptr) {
          v = EmitWindowLoad(e, *offsets);
        } else {
          llvm::Value* addrs =
              b_.CreateInBoundsGEP(mem, buffers_[e->buffer], Splat(EmitV(e->operands[0])));
          v = b_.CreateMaskedGather(VectorOf(mem), addrs, align, mask_ ? mask_ : AllLanes(),
                                    llvm::Constant::getNullValue(VectorOf(mem)));
        }
        return Widen(e->buffer, v);
      }
      case ExprKind::kBinary:
        if (llvm::Value* v =
                EmitFloatExtremumTree(e, [this](const Expr& x) { return Splat(EmitV(x)); })) {
          return v;
        }
        return EmitBinaryOn(e, Splat(EmitV(e->operands[0])), Splat(EmitV(e->operands[1])));
      case ExprKind::kUnary:
        if (const std::optional<ScaledOperand> s = ErfOfScaled(e)) {
          return EmitErf(EmitV(s->x), s->scale);
        }
        return EmitUnaryOn(e, EmitV(e->operands[0]));
      case ExprKind::kCompare:
        return EmitCompareOn(e, Splat(EmitV(e->operands[0])), Splat(EmitV(e->operands[1])));
      case ExprKind::kSelect:
        return b_.CreateSelect(EmitV(e->operands[0]), Splat(EmitV(e->operands[1])),
                               Splat(EmitV(e->operands[2])));
      case ExprKind::kCast:
        return EmitCastOn(e, EmitV(e->operands[0]));
      default: {
        // A reduction inside a vector loop: one scalar copy per lane.
        llvm::Value* out = llvm::UndefValue::get(VectorOf(ValueType(e->type)));
        for (unsigned i = 0; i < lanes_; ++i) {
          vars_[lane_var_] = b_.getInt64(i);
          scopes_.emplace_back();
          llvm::Value* lane = mask_ != nullptr ? EmitIfLaneOn(e, i) : EmitExpr(e);
          out = b_.CreateInsertElement(out, lane, b_.getInt64(i));
          scopes_.pop_back();
        }
        vars_.erase(lane_var_);
        return out;
      }
    }
  }

  // Lane `lane`'s scalar copy of `e` where the mask has the lane on, and 0
  // where it is off: an idle lane's loads may lie past their buffers (the
  // last block of a 440-channel average pool read 8 lanes' windows past its
  // input, until bounds-checked kernels caught it).
  llvm::Value* EmitIfLaneOn(const Expr& e, unsigned lane) {
    llvm::Value* on = b_.CreateExtractElement(mask_, b_.getInt64(lane));
    llvm::BasicBlock* before = b_.GetInsertBlock();
    llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx_, "lane.on", func_);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx_, "lane.end", func_);
    b_.CreateCondBr(on, then, join);
    b_.SetInsertPoint(then);
    llvm::Value* v = EmitExpr(e);  // memoised in the lane's own scope only
    llvm::BasicBlock* computed = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, computed);
    phi->addIncoming(llvm::Constant::getNullValue(v->getType()), before);
    return phi;
  }

  // Outlines the loop body into name.par<k> and hands it to kiln_parallel_for.
  absl::Status EmitParallelFor(const Stmt& s) {
    llvm::Type* ptr = b_.getPtrTy();
    // Closure: every buffer pointer, then every bound loop variable, then
    // (checked) the fault slot.
    std::vector<const te::VarNode*> bound;
    for (const auto& [var, value] : vars_) bound.push_back(var);
    const size_t fault_slot = buffers_.size() + bound.size();
    const size_t slots = fault_slot + (checks_ ? 1 : 0);
    llvm::AllocaInst* closure =
        EntryAlloca(llvm::ArrayType::get(ptr, std::max<size_t>(slots, 1)), "closure");
    for (size_t i = 0; i < buffers_.size(); ++i) {
      b_.CreateStore(buffers_[i], b_.CreateConstInBoundsGEP2_64(closure->getAllocatedType(),
                                                                closure, 0, i));
    }
    for (size_t i = 0; i < bound.size(); ++i) {
      b_.CreateStore(b_.CreateIntToPtr(vars_[bound[i]], ptr),
                     b_.CreateConstInBoundsGEP2_64(closure->getAllocatedType(), closure, 0,
                                                   buffers_.size() + i));
    }
    if (checks_) {
      b_.CreateStore(fault_, b_.CreateConstInBoundsGEP2_64(closure->getAllocatedType(), closure,
                                                           0, fault_slot));
    }

    auto* body_type =
        llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
    llvm::Function* body = llvm::Function::Create(
        body_type, llvm::Function::InternalLinkage,
        absl::StrCat(fn_.name, ".par", parallel_count_++), m_);
    AddFunctionAttrs(body);

    // Save the emitter state of the calling function.
    llvm::Function* saved_func = func_;
    llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
    std::vector<llvm::Value*> saved_buffers = buffers_;
    auto saved_vars = vars_;
    auto saved_scopes = std::move(scopes_);
    llvm::Value* saved_fault = fault_;
    llvm::BasicBlock* saved_fault_exit = fault_exit_;
    fault_exit_ = nullptr;

    func_ = body;
    scopes_.clear();
    scopes_.emplace_back();
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
    llvm::Type* closure_type = closure->getAllocatedType();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      buffers_[i] = fn_.buffers[i].local
                        ? LocalBuffer(i)
                        : b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP2_64(
                                                 closure_type, body->getArg(0), 0, i));
    }
    vars_.clear();
    for (size_t i = 0; i < bound.size(); ++i) {
      vars_[bound[i]] = b_.CreatePtrToInt(
          b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP2_64(closure_type, body->getArg(0), 0,
                                                           buffers_.size() + i)),
          b_.getInt64Ty());
    }
    if (checks_) {
      fault_ = b_.CreateLoad(
          ptr, b_.CreateConstInBoundsGEP2_64(closure_type, body->getArg(0), 0, fault_slot),
          "fault");
    }
    absl::Status st = EmitLoop(s->var.get(), body->getArg(1), body->getArg(2), ForKind::kSerial,
                               [&] { return EmitStmt(s->children[0]); });
    b_.CreateRetVoid();
    if (fault_exit_ != nullptr) {
      b_.SetInsertPoint(fault_exit_);
      b_.CreateRetVoid();
    }

    func_ = saved_func;
    b_.restoreIP(saved_ip);
    buffers_ = std::move(saved_buffers);
    vars_ = std::move(saved_vars);
    scopes_ = std::move(saved_scopes);
    fault_ = saved_fault;
    fault_exit_ = saved_fault_exit;
    if (!st.ok()) return st;

    llvm::FunctionCallee parallel_for = m_.getOrInsertFunction(
        abi::kParallelFor,
        llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, b_.getInt64Ty()}, false));
    b_.CreateCall(parallel_for, {body, closure, b_.getInt64(s->var->extent)});
    if (checks_) {
      // A body that faulted returned early, the others ran to their ends:
      // nothing after this loop may run on what they left.
      llvm::LoadInst* faulted = b_.CreateAlignedLoad(b_.getInt32Ty(), fault_, llvm::Align(4));
      faulted->setAtomic(llvm::AtomicOrdering::Acquire);
      if (fault_exit_ == nullptr) {
        fault_exit_ = llvm::BasicBlock::Create(ctx_, "bounds.exit", func_);
      }
      llvm::BasicBlock* go_on = llvm::BasicBlock::Create(ctx_, "parallel.ok", func_);
      b_.CreateCondBr(b_.CreateICmpNE(faulted, b_.getInt32(0)), fault_exit_, go_on,
                      llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20));
      b_.SetInsertPoint(go_on);
    }
    return absl::OkStatus();
  }

  // A load whose index steps by 2 to 4 elements along the lanes: one
  // contiguous load of stride x lanes elements, of which a shuffle keeps
  // every stride-th, instead of a gather (a stride-2 pool's window columns,
  // which LLVM's vectoriser left as gathers). Only the kept elements of
  // active lanes are loaded, so nothing is read that the gather would not.
  llvm::Value* EmitStridedLoad(const Expr& e, int64_t stride) {
    llvm::Type* mem = StorageType(e->buffer);
    const unsigned wide = lanes_ * static_cast<unsigned>(stride);
    std::vector<int> keep(lanes_), spread(wide);
    std::vector<llvm::Constant*> first_of_each;
    for (unsigned i = 0; i < lanes_; ++i) keep[i] = static_cast<int>(i * stride);
    for (unsigned j = 0; j < wide; ++j) {
      spread[j] = static_cast<int>(j / stride);
      first_of_each.push_back(b_.getInt1(j % stride == 0));
    }
    llvm::Value* wide_mask = llvm::ConstantVector::get(first_of_each);
    if (mask_ != nullptr)
      wide_mask = b_.CreateAnd(b_.CreateShuffleVector(mask_, spread), wide_mask);
    // Lane 0 may be masked off and its element outside the buffer.
    llvm::Value* addr = b_.CreateGEP(mem, buffers_[e->buffer], ScalarAtLaneZero(e->operands[0]));
    llvm::Value* loaded = b_.CreateMaskedLoad(llvm::FixedVectorType::get(mem, wide), addr,
                                              StorageAlign(e->buffer), wide_mask);
    return Widen(e->buffer, b_.CreateShuffleVector(loaded, keep));
  }

  // The value of `e`, an expression of the lane variable and constants
  // alone, at lane `lane`; nullopt for anything else.
  std::optional<int64_t> AtLane(const te::ExprNode* e, int64_t lane) const {
    if (e->kind == ExprKind::kIntImm) return e->int_value;
    if (e->kind == ExprKind::kVar) {
      return e->var.get() == lane_var_ ? std::optional<int64_t>(lane) : std::nullopt;
    }
    if (e->kind != ExprKind::kBinary) return std::nullopt;
    std::optional<int64_t> a = AtLane(e->operands[0].get(), lane);
    std::optional<int64_t> b = AtLane(e->operands[1].get(), lane);
    if (!a || !b) return std::nullopt;
    switch (e->binary_op()) {
      case te::BinaryOp::kAdd:
        return *a + *b;
      case te::BinaryOp::kSub:
        return *a - *b;
      case te::BinaryOp::kMul:
        return *a * *b;
      case te::BinaryOp::kDiv:
        return *b > 0 && *a >= 0 ? std::optional<int64_t>(*a / *b) : std::nullopt;
      case te::BinaryOp::kMod:
        return *b > 0 && *a >= 0 ? std::optional<int64_t>(*a % *b) : std::nullopt;
      default:
        return std::nullopt;
    }
  }

  bool MentionsLane(const te::ExprNode* e) const {
    if (e->kind == ExprKind::kVar) return e->var.get() == lane_var_;
    for (const Expr& o : e->operands) {
      if (MentionsLane(o.get())) return true;
    }
    return false;
  }

  // For an index that is (what does not vary) + f(lane), f a function of the
  // lane alone whose values stay within one vector's width of f(0) (a
  // grouped conv's input lane (lane / w) * w + j): f(lane) - f(0) for every
  // lane; nullopt otherwise.
  std::optional<std::vector<int64_t>> LaneWindow(const Expr& index) const {
    const lower::LinearForm form = lower::AnalyzeLinear(index);
    std::vector<int64_t> offsets(lanes_, 0);
    for (const auto& [atom, coefficient] : form.terms) {
      if (!MentionsLane(atom)) continue;
      const std::optional<int64_t> at0 = AtLane(atom, 0);
      if (!at0) return std::nullopt;
      for (unsigned i = 1; i < lanes_; ++i) {
        const std::optional<int64_t> at = AtLane(atom, i);
        if (!at) return std::nullopt;
        offsets[i] += coefficient * (*at - *at0);
      }
    }
    const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
    if (*lo < 0 || *hi >= static_cast<int64_t>(lanes_)) return std::nullopt;
    return offsets;
  }

  // Where lane 0's element of a LaneWindow load sits in its line of lanes_
  // elements, when every lane's element lies in that one line and the
  // buffer holds whole lines (so the whole line is inside it): the index's
  // terms that are not whole lines are constants here (unrolled loops'
  // variables, the lane's own term at lane 0). nullopt otherwise.
  std::optional<int64_t> LineShift(const Expr& e, const std::vector<int64_t>& offsets) const {
    const int64_t line = static_cast<int64_t>(lanes_);
    if (fn_.buffers[e->buffer].num_elements % line != 0) return std::nullopt;
    const lower::LinearForm form = lower::AnalyzeLinear(e->operands[0]);
    int64_t shift = form.constant;
    for (const auto& [atom, coefficient] : form.terms) {
      if (coefficient % line == 0) continue;
      if (MentionsLane(atom)) {
        shift += coefficient * *AtLane(atom, 0);  // LaneWindow evaluated it
        continue;
      }
      if (atom->kind != ExprKind::kVar) return std::nullopt;
      auto it = vars_.find(atom->var.get());
      if (it == vars_.end()) return std::nullopt;
      auto* value = llvm::dyn_cast<llvm::ConstantInt>(it->second);
      if (value == nullptr) return std::nullopt;
      shift += coefficient * value->getSExtValue();
    }
    shift = (shift % line + line) % line;
    for (int64_t o : offsets) {
      if (shift + o >= line) return std::nullopt;
    }
    return shift;
  }

  // A LaneWindow load, one load and a permute instead of a gather: the
  // whole line of lane 0's element where LineShift finds one (so the loads
  // of a grouped conv's input lanes j < w all read the same line, and LLVM
  // keeps one), else the window's elements that some lane reads (a masked
  // load from lane 0's element); then shuffled into the lanes.
  llvm::Value* EmitWindowLoad(const Expr& e, const std::vector<int64_t>& offsets) {
    llvm::Type* mem = StorageType(e->buffer);
    llvm::Value* first = ScalarAtLaneZero(e->operands[0]);
    std::vector<int> pick(lanes_);
    llvm::Value* loaded;
    if (std::optional<int64_t> shift = LineShift(e, offsets)) {
      for (unsigned i = 0; i < lanes_; ++i) pick[i] = static_cast<int>(*shift + offsets[i]);
      llvm::Value* addr =
          b_.CreateInBoundsGEP(mem, buffers_[e->buffer], b_.CreateSub(first, b_.getInt64(*shift)));
      loaded = b_.CreateAlignedLoad(VectorOf(mem), addr, StorageAlign(e->buffer));
    } else {
      std::vector<llvm::Constant*> read(lanes_, b_.getInt1(false));
      for (unsigned i = 0; i < lanes_; ++i) {
        pick[i] = static_cast<int>(offsets[i]);
        read[offsets[i]] = b_.getInt1(true);
      }
      llvm::Value* addr = b_.CreateGEP(mem, buffers_[e->buffer], first);
      loaded = b_.CreateMaskedLoad(VectorOf(mem), addr, StorageAlign(e->buffer),
                                   llvm::ConstantVector::get(read));
    }
    return Widen(e->buffer, b_.CreateShuffleVector(loaded, pick));
  }

  llvm::Value* Lookup(const te::ExprNode* e) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(e);
      if (found != it->end()) return found->second;
    }
    return nullptr;
  }

  llvm::Value* EmitExpr(const Expr& e) {
    if (llvm::Value* v = Lookup(e.get())) return v;
    llvm::Value* v = EmitExprUncached(e);
    scopes_.back()[e.get()] = v;
    return v;
  }

  llvm::Value* CallIntrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    llvm::Function* f = llvm::Intrinsic::getDeclaration(&m_, id, {args[0]->getType()});
    return b_.CreateCall(f, args);
  }

  llvm::Value* CallLibm(const char* name, llvm::Value* x) {
    llvm::FunctionCallee f = m_.getOrInsertFunction(
        name, llvm::FunctionType::get(x->getType(), {x->getType()}, false));
    llvm::CallInst* call = b_.CreateCall(f, {x});
    call->setDoesNotThrow();
    call->setOnlyReadsMemory();
    return call;
  }

  llvm::Value* EmitExprUncached(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return e->type == ScalarType::kBool ? b_.getInt1(e->int_value != 0)
                                            : static_cast<llvm::Value*>(b_.getInt64(e->int_value));
      case ExprKind::kFloatImm:
        return llvm::ConstantFP::get(ValueType(e->type), e->float_value);
      case ExprKind::kVar:
        return vars_.at(e->var.get());
      case ExprKind::kLoad: {
        llvm::Value* index = EmitExpr(e->operands[0]);
        CheckBounds(e->buffer, index, nullptr, /*is_store=*/false);
        llvm::Value* addr =
            b_.CreateInBoundsGEP(StorageType(e->buffer), buffers_[e->buffer], index);
        return Widen(e->buffer, b_.CreateLoad(StorageType(e->buffer), addr));
      }
      case ExprKind::kBinary:
        if (llvm::Value* v =
                EmitFloatExtremumTree(e, [this](const Expr& x) { return EmitExpr(x); })) {
          return v;
        }
        return EmitBinaryOn(e, EmitExpr(e->operands[0]), EmitExpr(e->operands[1]));
      case ExprKind::kUnary:
        if (const std::optional<ScaledOperand> s = ErfOfScaled(e)) {
          return EmitErf(EmitExpr(s->x), s->scale);
        }
        return EmitUnaryOn(e, EmitExpr(e->operands[0]));
      case ExprKind::kCompare:
        return EmitCompareOn(e, EmitExpr(e->operands[0]), EmitExpr(e->operands[1]));
      case ExprKind::kSelect:
        return b_.CreateSelect(EmitExpr(e->operands[0]), EmitExpr(e->operands[1]),
                               EmitExpr(e->operands[2]));
      case ExprKind::kCast:
        return EmitCastOn(e, EmitExpr(e->operands[0]));
      case ExprKind::kReduce:
        return EmitReduce(e);
    }
    return nullptr;
  }

  llvm::Value* EmitCompareOn(const Expr& e, llvm::Value* a, llvm::Value* c) {
        const bool is_float = te::IsFloat(e->operands[0]->type);
        using P = llvm::CmpInst::Predicate;
        static const P kFloat[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT,
                                   P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
        static const P kInt[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT,
                                 P::ICMP_SGE, P::ICMP_EQ,  P::ICMP_NE};
        // Bools are 0 and 1 (false < true); a signed i1 compare has true = -1.
        static const P kBool[] = {P::ICMP_ULT, P::ICMP_ULE, P::ICMP_UGT,
                                  P::ICMP_UGE, P::ICMP_EQ,  P::ICMP_NE};
        const int op = static_cast<int>(e->compare_op());
        if (is_float) return b_.CreateFCmp(kFloat[op], a, c);
        return b_.CreateICmp(e->operands[0]->type == ScalarType::kBool ? kBool[op] : kInt[op], a,
                             c);
  }

  // Float min and max propagate NaN from either operand, as NumPy's
  // minimum/maximum and ONNX's Relu, Max and Clip do (issue 20: relu turned
  // NaN into 0). "c < a ? c : a" keeps a NaN `a` and is one vminps/vmaxps
  // (its operands swapped); the NaN test on `c` folds away when `c` is a
  // constant, as in relu, clip and exp's clamp, so those stay one
  // instruction.
  llvm::Value* FloatMin(llvm::Value* a, llvm::Value* c) {
    llvm::Value* m = b_.CreateSelect(b_.CreateFCmpOLT(c, a), c, a);
    return b_.CreateSelect(b_.CreateFCmpUNO(c, c), c, m);
  }
  llvm::Value* FloatMax(llvm::Value* a, llvm::Value* c) {
    llvm::Value* m = b_.CreateSelect(b_.CreateFCmpOGT(c, a), c, a);
    return b_.CreateSelect(b_.CreateFCmpUNO(c, c), c, m);
  }

  // The value of a constant i1 (or splat <N x i1>), if `v` is one.
  static std::optional<bool> ConstantCondition(llvm::Value* v) {
    auto* c = llvm::dyn_cast<llvm::Constant>(v);
    if (c != nullptr && c->getType()->isVectorTy()) c = c->getSplatValue();
    auto* i = llvm::dyn_cast_or_null<llvm::ConstantInt>(c);
    if (i == nullptr) return std::nullopt;
    return !i->isZero();
  }

  // The value of a float constant (or splat), if `v` is one.
  static std::optional<double> ConstantFloat(llvm::Value* v) {
    auto* c = llvm::dyn_cast<llvm::Constant>(v);
    if (c != nullptr && c->getType()->isVectorTy()) c = c->getSplatValue();
    auto* f = llvm::dyn_cast_or_null<llvm::ConstantFP>(c);
    if (f == nullptr) return std::nullopt;
    return f->getValueAPF().convertToDouble();
  }

  // A float max (or min) over three or more leaves, as a pool's unrolled
  // window is, or null for any other expression. Pairwise FloatMax spends
  // four instructions a leaf (InstCombine makes each NaN test part of the
  // compare: vcmpltps, vcmpunordps, korw, vblendmps); here a balanced tree of
  // "r > l ? r : l" (one vmaxps each, a NaN `l` kept) and one unordered
  // compare per pair of the other leaves, OR-ed, then one select to NaN: 16
  // instructions for a 3x3 window instead of 32. Ties keep the leftmost
  // leaf, as the chain does (-0 and +0 come out the same), and an infinite
  // leaf that cannot win (-inf in a max: a padded tap) is dropped. A NaN
  // result is the default quiet NaN, not the input's payload.
  llvm::Value* EmitFloatExtremumTree(const Expr& e,
                                     const std::function<llvm::Value*(const Expr&)>& emit) {
    if (!te::IsFloat(e->type) || e->kind != ExprKind::kBinary) return nullptr;
    const te::BinaryOp op = e->binary_op();
    if (op != te::BinaryOp::kMax && op != te::BinaryOp::kMin) return nullptr;
    // At most this many leaves (a DAG such as max(y, y) of max(z, z) ...
    // would otherwise unfold exponentially); a larger tree goes pairwise.
    constexpr size_t kMaxLeaves = 64;
    std::vector<Expr> leaves;
    std::function<void(const Expr&)> collect = [&](const Expr& x) {
      if (leaves.size() > kMaxLeaves) return;
      if (x->kind == ExprKind::kBinary && x->binary_op() == op && x->type == e->type) {
        collect(x->operands[0]);
        collect(x->operands[1]);
      } else {
        leaves.push_back(x);
      }
    };
    collect(e);
    if (leaves.size() < 3 || leaves.size() > kMaxLeaves) return nullptr;
    const double loser = op == te::BinaryOp::kMax ? -INFINITY : INFINITY;
    // A padded tap is still a select on a constant condition here (the
    // loop IR folds indices, not conditions): take its chosen value.
    std::vector<llvm::Value*> values;
    llvm::Value* lost = nullptr;
    for (const Expr& x : leaves) {
      llvm::Value* v = emit(x);
      if (auto* select = llvm::dyn_cast<llvm::SelectInst>(v)) {
        if (std::optional<bool> c = ConstantCondition(select->getCondition())) {
          v = *c ? select->getTrueValue() : select->getFalseValue();
        }
      }
      if (ConstantFloat(v) == loser) {
        lost = v;
      } else {
        values.push_back(v);
      }
    }
    if (values.empty()) return lost;
    // The NaN test: every leaf but the first, which the tree keeps, and but
    // constants that are not NaN.
    std::vector<llvm::Value*> tested;
    for (size_t i = 1; i < values.size(); ++i) {
      std::optional<double> constant = ConstantFloat(values[i]);
      if (!constant || std::isnan(*constant)) tested.push_back(values[i]);
    }
    std::vector<llvm::Value*> unordered;
    for (size_t i = 0; i < tested.size(); i += 2) {
      llvm::Value* other = i + 1 < tested.size() ? tested[i + 1] : tested[i];
      unordered.push_back(b_.CreateFCmpUNO(tested[i], other));
    }
    while (values.size() > 1) {
      std::vector<llvm::Value*> next;
      for (size_t i = 0; i + 1 < values.size(); i += 2) {
        llvm::Value* l = values[i];
        llvm::Value* r = values[i + 1];
        llvm::Value* wins =
            op == te::BinaryOp::kMax ? b_.CreateFCmpOGT(r, l) : b_.CreateFCmpOLT(r, l);
        next.push_back(b_.CreateSelect(wins, r, l));
      }
      if (values.size() % 2 == 1) next.push_back(values.back());
      values = std::move(next);
    }
    while (unordered.size() > 1) {
      std::vector<llvm::Value*> next;
      for (size_t i = 0; i + 1 < unordered.size(); i += 2) {
        next.push_back(b_.CreateOr(unordered[i], unordered[i + 1]));
      }
      if (unordered.size() % 2 == 1) next.push_back(unordered.back());
      unordered = std::move(next);
    }
    if (unordered.empty()) return values[0];
    return b_.CreateSelect(unordered[0], llvm::ConstantFP::getNaN(values[0]->getType()), values[0]);
  }

  // Integer a / c and a % c that never fault: x86's idiv traps on a divisor
  // of 0 and on INT64_MIN / -1, and a model's own inputs choose both. As
  // NumPy gives: x / 0 and x % 0 are 0; x / -1 is -x (wrapping), x % -1 is 0.
  llvm::Value* SafeIntegerDivide(bool divide, llvm::Value* a, llvm::Value* c) {
    llvm::Value* zero = llvm::ConstantInt::get(c->getType(), 0);
    llvm::Value* minus_one = llvm::ConstantInt::getSigned(c->getType(), -1);
    llvm::Value* is_zero = b_.CreateICmpEQ(c, zero);
    llvm::Value* is_minus_one = b_.CreateICmpEQ(c, minus_one);
    llvm::Value* safe = b_.CreateSelect(b_.CreateOr(is_zero, is_minus_one),
                                        llvm::ConstantInt::get(c->getType(), 1), c);
    llvm::Value* result = divide ? b_.CreateSDiv(a, safe) : b_.CreateSRem(a, safe);
    llvm::Value* by_minus_one = divide ? b_.CreateSub(zero, a) : zero;
    return b_.CreateSelect(is_zero, zero, b_.CreateSelect(is_minus_one, by_minus_one, result));
  }

  llvm::Value* EmitBinaryOn(const Expr& e, llvm::Value* a, llvm::Value* c) {
    using te::BinaryOp;
    if (te::IsFloat(e->type)) {
      switch (e->binary_op()) {
        case BinaryOp::kAdd: return b_.CreateFAdd(a, c);
        case BinaryOp::kSub: return b_.CreateFSub(a, c);
        case BinaryOp::kMul: return b_.CreateFMul(a, c);
        case BinaryOp::kDiv: return b_.CreateFDiv(a, c);
        case BinaryOp::kMod: return b_.CreateFRem(a, c);
        case BinaryOp::kMin:
          return FloatMin(a, c);
        case BinaryOp::kMax:
          return FloatMax(a, c);
        case BinaryOp::kPow: return CallIntrinsic(llvm::Intrinsic::pow, {a, c});
        default: break;
      }
    }
    switch (e->binary_op()) {
      case BinaryOp::kAdd: return b_.CreateAdd(a, c);
      case BinaryOp::kSub: return b_.CreateSub(a, c);
      case BinaryOp::kMul: return b_.CreateMul(a, c);
      case BinaryOp::kDiv:
      case BinaryOp::kMod: return SafeIntegerDivide(e->binary_op() == BinaryOp::kDiv, a, c);
      case BinaryOp::kMin: return CallIntrinsic(llvm::Intrinsic::smin, {a, c});
      case BinaryOp::kMax: return CallIntrinsic(llvm::Intrinsic::smax, {a, c});
      case BinaryOp::kAnd: return b_.CreateAnd(a, c);
      case BinaryOp::kOr: return b_.CreateOr(a, c);
      case BinaryOp::kShl:
      case BinaryOp::kShr: {
        // x86 masks the count to 6 bits and LLVM makes 64+ poison: 0 instead.
        llvm::Value* in_range =
            b_.CreateICmpULT(c, llvm::ConstantInt::get(c->getType(), 64));
        llvm::Value* count =
            b_.CreateSelect(in_range, c, llvm::ConstantInt::get(c->getType(), 0));
        llvm::Value* shifted = e->binary_op() == BinaryOp::kShl ? b_.CreateShl(a, count)
                                                                : b_.CreateLShr(a, count);
        return b_.CreateSelect(in_range, shifted, llvm::ConstantInt::get(a->getType(), 0));
      }
      case BinaryOp::kPow: {
        llvm::Value* fa = b_.CreateSIToFP(a, TypeLike(b_.getDoubleTy(), a));
        llvm::Value* fc = b_.CreateSIToFP(c, TypeLike(b_.getDoubleTy(), c));
        return b_.CreateFPToSI(CallIntrinsic(llvm::Intrinsic::pow, {fa, fc}),
                               TypeLike(b_.getInt64Ty(), a));
      }
    }
    return nullptr;
  }

  llvm::Value* EmitUnaryOn(const Expr& e, llvm::Value* a) {
    using te::UnaryOp;
    const bool f64 = e->type == ScalarType::kF64;
    const char* libm = e->unary_op() == UnaryOp::kTanh   ? (f64 ? "tanh" : "tanhf")
                       : e->unary_op() == UnaryOp::kErf  ? (f64 ? "erf" : "erff")
                       : e->unary_op() == UnaryOp::kSin  ? (f64 ? "sin" : "sinf")
                       : e->unary_op() == UnaryOp::kCos  ? (f64 ? "cos" : "cosf")
                       : e->unary_op() == UnaryOp::kAtan ? (f64 ? "atan" : "atanf")
                                                         : nullptr;
    if (!f64 && e->unary_op() == UnaryOp::kErf) return EmitErf(a);
    if (!f64 && e->unary_op() == UnaryOp::kTanh) return EmitTanh(a);
    if (a->getType()->isVectorTy() && libm != nullptr) {
      // No vector form in libm's scalar names: one call per lane.
      llvm::Value* out = llvm::UndefValue::get(a->getType());
      for (unsigned i = 0; i < lanes_; ++i) {
        llvm::Value* x = b_.CreateExtractElement(a, b_.getInt64(i));
        out = b_.CreateInsertElement(out, CallLibm(libm, x), b_.getInt64(i));
      }
      return out;
    }
    if (te::IsFloat(e->type)) {
      switch (e->unary_op()) {
        case UnaryOp::kNeg: return b_.CreateFNeg(a);
        case UnaryOp::kExp: return f64 ? CallIntrinsic(llvm::Intrinsic::exp, {a}) : EmitExp(a);
        case UnaryOp::kLog: return CallIntrinsic(llvm::Intrinsic::log, {a});
        case UnaryOp::kSqrt: return CallIntrinsic(llvm::Intrinsic::sqrt, {a});
        case UnaryOp::kAbs: return CallIntrinsic(llvm::Intrinsic::fabs, {a});
        case UnaryOp::kFloor: return CallIntrinsic(llvm::Intrinsic::floor, {a});
        case UnaryOp::kTanh:
        case UnaryOp::kErf:
        case UnaryOp::kSin:
        case UnaryOp::kCos:
        case UnaryOp::kAtan:
          return CallLibm(libm, a);
        case UnaryOp::kRound: return CallIntrinsic(llvm::Intrinsic::roundeven, {a});
        case UnaryOp::kNot:
          return b_.CreateUIToFP(b_.CreateFCmpOEQ(a, llvm::ConstantFP::get(a->getType(), 0)),
                                 a->getType());
        case UnaryOp::kRoundF16:
          return NarrowThenWiden(DType::kFloat16, a);
        case UnaryOp::kRoundBF16:
          return NarrowThenWiden(DType::kBFloat16, a);
        default: return a;
      }
    }
    switch (e->unary_op()) {
      case UnaryOp::kNeg: return b_.CreateNeg(a);
      case UnaryOp::kAbs: return b_.CreateCall(
          llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::abs, {a->getType()}),
          {a, b_.getFalse()});
      case UnaryOp::kNot: return b_.CreateNot(a);
      case UnaryOp::kWrapI8: return NarrowThenWiden(DType::kInt8, a);
      case UnaryOp::kWrapU8: return NarrowThenWiden(DType::kUInt8, a);
      case UnaryOp::kWrapI16: return NarrowThenWiden(DType::kInt16, a);
      case UnaryOp::kWrapU16: return NarrowThenWiden(DType::kUInt16, a);
      case UnaryOp::kWrapI32: return NarrowThenWiden(DType::kInt32, a);
      case UnaryOp::kWrapU32: return NarrowThenWiden(DType::kUInt32, a);
      default: return a;
    }
  }

  // `a` as a store of `dtype` would keep it, read back.
  llvm::Value* NarrowThenWiden(DType dtype, llvm::Value* a) {
    return WidenFromStorage(b_, dtype, NarrowToStorage(b_, dtype, a));
  }

  // expf inline, for a float or a vector of them at any width. libmvec's
  // vector expf is 8 lanes wide and a call: the transformer's softmax
  // kernels (two exponentials per element) took 0.052-0.073 ms, inline
  // 0.033. Here: exp(x) = 2^n * exp(r), n = rint(x / ln 2),
  // r = x - n ln 2 (ln 2 in two parts, so r is exact to float precision),
  // exp(r) by the degree-7 polynomial of Cephes' expf (about 1 ulp), and
  // 2^n applied in two halves so that neither overflows before the product:
  // results near FLT_MAX and in the denormal range come out right. x is
  // clamped to where the result is neither infinite nor zero (beyond, the
  // clamp gives inf or 0 anyway); NaN passes through.
  llvm::Value* EmitExp(llvm::Value* x) {
    llvm::Type* f = x->getType();
    llvm::Type* i32 = TypeLike(b_.getInt32Ty(), x);
    auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
    auto fma = [&](llvm::Value* a, llvm::Value* m, llvm::Value* add) {
      return CallIntrinsic(llvm::Intrinsic::fmuladd, {a, m, add});
    };
    llvm::Value* xc = FloatMin(FloatMax(x, c(-104.0)), c(89.0));
    llvm::Value* n =
        CallIntrinsic(llvm::Intrinsic::rint, {b_.CreateFMul(xc, c(1.44269504088896341))});
    llvm::Value* r = fma(n, c(-0.693359375), xc);
    r = fma(n, c(2.12194440e-4), r);
    llvm::Value* p = Polynomial(r, {5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2,
                                    8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4});
    llvm::Value* y = b_.CreateFAdd(fma(p, b_.CreateFMul(r, r), r), c(1.0));
    llvm::Value* ni = b_.CreateFPToSI(n, i32);
    llvm::Value* half = b_.CreateAShr(ni, llvm::ConstantInt::get(i32, 1));
    auto pow2 = [&](llvm::Value* e) {
      llvm::Value* bits = b_.CreateShl(b_.CreateAdd(e, llvm::ConstantInt::get(i32, 127)),
                                       llvm::ConstantInt::get(i32, 23));
      return b_.CreateBitCast(bits, f);
    };
    llvm::Value* out = b_.CreateFMul(b_.CreateFMul(y, pow2(half)), pow2(b_.CreateSub(ni, half)));
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, out);
  }

  // p[0] + p[1] z + p[2] z^2 + ... by Horner's rule in fused multiply-adds.
  llvm::Value* Polynomial(llvm::Value* z, std::initializer_list<double> p) {
    return Polynomial(z, std::vector<double>(p));
  }
  llvm::Value* Polynomial(llvm::Value* z, const std::vector<double>& c) {
    llvm::Value* acc = llvm::ConstantFP::get(z->getType(), c.back());
    for (size_t i = c.size() - 1; i-- > 0;) {
      acc = CallIntrinsic(llvm::Intrinsic::fmuladd,
                          {acc, z, llvm::ConstantFP::get(z->getType(), c[i])});
    }
    return acc;
  }

  // A float32 erf of x times a constant (GELU's erf(x * M_SQRT1_2), which
  // SimplifyInference makes of erf(x / sqrt(2))): the constant and its powers
  // go into erf's polynomial coefficients instead of a multiply per element.
  struct ScaledOperand {
    Expr x;
    double scale;
  };
  static std::optional<ScaledOperand> ErfOfScaled(const Expr& e) {
    if (e->kind != ExprKind::kUnary || e->unary_op() != te::UnaryOp::kErf ||
        e->type != ScalarType::kF32) {
      return std::nullopt;
    }
    const Expr& a = e->operands[0];
    if (a->kind != ExprKind::kBinary || a->binary_op() != te::BinaryOp::kMul) return std::nullopt;
    for (int i : {0, 1}) {
      const Expr& c = a->operands[i];
      // Within [1/16, 16] the scaled coefficients stay far from float's
      // range limits (scale^13 multiplies the last one).
      const double k = std::fabs(c->kind == ExprKind::kFloatImm ? c->float_value : 0.0);
      if (k >= 1.0 / 16 && k <= 16) {
        return ScaledOperand{a->operands[1 - i], c->float_value};
      }
    }
    return std::nullopt;
  }

  // erff inline, for a float or a vector of them: libm's erff is scalar, so
  // a vector took one call per lane, and GELU's erf made convnext_tiny's
  // MLP matmuls 5x slower than the same matmuls without it (25 cycles per
  // element). erf(x) = x P(x^2) / Q(x^2), a rational fit of erf(x)/x made
  // for Kiln (weighted least squares iterated to the minimax of the
  // relative error, 2e-9 in exact arithmetic on [0, 4]). x is clamped to
  // [-4.8, 4.8], where the fit has crossed above 1 by more than its float
  // rounding (8.8e-7 at 4.8), and the result to [-1, 1]: so every |x| past
  // 4.36 gives exactly +-1 with two min/max instead of a fabs, compare,
  // copysign and select, and no result leaves [-1, 1] (the fit overshot 1
  // in float before). Checked over every float32 (AMD EPYC Zen 5; the
  // division is IEEE, so any FMA target computes the same): at most 5.8
  // ulp, 3.5e-7 absolute, near |x| = 4.05 where erf rounds to 1; 99.8%
  // within 2 ulp. A reciprocal estimate (vrcp14ps plus a Newton step) in
  // place of the division was slower on Zen 5 (its FMAs compete with the
  // matmul's, the divider does not). NaN passes through both clamps.
  //
  // erf(scale * x) is x P'(x^2) / Q'(x^2), P' and Q' the fit's polynomials
  // with coefficient i times scale^(2i) (and P' times scale once more),
  // x clamped at 4.8 / |scale|: one multiply fewer per element.
  llvm::Value* EmitErf(llvm::Value* x, double scale = 1.0) {
    llvm::Type* f = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
    const double bound = 4.8 / std::fabs(scale);
    llvm::Value* xc = FloatMin(FloatMax(x, c(-bound)), c(bound));
    llvm::Value* z = b_.CreateFMul(xc, xc);
    std::vector<double> p{1.128379169,     0.1852030011,    0.05431689752,   0.003849605102,
                          0.0003796093739, 4.684793847e-06, -1.320229261e-08};
    std::vector<double> q{1.0,           0.4974653001,   0.1139583387,
                          0.01546207771, 0.001307569341, 6.311074209e-05};
    double power = 1.0;
    for (size_t i = 0; i < p.size(); ++i, power *= scale * scale) {
      p[i] *= scale * power;
      if (i < q.size()) q[i] *= power;
    }
    llvm::Value* y = b_.CreateFDiv(b_.CreateFMul(xc, Polynomial(z, p)), Polynomial(z, q));
    return FloatMin(FloatMax(y, c(-1.0)), c(1.0));
  }

  // tanhf inline, for a float or a vector (libm's is scalar, as erff; LSTM
  // and GRU gates and tanh-GELU use it). Below |x| = 0.625, x P(x^2) with P
  // a degree-5 minimax fit of tanh(x)/x made for Kiln (4e-9 relative);
  // above, 1 - 2 / (exp(2|x|) + 1) with the sign of x, through EmitExp
  // (no cancellation there, as tanh > 0.55). About 1-2 ulp; exp's clamp
  // makes large |x| exactly +-1, and NaN passes through both branches.
  llvm::Value* EmitTanh(llvm::Value* x) {
    llvm::Type* f = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
    llvm::Value* ax = CallIntrinsic(llvm::Intrinsic::fabs, {x});
    llvm::Value* small = b_.CreateFMul(
        x, Polynomial(b_.CreateFMul(x, x), {0.9999999961, -0.3333326054, 0.1333112789,
                                            -0.05372109594, 0.02059107733, -0.005660087461}));
    llvm::Value* e = EmitExp(b_.CreateFMul(ax, c(2.0)));
    llvm::Value* big = b_.CreateFSub(c(1.0), b_.CreateFDiv(c(2.0), b_.CreateFAdd(e, c(1.0))));
    big = CallIntrinsic(llvm::Intrinsic::copysign, {big, x});
    return b_.CreateSelect(b_.CreateFCmpOLT(ax, c(0.625)), small, big);
  }

  llvm::Value* EmitCastOn(const Expr& e, llvm::Value* a) {
    const ScalarType from = e->operands[0]->type;
    if (from == e->type) return a;
    llvm::Type* to = TypeLike(ValueType(e->type), a);
    switch (e->type) {
      case ScalarType::kF32:
      case ScalarType::kF64:
        if (te::IsFloat(from)) {
          return e->type == ScalarType::kF64 ? b_.CreateFPExt(a, to) : b_.CreateFPTrunc(a, to);
        }
        return from == ScalarType::kBool ? b_.CreateUIToFP(a, to) : b_.CreateSIToFP(a, to);
      case ScalarType::kI64:
        if (from == ScalarType::kBool) return b_.CreateZExt(a, to);
        return ClampedWithinInt32(e->operands[0]) ? Int32FloatToInt64(a) : FloatToInt64(a);
      case ScalarType::kBool:
        return te::IsFloat(from)
                   ? b_.CreateFCmpUNE(a, llvm::ConstantFP::get(a->getType(), 0))
                   : b_.CreateICmpNE(a, llvm::ConstantInt::get(a->getType(), 0));
    }
    return a;
  }

  // A float converted to int64, truncating toward zero. fptosi alone is
  // poison for NaN and beyond int64's range; here NaN gives 0 and the rest
  // saturate, as the host-side constant folder does.
  llvm::Value* FloatToInt64(llvm::Value* a) {
    llvm::Type* i64 = TypeLike(b_.getInt64Ty(), a);
    return CallIntrinsic2(llvm::Intrinsic::fptosi_sat, {i64, a->getType()}, {a});
  }

  // The same for a float known to be NaN or inside int32's range: NaN made
  // 0, then a plain conversion to int32 (defined on every value left) and a
  // sign extension, which is equal there. A requantising store,
  // cast<u8>(clip(round(x / s) + z, 0, 255)), is this case. LLVM 16 lowers
  // fptosi.sat on vectors (either width) to a scalar compare-and-branch per
  // lane; this is one vcvttps2dq per 16 lanes: the requantising kernels of
  // bench/qdq_mlp.py's QDQ MLP went from 0.79 to 0.1 ms per 128 x 3072
  // elements (one thread of this project's Xeon).
  llvm::Value* Int32FloatToInt64(llvm::Value* a) {
    llvm::Value* number =
        b_.CreateSelect(b_.CreateFCmpUNO(a, a), llvm::ConstantFP::get(a->getType(), 0), a);
    return b_.CreateSExt(b_.CreateFPToSI(number, TypeLike(b_.getInt32Ty(), a)),
                         TypeLike(b_.getInt64Ty(), a));
  }

  llvm::Value* CallIntrinsic2(llvm::Intrinsic::ID id, std::vector<llvm::Type*> types,
                              std::vector<llvm::Value*> args) {
    llvm::Function* f = llvm::Intrinsic::getDeclaration(&m_, id, types);
    return b_.CreateCall(f, args);
  }

  llvm::Value* ReduceInit(te::ReduceOp op, ScalarType t) {
    const bool f = te::IsFloat(t);
    llvm::Type* ft = ValueType(t);
    switch (op) {
      case te::ReduceOp::kSum:
        return f ? llvm::ConstantFP::get(ft, 0) : b_.getInt64(0);
      case te::ReduceOp::kProd:
        return f ? llvm::ConstantFP::get(ft, 1) : b_.getInt64(1);
      case te::ReduceOp::kMax:
        return f ? llvm::ConstantFP::getInfinity(ft, true)
                 : b_.getInt64(std::numeric_limits<int64_t>::min());
      case te::ReduceOp::kMin:
        return f ? llvm::ConstantFP::getInfinity(ft, false)
                 : b_.getInt64(std::numeric_limits<int64_t>::max());
    }
    return nullptr;
  }

  llvm::Value* Combine(te::ReduceOp op, ScalarType t, llvm::Value* acc, llvm::Value* x) {
    if (te::IsFloat(t)) {
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      fmf.setAllowContract();
      // nnan lets LLVM vectorise the max and min (LLVM 16 does not without
      // it). A NaN makes them poison; EmitReduce notes any NaN it saw and
      // then selects NaN instead, and a select's unchosen operand may be
      // poison.
      if (op == te::ReduceOp::kMax || op == te::ReduceOp::kMin) {
        fmf.setNoNaNs();
        fmf.setNoSignedZeros();
      }
      llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
      b_.setFastMathFlags(fmf);
      switch (op) {
        case te::ReduceOp::kSum: return b_.CreateFAdd(acc, x);
        case te::ReduceOp::kProd: return b_.CreateFMul(acc, x);
        case te::ReduceOp::kMax: return CallIntrinsic(llvm::Intrinsic::maxnum, {acc, x});
        case te::ReduceOp::kMin: return CallIntrinsic(llvm::Intrinsic::minnum, {acc, x});
      }
    }
    switch (op) {
      case te::ReduceOp::kSum: return b_.CreateAdd(acc, x);
      case te::ReduceOp::kProd: return b_.CreateMul(acc, x);
      case te::ReduceOp::kMax: return CallIntrinsic(llvm::Intrinsic::smax, {acc, x});
      case te::ReduceOp::kMin: return CallIntrinsic(llvm::Intrinsic::smin, {acc, x});
    }
    return nullptr;
  }

  llvm::Value* EmitReduce(const Expr& e) {
    llvm::Type* type = ValueType(e->type);
    llvm::AllocaInst* acc = EntryAlloca(type, "acc");
    b_.CreateStore(ReduceInit(e->reduce_op(), e->type), acc);
    // A float max or min of anything NaN is NaN (NumPy, ONNX): an OR of
    // "x is NaN" beside the maxnum/minnum, both reductions LLVM vectorises.
    const bool notes_nan = te::IsFloat(e->type) && (e->reduce_op() == te::ReduceOp::kMax ||
                                                          e->reduce_op() == te::ReduceOp::kMin);
    llvm::AllocaInst* nan_seen = nullptr;
    if (notes_nan) {
      nan_seen = EntryAlloca(b_.getInt8Ty(), "nan_seen");
      b_.CreateStore(b_.getInt8(0), nan_seen);
    }
    // A long float sum adds into partial sums of at most kSumBlock terms,
    // each then added to the total: a running float32 total stops growing
    // once the terms fall below half its ulp (2^31 ones summed to 2^24,
    // issue 20). Two levels keep the error near (block + n / block) ulps
    // rather than n.
    constexpr int64_t kSumBlock = 4096;
    int64_t total = 1;
    for (const te::Var& v : e->reduce_vars) total *= std::max<int64_t>(v->extent, 1);
    const size_t innermost = e->reduce_vars.size() - 1;
    const bool blocked_sum = te::IsFloat(e->type) && e->reduce_op() == te::ReduceOp::kSum &&
                             total > kSumBlock && !e->reduce_vars.empty() &&
                             e->reduce_vars[innermost]->extent >= 16;
    llvm::AllocaInst* into = acc;  // what the innermost loop adds into
    std::function<absl::Status(size_t)> nest = [&](size_t d) -> absl::Status {
      if (d == e->reduce_vars.size()) {
        llvm::Value* x = EmitExpr(e->operands[0]);
        b_.CreateStore(Combine(e->reduce_op(), e->type, b_.CreateLoad(type, into), x), into);
        if (notes_nan) {
          llvm::Value* is_nan = b_.CreateZExt(b_.CreateFCmpUNO(x, x), b_.getInt8Ty());
          b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt8Ty(), nan_seen), is_nan), nan_seen);
        }
        return absl::OkStatus();
      }
      const te::VarNode* v = e->reduce_vars[d].get();
      if (!blocked_sum || d != innermost) {
        return EmitLoop(v, b_.getInt64(0), b_.getInt64(v->extent), ForKind::kSerial,
                        [&] { return nest(d + 1); });
      }
      // The innermost loop, in blocks of kSumBlock, each into a partial sum.
      llvm::AllocaInst* partial = EntryAlloca(type, "partial");
      const int64_t block = std::min(v->extent, kSumBlock);
      const te::VarNode block_var{v->name + ".block", (v->extent + block - 1) / block, -1};
      into = partial;
      absl::Status st = EmitLoop(
          &block_var, b_.getInt64(0), b_.getInt64(block_var.extent), ForKind::kSerial, [&] {
            llvm::Value* begin = b_.CreateMul(vars_.at(&block_var), b_.getInt64(block));
            llvm::Value* end = b_.CreateAdd(begin, b_.getInt64(block));
            end = b_.CreateSelect(b_.CreateICmpSLT(end, b_.getInt64(v->extent)), end,
                                  b_.getInt64(v->extent));
            b_.CreateStore(llvm::ConstantFP::get(type, 0), partial);
            KILN_RETURN_IF_ERROR(
                EmitLoop(v, begin, end, ForKind::kSerial, [&] { return nest(d + 1); }));
            b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(type, acc), b_.CreateLoad(type, partial)),
                           acc);
            return absl::OkStatus();
          });
      into = acc;
      return st;
    };
    (void)nest(0);
    llvm::Value* result = b_.CreateLoad(type, acc);
    if (!notes_nan) return result;
    llvm::Value* seen = b_.CreateICmpNE(b_.CreateLoad(b_.getInt8Ty(), nan_seen), b_.getInt8(0));
    return b_.CreateSelect(seen, llvm::ConstantFP::getNaN(type), result);
  }

  const lower::LoopFunction& fn_;
  const bool checks_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  llvm::Function* func_ = nullptr;
  // Bounds checks only: the current function's fault slot and its early
  // return (made at the first check).
  llvm::Value* fault_ = nullptr;
  llvm::BasicBlock* fault_exit_ = nullptr;
  std::vector<llvm::Value*> buffers_;
  std::unordered_map<const te::VarNode*, llvm::Value*> vars_;
  std::vector<std::unordered_map<const te::ExprNode*, llvm::Value*>> scopes_;
  int parallel_count_ = 0;
  // Vector-loop state: its variable (null outside one), width, the current
  // store's lane mask, and per-loop memos of variance and vector values.
  const te::VarNode* lane_var_ = nullptr;
  unsigned lanes_ = 0;
  llvm::Value* mask_ = nullptr;
  std::unordered_map<const te::ExprNode*, bool> depends_;
  std::unordered_map<const te::ExprNode*, llvm::Value*> vmemo_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::Module>> EmitModule(const lower::LoopFunction& fn,
                                                         const CodegenOptions& options,
                                                         llvm::LLVMContext& context,
                                                         llvm::TargetMachine& target) {
  auto module = std::make_unique<llvm::Module>(fn.name, context);
  module->setTargetTriple(target.getTargetTriple().str());
  module->setDataLayout(target.createDataLayout());
  Emitter emitter(fn, options.bounds_checks, context, *module);
  absl::Status st = emitter.Emit();
  if (!st.ok()) return st;
  return module;
}

}  // namespace kiln::codegen
