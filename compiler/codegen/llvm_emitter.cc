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
// float accumulation carries `reassoc` so the vectoriser may reorder it.
#include "compiler/codegen/llvm_emitter.h"

#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::codegen {
namespace {

using lower::ForKind;
using lower::Stmt;
using lower::StmtKind;
using te::Expr;
using te::ExprKind;
using te::ScalarType;

class Emitter {
 public:
  Emitter(const lower::LoopFunction& fn, llvm::LLVMContext& ctx, llvm::Module& module)
      : fn_(fn), ctx_(ctx), m_(module), b_(ctx) {}

  absl::Status Emit() {
    llvm::Type* ptr = b_.getPtrTy();
    std::vector<llvm::Type*> params(fn_.num_params, ptr);
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
    b_.CreateCall(impl, args);
    b_.CreateRetVoid();

    // Implementation.
    func_ = impl;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
    for (int i = 0; i < fn_.num_params; ++i) buffers_.push_back(impl->getArg(i));
    llvm::FunctionCallee alloc = m_.getOrInsertFunction(
        "aligned_alloc", llvm::FunctionType::get(ptr, {b_.getInt64Ty(), b_.getInt64Ty()}, false));
    llvm::FunctionCallee release =
        m_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
    for (size_t i = fn_.num_params; i < fn_.buffers.size(); ++i) {
      if (fn_.buffers[i].local) {
        buffers_.push_back(LocalBuffer(i));
        continue;
      }
      const int64_t bytes = fn_.buffers[i].num_elements * ElementBytes(fn_.buffers[i].type);
      const int64_t rounded = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
      buffers_.push_back(
          b_.CreateCall(alloc, {b_.getInt64(64), b_.getInt64(rounded)}, fn_.buffers[i].name));
    }
    scopes_.emplace_back();
    absl::Status st = EmitStmt(fn_.body);
    if (!st.ok()) return st;
    for (size_t i = fn_.num_params; i < fn_.buffers.size(); ++i) {
      if (!fn_.buffers[i].local) b_.CreateCall(release, {buffers_[i]});
    }
    b_.CreateRetVoid();

    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(m_, &os)) {
      return absl::InternalError(absl::StrCat("generated LLVM IR is invalid: ", os.str()));
    }
    return absl::OkStatus();
  }

 private:
  static int64_t ElementBytes(ScalarType t) {
    switch (t) {
      case ScalarType::kF32:
        return 4;
      case ScalarType::kI64:
        return 8;
      case ScalarType::kBool:
        return 1;
    }
    return 4;
  }

  void AddFunctionAttrs(llvm::Function* f) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    // Skylake-class CPUs default to 256-bit vectors; Kiln's loops are long and
    // regular enough that 512-bit ones pay.
    f->addFnAttr("prefer-vector-width", "512");
    f->addFnAttr("min-legal-vector-width", "512");
  }

  llvm::Type* MemoryType(ScalarType t) {
    switch (t) {
      case ScalarType::kF32:
        return b_.getFloatTy();
      case ScalarType::kI64:
        return b_.getInt64Ty();
      case ScalarType::kBool:
        return b_.getInt8Ty();
    }
    return b_.getFloatTy();
  }

  llvm::Type* ValueType(ScalarType t) {
    return t == ScalarType::kBool ? b_.getInt1Ty() : MemoryType(t);
  }

  // Stack scratch in the current function's entry block: private to a thread.
  llvm::Value* LocalBuffer(size_t i) {
    llvm::Type* array = llvm::ArrayType::get(MemoryType(fn_.buffers[i].type),
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
  template <typename Body>
  absl::Status EmitLoop(const te::VarNode* var, llvm::Value* begin, llvm::Value* end,
                        ForKind kind, const Body& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx_, var->name + ".header", func_);
    llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx_, var->name + ".body", func_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, var->name + ".exit", func_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, var->name);
    iv->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, end), loop, exit);
    b_.SetInsertPoint(loop);
    vars_[var] = iv;
    scopes_.emplace_back();
    absl::Status st = body();
    scopes_.pop_back();
    vars_.erase(var);  // the induction variable does not dominate what follows
    if (!st.ok()) return st;
    llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
    iv->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateBr(header);
    AttachLoopMetadata(back, kind);
    b_.SetInsertPoint(exit);
    return absl::OkStatus();
  }

  void AttachLoopMetadata(llvm::BranchInst* back, ForKind kind) {
    std::vector<llvm::Metadata*> ops{nullptr};
    if (kind == ForKind::kVectorized) {
      ops.push_back(llvm::MDNode::get(
          ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                 llvm::ConstantAsMetadata::get(b_.getTrue())}));
    } else if (kind == ForKind::kUnrolled) {
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.enable")}));
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
      case StmtKind::kStore: {
        llvm::Value* index = EmitExpr(s->index);
        llvm::Value* value = EmitExpr(s->value);
        const ScalarType t = fn_.buffers[s->buffer].type;
        if (t == ScalarType::kBool) value = b_.CreateZExt(value, b_.getInt8Ty());
        llvm::Value* addr = b_.CreateInBoundsGEP(MemoryType(t), buffers_[s->buffer], index);
        b_.CreateStore(value, addr);
        return absl::OkStatus();
      }
      case StmtKind::kFor:
        if (s->for_kind == ForKind::kParallel) return EmitParallelFor(s);
        return EmitLoop(s->var.get(), b_.getInt64(0), b_.getInt64(s->var->extent), s->for_kind,
                        [&] { return EmitStmt(s->children[0]); });
    }
    return absl::OkStatus();
  }

  // Outlines the loop body into name.par<k> and hands it to kiln_parallel_for.
  absl::Status EmitParallelFor(const Stmt& s) {
    llvm::Type* ptr = b_.getPtrTy();
    // Closure: every buffer pointer, then every bound loop variable.
    std::vector<const te::VarNode*> bound;
    for (const auto& [var, value] : vars_) bound.push_back(var);
    const size_t slots = buffers_.size() + bound.size();
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
    absl::Status st = EmitLoop(s->var.get(), body->getArg(1), body->getArg(2), ForKind::kSerial,
                               [&] { return EmitStmt(s->children[0]); });
    b_.CreateRetVoid();

    func_ = saved_func;
    b_.restoreIP(saved_ip);
    buffers_ = std::move(saved_buffers);
    vars_ = std::move(saved_vars);
    scopes_ = std::move(saved_scopes);
    if (!st.ok()) return st;

    llvm::FunctionCallee parallel_for = m_.getOrInsertFunction(
        "kiln_parallel_for",
        llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, b_.getInt64Ty()}, false));
    b_.CreateCall(parallel_for, {body, closure, b_.getInt64(s->var->extent)});
    return absl::OkStatus();
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
        name, llvm::FunctionType::get(b_.getFloatTy(), {b_.getFloatTy()}, false));
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
        return llvm::ConstantFP::get(b_.getFloatTy(), e->float_value);
      case ExprKind::kVar:
        return vars_.at(e->var.get());
      case ExprKind::kLoad: {
        llvm::Value* index = EmitExpr(e->operands[0]);
        llvm::Value* addr =
            b_.CreateInBoundsGEP(MemoryType(e->type), buffers_[e->buffer], index);
        llvm::Value* v = b_.CreateLoad(MemoryType(e->type), addr);
        return e->type == ScalarType::kBool ? b_.CreateTrunc(v, b_.getInt1Ty()) : v;
      }
      case ExprKind::kBinary:
        return EmitBinary(e);
      case ExprKind::kUnary:
        return EmitUnary(e);
      case ExprKind::kCompare: {
        llvm::Value* a = EmitExpr(e->operands[0]);
        llvm::Value* c = EmitExpr(e->operands[1]);
        const bool is_float = e->operands[0]->type == ScalarType::kF32;
        using P = llvm::CmpInst::Predicate;
        static const P kFloat[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT,
                                   P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
        static const P kInt[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT,
                                 P::ICMP_SGE, P::ICMP_EQ,  P::ICMP_NE};
        const int op = static_cast<int>(e->compare_op());
        return is_float ? b_.CreateFCmp(kFloat[op], a, c) : b_.CreateICmp(kInt[op], a, c);
      }
      case ExprKind::kSelect:
        return b_.CreateSelect(EmitExpr(e->operands[0]), EmitExpr(e->operands[1]),
                               EmitExpr(e->operands[2]));
      case ExprKind::kCast:
        return EmitCast(e);
      case ExprKind::kReduce:
        return EmitReduce(e);
    }
    return nullptr;
  }

  llvm::Value* EmitBinary(const Expr& e) {
    llvm::Value* a = EmitExpr(e->operands[0]);
    llvm::Value* c = EmitExpr(e->operands[1]);
    using te::BinaryOp;
    if (e->type == ScalarType::kF32) {
      switch (e->binary_op()) {
        case BinaryOp::kAdd: return b_.CreateFAdd(a, c);
        case BinaryOp::kSub: return b_.CreateFSub(a, c);
        case BinaryOp::kMul: return b_.CreateFMul(a, c);
        case BinaryOp::kDiv: return b_.CreateFDiv(a, c);
        case BinaryOp::kMod: return b_.CreateFRem(a, c);
        case BinaryOp::kMin: return CallIntrinsic(llvm::Intrinsic::minnum, {a, c});
        case BinaryOp::kMax: return CallIntrinsic(llvm::Intrinsic::maxnum, {a, c});
        case BinaryOp::kPow: return CallIntrinsic(llvm::Intrinsic::pow, {a, c});
        default: break;
      }
    }
    switch (e->binary_op()) {
      case BinaryOp::kAdd: return b_.CreateAdd(a, c);
      case BinaryOp::kSub: return b_.CreateSub(a, c);
      case BinaryOp::kMul: return b_.CreateMul(a, c);
      case BinaryOp::kDiv: return b_.CreateSDiv(a, c);
      case BinaryOp::kMod: return b_.CreateSRem(a, c);
      case BinaryOp::kMin: return CallIntrinsic(llvm::Intrinsic::smin, {a, c});
      case BinaryOp::kMax: return CallIntrinsic(llvm::Intrinsic::smax, {a, c});
      case BinaryOp::kAnd: return b_.CreateAnd(a, c);
      case BinaryOp::kOr: return b_.CreateOr(a, c);
      case BinaryOp::kPow: {
        llvm::Value* fa = b_.CreateSIToFP(a, b_.getDoubleTy());
        llvm::Value* fc = b_.CreateSIToFP(c, b_.getDoubleTy());
        return b_.CreateFPToSI(CallIntrinsic(llvm::Intrinsic::pow, {fa, fc}), b_.getInt64Ty());
      }
    }
    return nullptr;
  }

  llvm::Value* EmitUnary(const Expr& e) {
    llvm::Value* a = EmitExpr(e->operands[0]);
    using te::UnaryOp;
    if (e->type == ScalarType::kF32) {
      switch (e->unary_op()) {
        case UnaryOp::kNeg: return b_.CreateFNeg(a);
        case UnaryOp::kExp: return CallIntrinsic(llvm::Intrinsic::exp, {a});
        case UnaryOp::kLog: return CallIntrinsic(llvm::Intrinsic::log, {a});
        case UnaryOp::kSqrt: return CallIntrinsic(llvm::Intrinsic::sqrt, {a});
        case UnaryOp::kAbs: return CallIntrinsic(llvm::Intrinsic::fabs, {a});
        case UnaryOp::kFloor: return CallIntrinsic(llvm::Intrinsic::floor, {a});
        case UnaryOp::kTanh: return CallLibm("tanhf", a);
        case UnaryOp::kErf: return CallLibm("erff", a);
        case UnaryOp::kNot:
          return b_.CreateUIToFP(b_.CreateFCmpOEQ(a, llvm::ConstantFP::get(a->getType(), 0)),
                                 a->getType());
      }
    }
    switch (e->unary_op()) {
      case UnaryOp::kNeg: return b_.CreateNeg(a);
      case UnaryOp::kAbs: return b_.CreateCall(
          llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::abs, {a->getType()}),
          {a, b_.getFalse()});
      case UnaryOp::kNot: return b_.CreateNot(a);
      default: return a;
    }
  }

  llvm::Value* EmitCast(const Expr& e) {
    llvm::Value* a = EmitExpr(e->operands[0]);
    const ScalarType from = e->operands[0]->type;
    switch (e->type) {
      case ScalarType::kF32:
        return from == ScalarType::kBool ? b_.CreateUIToFP(a, b_.getFloatTy())
                                         : b_.CreateSIToFP(a, b_.getFloatTy());
      case ScalarType::kI64:
        return from == ScalarType::kBool ? b_.CreateZExt(a, b_.getInt64Ty())
                                         : b_.CreateFPToSI(a, b_.getInt64Ty());
      case ScalarType::kBool:
        return from == ScalarType::kF32
                   ? b_.CreateFCmpUNE(a, llvm::ConstantFP::get(b_.getFloatTy(), 0))
                   : b_.CreateICmpNE(a, b_.getInt64(0));
    }
    return a;
  }

  llvm::Value* ReduceInit(te::ReduceOp op, ScalarType t) {
    const bool f = t == ScalarType::kF32;
    switch (op) {
      case te::ReduceOp::kSum:
        return f ? llvm::ConstantFP::get(b_.getFloatTy(), 0) : b_.getInt64(0);
      case te::ReduceOp::kProd:
        return f ? llvm::ConstantFP::get(b_.getFloatTy(), 1) : b_.getInt64(1);
      case te::ReduceOp::kMax:
        return f ? llvm::ConstantFP::getInfinity(b_.getFloatTy(), true)
                 : b_.getInt64(std::numeric_limits<int64_t>::min());
      case te::ReduceOp::kMin:
        return f ? llvm::ConstantFP::getInfinity(b_.getFloatTy(), false)
                 : b_.getInt64(std::numeric_limits<int64_t>::max());
    }
    return nullptr;
  }

  llvm::Value* Combine(te::ReduceOp op, ScalarType t, llvm::Value* acc, llvm::Value* x) {
    if (t == ScalarType::kF32) {
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      fmf.setAllowContract();
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
    std::function<absl::Status(size_t)> nest = [&](size_t d) -> absl::Status {
      if (d == e->reduce_vars.size()) {
        llvm::Value* x = EmitExpr(e->operands[0]);
        b_.CreateStore(Combine(e->reduce_op(), e->type, b_.CreateLoad(type, acc), x), acc);
        return absl::OkStatus();
      }
      const te::VarNode* v = e->reduce_vars[d].get();
      return EmitLoop(v, b_.getInt64(0), b_.getInt64(v->extent), ForKind::kSerial,
                      [&] { return nest(d + 1); });
    };
    (void)nest(0);
    return b_.CreateLoad(type, acc);
  }

  const lower::LoopFunction& fn_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  llvm::Function* func_ = nullptr;
  std::vector<llvm::Value*> buffers_;
  std::unordered_map<const te::VarNode*, llvm::Value*> vars_;
  std::vector<std::unordered_map<const te::ExprNode*, llvm::Value*>> scopes_;
  int parallel_count_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::Module>> EmitModule(const lower::LoopFunction& fn,
                                                         llvm::LLVMContext& context,
                                                         llvm::TargetMachine& target) {
  auto module = std::make_unique<llvm::Module>(fn.name, context);
  module->setTargetTriple(target.getTargetTriple().str());
  module->setDataLayout(target.createDataLayout());
  Emitter emitter(fn, context, *module);
  absl::Status st = emitter.Emit();
  if (!st.ok()) return st;
  return module;
}

}  // namespace kiln::codegen
