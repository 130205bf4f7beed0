// Pass infrastructure as TVM has it: a pass is a value with a name, an
// opt_level and prerequisites; a PassContext decides which passes run; the
// instruments see every pass before and after (timing and IR dumps live there,
// not in the passes).
#ifndef KILN_COMPILER_PASS_PASS_H_
#define KILN_COMPILER_PASS_PASS_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln {

class Pass;

struct PassInfo {
  std::string name;
  int opt_level = 0;
  // Passes that must have run first.
  std::vector<std::string> required;
};

// Prints the IR a pass ran over: the graph for graph passes, every kernel's
// loop nest for loop passes. Instruments call it only when they dump.
using PrintIr = absl::FunctionRef<std::string()>;

class PassInstrument {
 public:
  virtual ~PassInstrument() = default;
  virtual void RunBeforePass(const PassInfo& info, int depth) {}
  virtual void RunAfterPass(const PassInfo& info, int depth, bool changed, PrintIr print_ir) {}
  virtual void OnSkippedPass(const PassInfo& info, int depth, const std::string& reason) {}
};

// Whether ConvertLayoutNchwc rewrites conv chains into blocked channels:
// never, on the graphs where it measured faster (kAuto, the default; see
// its design note), or wherever it can.
enum class NchwcLayout { kOff, kAuto, kOn };

// Typed knobs of individual passes (TVM keeps these as strings in `config`).
struct PassConfig {
  int fuse_max_depth = 256;
  NchwcLayout nchwc_layout = NchwcLayout::kAuto;
  // The contraction schedule's cycles per operand load (ContractionKnobs);
  // 0: the host's (HostContractionKnobs).
  double operand_load_cycles = 0;
  // WinogradConv's algorithm for the 3x3 convs where it pays: F(2x2, 3x3)
  // (2, the default: it rounds about as the direct conv does), F(3x3, 3x3)
  // (3: 1.4x fewer multiply-adds again, some 3x the rounding error),
  // F(4x4, 3x3) (4: 1.8x fewer, some 10x the error, past twice PyTorch's
  // float32 error on the zoo's fcn_resnet50), or 0 for none. A conv where
  // the larger does not pay or fit its caps takes the next smaller one.
  int winograd_tile = 2;
};

struct PassContext {
  int opt_level = 2;
  std::vector<std::string> required_pass;
  std::vector<std::string> disabled_pass;
  PassConfig config;
  std::vector<PassInstrument*> instruments;
  // Makes a pass by name, to run a prerequisite that has not run yet (may be empty).
  std::function<std::unique_ptr<Pass>(const std::string&)> pass_factory;
  // Names of the passes that completed under this context: RunPass keeps it, so
  // a prerequisite runs at most once unless the pipeline itself repeats it.
  mutable std::set<std::string> completed;
  // Asked before each pass (and each group's lowering): true ends the
  // compile with Cancelled (its caller has gone or its deadline passed).
  std::function<bool()> should_stop;

  // Whether `info` runs here; when not, `reason` says why ("disabled",
  // "opt_level 3 > 2", "requires InferType, which is disabled").
  bool ShouldRun(const PassInfo& info, std::string* reason) const;
};

// A graph-to-graph transformation. Returns whether the graph changed.
class Pass {
 public:
  virtual ~Pass() = default;
  virtual const PassInfo& info() const = 0;
  virtual absl::StatusOr<bool> Run(Graph& graph, const PassContext& ctx) = 0;
  // The names of this pass and every pass nested in it (for option validation).
  virtual void CollectNames(std::vector<std::string>& names) const {
    names.push_back(info().name);
  }
};

// The protocol every pass runs under, graph or loop, in two halves.
// AdmitPass: whether `info` runs under `ctx`; when not, the instruments are
// told it was skipped and why.
bool AdmitPass(const PassInfo& info, const PassContext& ctx, int depth);
// RunInstrumented: `body` between the instruments' before and after hooks;
// on success the pass counts as completed. Returns what `body` returns.
absl::StatusOr<bool> RunInstrumented(const PassInfo& info, const PassContext& ctx, int depth,
                                     absl::FunctionRef<absl::StatusOr<bool>()> body,
                                     PrintIr print_ir);

// Runs `pass` under `ctx` at nesting `depth`: gates it, runs its prerequisites
// that have not run yet, calls the instruments around it, prefixes a failure
// with the pass name, and re-verifies the graph when the pass changed it.
absl::StatusOr<bool> RunPass(Pass& pass, Graph& graph, const PassContext& ctx, int depth);

// A pass made of passes, run in order; itself a pass, so pipelines nest.
class Sequential final : public Pass {
 public:
  Sequential(std::string name, std::vector<std::unique_ptr<Pass>> passes, int opt_level = 0);
  const PassInfo& info() const override { return info_; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext& ctx) override;
  void CollectNames(std::vector<std::string>& names) const override;
  // Used by RunPass to give nested passes their depth.
  absl::StatusOr<bool> RunAtDepth(Graph& graph, const PassContext& ctx, int depth);

 private:
  PassInfo info_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

// A pass defined by a function: most passes need nothing more.
class FunctionPass final : public Pass {
 public:
  using Fn = absl::StatusOr<bool> (*)(Graph&, const PassContext&);
  FunctionPass(PassInfo info, Fn fn) : info_(std::move(info)), fn_(fn) {}
  const PassInfo& info() const override { return info_; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext& ctx) override {
    return fn_(graph, ctx);
  }

 private:
  PassInfo info_;
  Fn fn_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_PASS_PASS_H_
