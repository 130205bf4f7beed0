#include "server/status_conversion.h"

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
  constexpr size_t kMaxLoggedMessage = 1024;
  absl::string_view message = status.message();
  std::string escaped;
  for (char c : message.substr(0, kMaxLoggedMessage)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\\') {
      escaped += "\\\\";
    } else if (byte < 0x20 || byte > 0x7e) {
      absl::StrAppend(&escaped, "\\x", absl::Hex(byte, absl::kZeroPad2));
    } else {
      escaped += c;
    }
  }
  if (message.size() > kMaxLoggedMessage) {
    absl::StrAppend(&escaped, "... (", message.size(), " bytes)");
  }
  return absl::StrCat("kiln-server: ", rpc, ": ", absl::StatusCodeToString(status.code()), ": ",
                      escaped);
}

grpc::Status Fail(const char* rpc, const absl::Status& status) {
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
  int64_t suppressed = 0;
  if (limiter->Admit(SteadyNowNs(), &suppressed)) {
    if (suppressed > 0) {
      std::cerr << "kiln-server: " << rpc << ": " << suppressed << " more "
                << absl::StatusCodeToString(status.code()) << " failures not logged (over "
                << kLinesPerCause << " a second)\n";
    }
    std::cerr << FailureLogLine(rpc, status) << "\n";
  }
  return ToGrpcStatus(status);
}

}  // namespace kiln::server
