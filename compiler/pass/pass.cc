#include "compiler/pass/pass.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"

namespace kiln {
namespace {
bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

bool PassContext::ShouldRun(const PassInfo& info, std::string* reason) const {
  if (Contains(disabled_pass, info.name)) {
    *reason = "disabled";
    return false;
  }
  if (info.opt_level > opt_level && !Contains(required_pass, info.name)) {
    *reason = absl::StrCat("opt_level ", info.opt_level, " > ", opt_level);
    return false;
  }
  for (const std::string& prerequisite : info.required) {
    if (Contains(disabled_pass, prerequisite)) {
      *reason = absl::StrCat("requires ", prerequisite, ", which is disabled");
      return false;
    }
  }
  return true;
}

bool AdmitPass(const PassInfo& info, const PassContext& ctx, int depth) {
  std::string reason;
  if (ctx.ShouldRun(info, &reason)) return true;
  for (PassInstrument* inst : ctx.instruments) inst->OnSkippedPass(info, depth, reason);
  return false;
}

absl::StatusOr<bool> RunInstrumented(const PassInfo& info, const PassContext& ctx, int depth,
                                     absl::FunctionRef<absl::StatusOr<bool>()> body,
                                     PrintIr print_ir) {
  for (PassInstrument* inst : ctx.instruments) inst->RunBeforePass(info, depth);
  absl::StatusOr<bool> changed = body();
  if (!changed.ok()) return changed;
  ctx.completed.insert(info.name);
  for (PassInstrument* inst : ctx.instruments) {
    inst->RunAfterPass(info, depth, *changed, print_ir);
  }
  return changed;
}

absl::StatusOr<bool> RunPass(Pass& pass, Graph& graph, const PassContext& ctx, int depth) {
  const PassInfo& info = pass.info();
  if (ctx.should_stop && ctx.should_stop()) {
    return absl::CancelledError(absl::StrCat("the compile stopped before ", info.name,
                                             ": its caller left or its deadline passed"));
  }
  if (!AdmitPass(info, ctx, depth)) return false;
  for (const std::string& prerequisite : info.required) {
    if (ctx.completed.count(prerequisite) || !ctx.pass_factory) continue;
    std::unique_ptr<Pass> before = ctx.pass_factory(prerequisite);
    if (before == nullptr) {
      return absl::InternalError(
          absl::StrCat(info.name, " requires unknown pass ", prerequisite));
    }
    KILN_RETURN_IF_ERROR(RunPass(*before, graph, ctx, depth).status());
  }
  auto body = [&]() -> absl::StatusOr<bool> {
    absl::StatusOr<bool> changed;
    if (auto* seq = dynamic_cast<Sequential*>(&pass)) {
      changed = seq->RunAtDepth(graph, ctx, depth + 1);
    } else {
      changed = pass.Run(graph, ctx);
    }
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat(info.name, ": ", changed.status().message()));
    }
    if (*changed) {
      // Re-verify only when the pass says it changed something (XLA's habit).
      absl::Status verified = VerifyGraph(graph);
      if (!verified.ok()) {
        return absl::InternalError(
            absl::StrCat("graph invalid after ", info.name, ": ", verified.message()));
      }
    }
    return changed;
  };
  return RunInstrumented(info, ctx, depth, body, [&] { return PrintGraph(graph); });
}

Sequential::Sequential(std::string name, std::vector<std::unique_ptr<Pass>> passes,
                       int opt_level)
    : passes_(std::move(passes)) {
  info_.name = std::move(name);
  info_.opt_level = opt_level;
}

absl::StatusOr<bool> Sequential::Run(Graph& graph, const PassContext& ctx) {
  return RunAtDepth(graph, ctx, 0);
}

absl::StatusOr<bool> Sequential::RunAtDepth(Graph& graph, const PassContext& ctx, int depth) {
  bool changed = false;
  for (auto& pass : passes_) {
    KILN_ASSIGN_OR_RETURN(bool c, RunPass(*pass, graph, ctx, depth));
    changed |= c;
  }
  return changed;
}

void Sequential::CollectNames(std::vector<std::string>& names) const {
  names.push_back(info_.name);
  for (const auto& p : passes_) p->CollectNames(names);
}

}  // namespace kiln
