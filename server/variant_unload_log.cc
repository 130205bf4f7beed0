#include "server/variant_unload_log.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/human_bytes.h"
#include "common/log.h"
#include "common/ms_since.h"
#include "server/log_limiter.h"

namespace kiln::server {

std::string VariantUnloadLogLine(const engine::VariantUnloaded& unloaded, int64_t max_bytes) {
  return absl::StrCat("unloaded shape ", unloaded.shapes, " of model '", unloaded.model, "' (",
                      HumanBytes(unloaded.bytes), ", unused longest) to make room for ",
                      unloaded.for_what, " (--max-loaded-mb: ", HumanBytes(max_bytes), ")");
}

engine::VariantUnloadSink LogVariantUnloads(int64_t max_bytes) {
  constexpr int kLinesPerSecond = 10;
  auto limiter = std::make_shared<LogLimiter>(kLinesPerSecond);
  return [limiter, max_bytes](const engine::VariantUnloaded& unloaded) {
    if (!LogEnabled(LogLevel::kInfo)) return;
    int64_t suppressed = 0;
    if (!limiter->Admit(SteadyNowNs(), &suppressed)) return;
    if (suppressed > 0) {
      LogContext held_back;
      held_back.suppressed = suppressed;
      Log(LogLevel::kInfo, "model_manager",
          absl::StrCat("suppressed ", suppressed, " more shape variants unloaded (over ",
                       kLinesPerSecond, " lines a second)"),
          held_back);
    }
    LogContext context;
    context.model = unloaded.model;
    Log(LogLevel::kInfo, "model_manager", VariantUnloadLogLine(unloaded, max_bytes), context);
  };
}

}  // namespace kiln::server
