// kiln-server: the gRPC front of Kiln.
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "common/build_info.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "engine/redis_connection.h"
#include "server/command_line.h"
#include "server/cpu_affinity.h"
#include "server/kiln_server.h"
#include "server/server_flags.h"
#include "server/usable_memory.h"

namespace {
volatile std::sig_atomic_t stop_requested = 0;
void OnSignal(int) { stop_requested = 1; }
}  // namespace

namespace {

// Each connection holds a descriptor: the soft limit (often 1024) is raised
// to the hard one, so that many idle clients cannot stop the listener
// accepting.
void RaiseDescriptorLimit() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// Why the server did not start (bad flags, a port taken), as a log line.
void LogStartError(absl::string_view message) {
  kiln::Log(kiln::LogLevel::kError, "server", message);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every Mutex lock (gRPC's
  // included) feeds a deadlock-detection graph: 2% of the server's CPU per
  // request in a profile. Release builds of Abseil skip it; so does Kiln.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "kiln-server [--flag=value ...] [--flagfile=FILE]\n\n"
      "Serves models over gRPC: KServe v2 / Triton (inference.GRPCInferenceService) and\n"
      "Kiln's own kiln.v1.Compiler. Flags may be spelled with dashes or underscores\n"
      "(--model-repository or --model_repository), on the command line or one per line\n"
      "in a --flagfile. They are listed by group below (server/flags/<group>.cc).\n\n"
      "Environment: XDG_CACHE_HOME or HOME place the default --cache-dir; KILN_PERF_JIT=1\n"
      "announces generated kernels to perf.");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = kiln::server::IsServerFlagFile;
  usage.contains_helpshort_flags = kiln::server::IsServerFlagFile;
  // Kiln's version, LLVM's and the build, where Abseil's default says only
  // whether NDEBUG was set.
  usage.version_string = [] { return kiln::VersionText("kiln-server") + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  absl::StatusOr<std::vector<std::string>> expanded =
      kiln::server::ExpandCommandLine(std::vector<std::string>(argv, argv + argc));
  if (!expanded.ok()) {
    LogStartError(expanded.status().message());
    return 2;
  }
  std::vector<std::string> words = *std::move(expanded);
  std::vector<char*> normalized;
  for (std::string& w : words) normalized.push_back(w.data());
  absl::ParseCommandLine(static_cast<int>(normalized.size()), normalized.data());
  // The log's shape first: every later line, errors in flags included, has it.
  absl::StatusOr<kiln::LogFormat> log_format =
      kiln::ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  absl::StatusOr<kiln::LogLevel> log_level = kiln::ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!log_format.ok() || !log_level.ok()) {
    LogStartError(
        absl::StrCat("--log-format / --log-level: ",
                     (log_format.ok() ? log_level.status() : log_format.status()).message()));
    return 2;
  }
  kiln::SetLogFormat(*log_format);
  kiln::SetLogLevel(*log_level);
  kiln::server::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.port = absl::GetFlag(FLAGS_port);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.max_models = absl::GetFlag(FLAGS_max_models);
  const int64_t max_loaded_mb = absl::GetFlag(FLAGS_max_loaded_mb);
  if (max_loaded_mb < 1) {
    LogStartError("--max-loaded-mb must be at least 1");
    return 2;
  }
  options.max_loaded_bytes = std::min(max_loaded_mb, INT64_MAX >> 20) << 20;
  options.max_shape_variants = absl::GetFlag(FLAGS_max_shape_variants);
  if (options.max_shape_variants < 1) {
    LogStartError("--max-shape-variants must be at least 1");
    return 2;
  }
  options.row_chunks = absl::GetFlag(FLAGS_row_chunks);
  options.max_message_mb = absl::GetFlag(FLAGS_max_message_mb);
  options.compile_threads = absl::GetFlag(FLAGS_compile_threads);
  options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (options.cache_dir.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg) {
      options.cache_dir = std::string(xdg) + "/kiln/kernels";
    } else if (home && *home) {
      options.cache_dir = std::string(home) + "/.cache/kiln/kernels";
    }
  } else if (options.cache_dir == "none") {
    options.cache_dir.clear();
  }
  options.cache_max_bytes = absl::GetFlag(FLAGS_cache_max_bytes);
  options.cache_memory_max_bytes = absl::GetFlag(FLAGS_cache_memory_max_bytes);
  options.max_concurrent_compiles = absl::GetFlag(FLAGS_max_concurrent_compiles);
  options.max_graph_nodes = absl::GetFlag(FLAGS_max_graph_nodes);
  options.max_upload_mb = absl::GetFlag(FLAGS_max_upload_mb);
  options.model_repository = absl::GetFlag(FLAGS_model_repository);
  absl::StatusOr<kiln::server::ModelControlMode> control =
      kiln::server::ParseModelControlMode(absl::GetFlag(FLAGS_model_control_mode));
  if (!control.ok()) {
    LogStartError(control.status().message());
    return 2;
  }
  options.model_control_mode = *control;
  options.load_models = absl::GetFlag(FLAGS_load_model);
  options.repository_poll_secs = absl::GetFlag(FLAGS_repository_poll_secs);
  if (!options.load_models.empty() &&
      options.model_control_mode != kiln::server::ModelControlMode::kExplicit) {
    LogStartError(
        "--load-model needs --model-control-mode=explicit (the other modes load every "
        "model of the repository)");
    return 2;
  }
  if (options.repository_poll_secs < 1) {
    LogStartError("--repository-poll-secs must be at least 1");
    return 2;
  }
  if (options.max_upload_mb < 1 || options.max_upload_mb > 4096) {
    LogStartError("--max-upload-mb must be 1..4096");
    return 2;
  }
  options.compile_nice = absl::GetFlag(FLAGS_compile_nice);
  options.max_connection_idle_s = absl::GetFlag(FLAGS_max_connection_idle_s);
  options.max_connection_age_s = absl::GetFlag(FLAGS_max_connection_age_s);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.max_connections = absl::GetFlag(FLAGS_max_connections);
  if (options.max_connection_idle_s < 0 || options.max_connection_age_s < 0 ||
      options.max_concurrent_streams < 1 || options.max_connections < 0) {
    LogStartError(
        "--max-connection-idle-s, --max-connection-age-s and --max-connections must be >= 0 and "
        "--max-concurrent-streams >= 1");
    return 2;
  }
  RaiseDescriptorLimit();
  if (options.compile_nice < 0 || options.compile_nice > 19) {
    LogStartError("--compile-nice must be 0..19");
    return 2;
  }
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth_tokens = absl::GetFlag(FLAGS_auth_tokens);
  if (options.max_graph_nodes < 1 || options.max_graph_nodes > 200000) {
    LogStartError("--max-graph-nodes must be 1..200000");
    return 2;
  }
  if (options.max_concurrent_compiles < 1 || options.max_concurrent_compiles > 64) {
    LogStartError("--max_concurrent_compiles must be 1..64");
    return 2;
  }
  options.cache_min_compile_ms = absl::GetFlag(FLAGS_cache_min_compile_ms);
  options.remote_cache = absl::GetFlag(FLAGS_remote_cache);
  if (!options.remote_cache.empty()) {
    absl::StatusOr<kiln::engine::RedisAddress> redis =
        kiln::engine::ParseRedisUrl(options.remote_cache);
    if (!redis.ok()) {
      LogStartError(absl::StrCat("--remote-cache: ", redis.status().message()));
      return 2;
    }
  }
  options.remote_cache_ttl_s = absl::GetFlag(FLAGS_remote_cache_ttl_s);
  options.remote_cache_max_entry_mb = absl::GetFlag(FLAGS_remote_cache_max_entry_mb);
  options.remote_cache_connect_timeout_ms = absl::GetFlag(FLAGS_remote_cache_connect_timeout_ms);
  options.remote_cache_timeout_ms = absl::GetFlag(FLAGS_remote_cache_timeout_ms);
  options.remote_cache_lease_wait_s = absl::GetFlag(FLAGS_remote_cache_lease_wait_s);
  if (options.remote_cache_ttl_s < 1 || options.remote_cache_max_entry_mb < 1 ||
      options.remote_cache_max_entry_mb > 1024 || options.remote_cache_connect_timeout_ms < 1 ||
      options.remote_cache_timeout_ms < 1 || options.remote_cache_lease_wait_s < 0) {
    LogStartError(
        "--remote-cache-ttl-s, the timeouts and --remote-cache-max-entry-mb (up to 1024) must be "
        "positive, --remote-cache-lease-wait-s >= 0");
    return 2;
  }
  options.model_store = absl::GetFlag(FLAGS_model_store);
  if (!options.model_store.empty()) {
    if (absl::Status s = kiln::engine::ParseRedisUrl(options.model_store).status(); !s.ok()) {
      LogStartError(absl::StrCat("--model-store: ", s.message()));
      return 2;
    }
  }
  options.model_store_max_mb = absl::GetFlag(FLAGS_model_store_max_mb);
  options.model_store_view_ms = absl::GetFlag(FLAGS_model_store_view_ms);
  if (options.model_store_max_mb < 1 || options.model_store_max_mb > 4096 ||
      options.model_store_view_ms < 0) {
    LogStartError("--model-store-max-mb must be 1..4096 and --model-store-view-ms >= 0");
    return 2;
  }
  options.kernel_bounds_checks = absl::GetFlag(FLAGS_kernel_bounds_checks);
  absl::StatusOr<std::vector<int>> cpus =
      kiln::server::ParseCpuList(absl::GetFlag(FLAGS_inference_cpus));
  if (!cpus.ok()) {
    LogStartError(absl::StrCat("--inference_cpus: ", cpus.status().ToString()));
    return 2;
  }
  options.inference_cpus = *std::move(cpus);
  options.infer_spin_us = absl::GetFlag(FLAGS_infer_spin_us);
  if (options.infer_spin_us < 0 || options.infer_spin_us > 1000000) {
    LogStartError("--infer_spin_us must be 0..1000000");
    return 2;
  }
  options.infer_inline_us = absl::GetFlag(FLAGS_infer_inline_us);
  options.infer_workers = absl::GetFlag(FLAGS_infer_workers);
  if (options.infer_inline_us < 0 || options.infer_workers < 1 || options.infer_workers > 256) {
    LogStartError("--infer_inline_us must be >= 0 and --infer_workers 1..256");
    return 2;
  }
  options.http_port = absl::GetFlag(FLAGS_http_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (options.http_port < -1 || options.http_port > 65535 || options.metrics_port < -1 ||
      options.metrics_port > 65535) {
    LogStartError("--http-port and --metrics-port must be -1..65535");
    return 2;
  }
  // A peer that closes its connection while the HTTP listener writes over
  // TLS (OpenSSL writes with write(), not send(MSG_NOSIGNAL)) must cost a
  // failed write, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  auto server = kiln::server::StartKilnServer(options);
  if (!server.ok()) {
    LogStartError(server.status().ToString());
    return 1;
  }
  // The HTTP ports first: the gRPC line comes last, and tests read up to it.
  if ((*server)->http_port() >= 0) {
    std::cout << "kiln-server HTTP on " << options.address << ":" << (*server)->http_port()
              << std::endl;
  }
  if ((*server)->metrics_port() >= 0) {
    std::cout << "kiln-server metrics on " << options.address << ":" << (*server)->metrics_port()
              << std::endl;
  }
  std::cout << "kiln-server listening on " << options.address << ":" << (*server)->port()
            << std::endl;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::thread waiter([&] { (*server)->Wait(); });
  while (!stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A call that ignores cancellation (a long compile) must not hold the
  // process forever (issue 20: SIGTERM waited for a 16 s call): past the
  // grace and a little more, exit anyway. The kernel cache's files are
  // written whole or not at all, so nothing on disk is left half-done.
  const double grace_s = std::max(0.0, absl::GetFlag(FLAGS_shutdown_grace_s));
  std::thread([grace_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s + 2.0));
    kiln::Log(kiln::LogLevel::kWarning, "server",
              absl::StrCat("calls still running ", grace_s + 2.0,
                           " s after the stop signal; exiting anyway"));
    std::_Exit(0);
  }).detach();
  (*server)->Shutdown(absl::Seconds(grace_s));
  waiter.join();
  return 0;
}
