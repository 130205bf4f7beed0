// Host target set-up, the optimisation pipeline and object emission.
#include "compiler/codegen/codegen.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/codegen/llvm_emitter.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/Transforms/IPO/Inliner.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/GVN.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Scalar/LoopRotation.h"
#include "llvm/Transforms/Scalar/SROA.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Transforms/Vectorize/LoopVectorize.h"

namespace kiln::codegen {
namespace {

void InitializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

llvm::CodeGenOpt::Level CodeGenLevel(int opt_level) {
  switch (opt_level) {
    case 0: return llvm::CodeGenOpt::None;
    case 1: return llvm::CodeGenOpt::Less;
    case 2: return llvm::CodeGenOpt::Default;
    default: return llvm::CodeGenOpt::Aggressive;
  }
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateHostTargetMachine(int opt_level) {
  InitializeLlvmOnce();
  const HostTarget& host = GetHostTarget();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (target == nullptr) {
    return absl::InternalError(absl::StrCat("no LLVM target for ", host.triple, ": ", error));
  }
  std::string features;
  for (const std::string& f : host.features) absl::StrAppend(&features, features.empty() ? "" : ",", f);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // FMA contraction
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      host.triple, host.cpu, features, options, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      CodeGenLevel(opt_level)));
  if (tm == nullptr) return absl::InternalError("could not create the host TargetMachine");
  return tm;
}

// The function pipeline Kiln's kernels need, in place of LLVM's O3 module
// pipeline. Lowering has already tiled, unrolled and vectorised the loops
// that matter, and the emitter writes loops already rotated, so most of O3
// (its repeated InstCombine rounds, IndVarSimplify, unswitching, loop idiom
// and deletion, SLP, the CGSCC walk) only costs compile time: resnet18 cold
// 666 -> 495 ms, mobilenet_v2 461 -> 346, transformer 155 -> 121, mlp 54 ->
// 44, with per-kernel run times within 3% of O3's on resnet18, faster on
// the transformer (sum 0.84x), and at most 11% slower on a few depthwise
// convolutions whose padding copies O3 unrolls (mobilenet_v2 sum 0.99x).
// Interleaved kiln-bench runs, per-kernel minimum of medians, Intel Xeon.
// What each step is for:
//  - inline: the kernel body into its entry point;
//  - sroa after instcombine: instcombine turns masked loads of the
//    accumulator tile into plain ones, which lets SROA keep the tile in
//    registers (before it, the K-blocked convolutions spilled it every
//    iteration, 3x slower);
//  - licm, gvn: hoisting and reusing address arithmetic;
//  - licm after loop-vectorize: the vectoriser's alias checks let the
//    loop-invariant loads it guards (a row's mean in layer norm) leave the
//    loop, which they could not before (2x on those kernels).
llvm::ModulePassManager KernelPipeline() {
  llvm::FunctionPassManager function_passes;
  function_passes.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
  function_passes.addPass(llvm::EarlyCSEPass());
  function_passes.addPass(llvm::SimplifyCFGPass());
  function_passes.addPass(llvm::InstCombinePass());
  function_passes.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
  function_passes.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LoopRotatePass()));
  function_passes.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                                /*UseMemorySSA=*/true));
  function_passes.addPass(llvm::GVNPass());
  function_passes.addPass(llvm::LoopVectorizePass());
  function_passes.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                                /*UseMemorySSA=*/true));
  function_passes.addPass(llvm::InstCombinePass());
  function_passes.addPass(llvm::SimplifyCFGPass());

  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::createModuleToPostOrderCGSCCPassAdaptor(llvm::InlinerPass()));
  mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(function_passes)));
  return mpm;
}

void Optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  // (These tune LLVM's own O1 pipeline; KernelPipeline has no unroller.)
  // LLVM's unroller does not pay for itself here: lowering already unrolls
  // and vectorises the loops that matter (the contraction micro-kernels),
  // and unrolling the rest again cost 12-40% of each model's compile time
  // (resnet18 905 -> 779 ms, mobilenet_v2 576 -> 503, transformer 171 ->
  // 148, mlp 63 -> 38) for run times within +-3%, the noise of this
  // machine, either way (interleaved kiln-bench runs, Intel Xeon, 2 cores).
  tuning.LoopUnrolling = false;
  llvm::PassBuilder pb(&tm, tuning);
  // glibc's libmvec gives the vectoriser vector logf (registered first, so it
  // wins over the default TargetLibraryInfo); exp is emitted inline.
  llvm::TargetLibraryInfoImpl tlii(tm.getTargetTriple());
  tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86,
                                          tm.getTargetTriple());
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (opt_level == 0) {
    mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
  } else if (opt_level == 1) {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1);
  } else {
    mpm = KernelPipeline();
  }
  mpm.run(module, mam);
}

struct Optimized {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
};

absl::StatusOr<Optimized> EmitAndOptimize(const lower::LoopFunction& fn,
                                          const CodegenOptions& options) {
  Optimized out;
  auto tm = CreateHostTargetMachine(options.opt_level);
  if (!tm.ok()) return tm.status();
  out.tm = *std::move(tm);
  out.context = std::make_unique<llvm::LLVMContext>();
  // Missed-vectorisation remarks (a loop calling tanhf) are expected, not news.
  out.context->setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo&, void*) {}, nullptr);
  auto module = EmitModule(fn, options, *out.context, *out.tm);
  if (!module.ok()) return module.status();
  out.module = *std::move(module);
  Optimize(*out.module, *out.tm, options.opt_level);
  return out;
}

}  // namespace

const HostTarget& GetHostTarget() {
  static const HostTarget* host = [] {
    auto* h = new HostTarget();
    h->triple = llvm::sys::getProcessTriple();
    h->cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features)) {
      for (const auto& f : features) {
        if (f.getValue()) h->features.push_back("+" + f.getKey().str());
      }
    }
    std::sort(h->features.begin(), h->features.end());
    return h;
  }();
  return *host;
}

std::string LlvmVersionString() { return LLVM_VERSION_STRING; }

std::string CodegenOptions::ToString() const {
  // Unchecked kernels keep the key they always had ("O3"): caches stay warm.
  return absl::StrCat("O", opt_level, bounds_checks ? " bounds-checked" : "");
}

absl::StatusOr<std::string> CompileToObject(const lower::LoopFunction& fn,
                                            const CodegenOptions& options) {
  auto optimized = EmitAndOptimize(fn, options);
  if (!optimized.ok()) return optimized.status();
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (optimized->tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
    return absl::InternalError("the host TargetMachine cannot emit object files");
  }
  pm.run(*optimized->module);
  return std::string(buffer.begin(), buffer.end());
}

absl::StatusOr<std::string> EmitOptimizedIR(const lower::LoopFunction& fn,
                                            const CodegenOptions& options) {
  auto optimized = EmitAndOptimize(fn, options);
  if (!optimized.ok()) return optimized.status();
  std::string text;
  llvm::raw_string_ostream os(text);
  optimized->module->print(os, nullptr);
  return os.str();
}

}  // namespace kiln::codegen
