#include "server/status_conversion.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/ms_since.h"
#include "server/log_limiter.h"

namespace kiln::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

std::string FailureLogLine(const char* rpc, const absl::Status& status) {
  return absl::StrCat(rpc, ": ", absl::StatusCodeToString(status.code()), ": ", status.message());
}

LogLevel FailureLogLevel(absl::StatusCode code) {
  // The server's own faults are errors; the rest are a client's doing.
  switch (code) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      return LogLevel::kError;
    default:
      return LogLevel::kWarning;
  }
}

grpc::Status Fail(const char* rpc, const absl::Status& status, absl::string_view model,
                  absl::string_view request_id) {
  // Per cause (RPC and status code), 10 lines a second at most; a flood of
  // one kind of failure is summarised and does not hide the others. Causes
  // are bounded: Kiln's RPCs times gRPC's 17 codes.
  constexpr int kLinesPerCause = 10;
  static absl::Mutex* mutex = new absl::Mutex;
  static auto* limiters = new std::map<std::pair<std::string, int>, std::unique_ptr<LogLimiter>>;
  LogLimiter* limiter;
  {
    absl::MutexLock lock(mutex);
    std::unique_ptr<LogLimiter>& slot = (*limiters)[{rpc, static_cast<int>(status.code())}];
    if (!slot) slot = std::make_unique<LogLimiter>(kLinesPerCause);
    limiter = slot.get();
  }
  const LogLevel level = FailureLogLevel(status.code());
  if (!LogEnabled(level)) return ToGrpcStatus(status);
  int64_t suppressed = 0;
  if (limiter->Admit(SteadyNowNs(), &suppressed)) {
    if (suppressed > 0) {
      LogContext held_back;
      held_back.suppressed = suppressed;
      Log(level, "server",
          absl::StrCat(rpc, ": suppressed ", suppressed, " more ",
                       absl::StatusCodeToString(status.code()), " failures (over ", kLinesPerCause,
                       " a second)"),
          held_back);
    }
    LogContext context;
    context.model = model;
    context.request_id = request_id;
    Log(level, "server", FailureLogLine(rpc, status), context);
  }
  return ToGrpcStatus(status);
}

}  // namespace kiln::server
