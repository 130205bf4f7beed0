#include "server/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"

namespace kiln::server {
namespace {

absl::Status BadList(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("CPU list '", text, "': ", why, " (expected e.g. 1 or 0,2 or 0-3)"));
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity: ", std::strerror(errno)));
  }
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const size_t dash = part.find('-');
    const absl::string_view low = part.substr(0, dash);
    const absl::string_view high = dash == absl::string_view::npos ? part : part.substr(dash + 1);
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(low, &first) || !absl::SimpleAtoi(high, &last) || first < 0) {
      return BadList(text, absl::StrCat("'", part, "' is not a CPU or a range of CPUs"));
    }
    if (last < first) return BadList(text, absl::StrCat("range '", part, "' runs backwards"));
    for (int c = first; c <= last; ++c) {
      if (c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
        return BadList(text, absl::StrCat("this process may not run on CPU ", c, " (it may use ",
                                          CPU_COUNT(&allowed), " CPUs)"));
      }
      cpus.push_back(c);
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

absl::Status BindThisThreadToCpus(const std::vector<int>& cpus) {
  thread_local std::vector<int> bound;
  if (cpus.empty() || cpus == bound) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  const bool failed = sched_setaffinity(0, sizeof(set), &set) != 0;
  bound = cpus;  // a failure is reported once per thread, not per call
  if (failed) {
    return absl::InternalError(absl::StrCat("sched_setaffinity: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void BindHandlerThreadOrWarn(const std::vector<int>& cpus, const char* rpc) {
  if (absl::Status bound = BindThisThreadToCpus(cpus); !bound.ok()) {
    Log(LogLevel::kWarning, "server", absl::StrCat(rpc, " runs unbound: ", bound.ToString()));
  }
}

}  // namespace kiln::server
