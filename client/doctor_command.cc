#include "client/doctor_command.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/json_output.h"
#include "client/report_format.h"
#include "common/build_info.h"
#include "common/human_bytes.h"

namespace kiln::client {
namespace {

using Verdict = DoctorCheck::Verdict;

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "FAIL";
  }
  return "?";
}

// The checks GetServerInfo's answer allows: versions against this client's.
void CheckServerInfo(const kiln::v1::GetServerInfoResponse& info,
                     std::vector<DoctorCheck>* checks) {
  checks->push_back({"version", info.version() == kKilnVersion ? Verdict::kOk : Verdict::kWarn,
                     info.version() == kKilnVersion
                         ? absl::StrCat("server and client are Kiln ", kKilnVersion)
                         : absl::StrCat("server is Kiln ", info.version(), ", this client ",
                                        kKilnVersion, ": flags or fields may differ")});
  checks->push_back({"llvm",
                     info.llvm_version() == kBuildLlvmVersion ? Verdict::kOk : Verdict::kWarn,
                     info.llvm_version() == kBuildLlvmVersion
                         ? absl::StrCat("LLVM ", info.llvm_version())
                         : absl::StrCat("server's LLVM is ", info.llvm_version(),
                                        ", this client was built with ", kBuildLlvmVersion)});
  checks->push_back(
      {"cpu", Verdict::kOk,
       absl::StrCat(info.cpu(), " (", info.target_triple(), "), ", info.threads(),
                    " threads, features: ",
                    info.cpu_features().empty() ? std::string("none reported")
                                                : absl::StrJoin(info.cpu_features(), " "))});
  checks->push_back({"operators", info.ops().empty() ? Verdict::kWarn : Verdict::kOk,
                     absl::StrCat(info.ops_size(), " operators supported")});
}

// The kernel cache's health as GetCacheStats reports it.
void CheckCache(const kiln::v1::GetCacheStatsResponse& stats, std::vector<DoctorCheck>* checks) {
  checks->push_back({"cache.memory", Verdict::kOk,
                     absl::StrCat(stats.entries(), " kernels, ", HumanBytes(stats.memory_bytes()),
                                  "; ", stats.hits(), " hits, ", stats.misses(), " misses")});
  if (stats.has_remote()) {
    const kiln::v1::RemoteCacheStats& r = stats.remote();
    checks->push_back(
        {"cache.remote", r.available() && r.corrupt_entries() == 0 ? Verdict::kOk : Verdict::kWarn,
         !r.available()
             ? absl::StrCat(r.address(), " unavailable (", r.errors(),
                            " failed commands): kernels come from memory and disk or are "
                            "compiled here; the tier resumes when Redis answers")
             : absl::StrCat(r.address(), ": ", r.hits(), " hits, ", r.misses(), " misses, ",
                            r.corrupt_entries(), " corrupt entries, ", r.errors(),
                            " failed commands")});
  }
  if (!stats.disk_enabled()) {
    checks->push_back({"cache.disk", Verdict::kWarn,
                       "no disk cache (--cache-dir=none): every restart compiles every kernel"});
    return;
  }
  checks->push_back(
      {"cache.disk", Verdict::kOk,
       absl::StrCat(stats.disk_entries(), " entries, ", HumanBytes(stats.disk_bytes()))});
  checks->push_back(
      {"cache.writable", stats.disk_writing() ? Verdict::kOk : Verdict::kFail,
       stats.disk_writing()
           ? absl::StrCat("writing (", stats.disk_write_failures(), " failed writes so far)")
           : absl::StrCat("writes paused after a failed one (", stats.disk_write_failures(),
                          " failed): check the cache directory's space and permissions")});
  checks->push_back(
      {"cache.corrupt", stats.corrupt_entries() == 0 ? Verdict::kOk : Verdict::kWarn,
       absl::StrCat(stats.corrupt_entries(), " corrupt entries found (dropped and recompiled)")});
}

}  // namespace

int DoctorCommand(KilnClient& client, const std::string& target, bool json, std::ostream& out) {
  std::vector<DoctorCheck> checks;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<kiln::v1::GetServerInfoResponse> info = client.GetServerInfo();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<kiln::v1::GetCacheStatsResponse> stats = absl::UnavailableError("not asked");
  if (!info.ok()) {
    checks.push_back({"reachable", Verdict::kFail,
                      absl::StrCat(target, ": ", absl::StatusCodeToString(info.status().code()),
                                   ": ", info.status().message())});
  } else {
    checks.push_back(
        {"reachable", Verdict::kOk, absl::StrFormat("%s answered in %.1f ms", target, ms)});
    CheckServerInfo(*info, &checks);
    stats = client.GetCacheStats();
    if (stats.ok()) {
      CheckCache(*stats, &checks);
    } else {
      checks.push_back(
          {"cache", Verdict::kFail, absl::StrCat("GetCacheStats: ", stats.status().message())});
    }
  }
  bool failed = false;
  for (const DoctorCheck& c : checks) failed |= c.verdict == Verdict::kFail;
  if (!json) {
    for (const DoctorCheck& c : checks) {
      out << absl::StrFormat("%-5s %-15s %s\n", VerdictName(c.verdict), c.name, c.detail);
    }
    out << (failed ? "some checks failed\n" : "all checks passed\n");
    return failed ? 1 : 0;
  }
  std::vector<std::string> items;
  for (const DoctorCheck& c : checks) {
    items.push_back(absl::StrCat("{\"name\": ", JsonQuote(c.name),
                                 ", \"verdict\": ", JsonQuote(VerdictName(c.verdict)),
                                 ", \"detail\": ", JsonQuote(c.detail), "}"));
  }
  std::string doc =
      absl::StrCat("{\"ok\": ", failed ? "false" : "true", ", \"server\": ", JsonQuote(target),
                   ", \"client\": {\"version\": ", JsonQuote(kKilnVersion),
                   ", \"llvm_version\": ", JsonQuote(kBuildLlvmVersion), "}, \"checks\": [\n    ",
                   absl::StrJoin(items, ",\n    "), "]");
  if (info.ok()) absl::StrAppend(&doc, ",\n \"server_info\": ", ToJson(*info));
  if (stats.ok()) absl::StrAppend(&doc, ",\n \"cache_stats\": ", ToJson(*stats));
  out << WithSchemaVersion(doc + "}") << "\n";
  return failed ? 1 : 0;
}

}  // namespace kiln::client
