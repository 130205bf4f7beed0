// Builds and starts the gRPC server holding both services; what main() and the
// in-process tests share.
#ifndef KILN_SERVER_KILN_SERVER_H_
#define KILN_SERVER_KILN_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/model_control.h"
#include "server/usable_memory.h"

namespace kiln::server {

struct ServerOptions {
  std::string address = "127.0.0.1";
  int port = 50051;  // 0 picks a free port
  int threads = 0;   // kernel parallelism; 0 = hardware concurrency
  int max_models = 64;
  int max_shape_variants = 8;
  bool row_chunks = true;  // --row_chunks (engine/row_chunks.h)
  int max_message_mb = 256;
  int compile_threads = 2;
  int max_concurrent_compiles = 2;  // CompileModel calls running at once
  int compile_nice = 10;            // compiles run this much nicer than inference
  int64_t max_graph_nodes = 200000;  // larger models are RESOURCE_EXHAUSTED
  int64_t max_upload_mb = 2048;      // UploadModel's model size
  // Bytes loaded models and their shape variants may hold at once
  // (--max-loaded-mb; engine/memory_budget.h).
  int64_t max_loaded_bytes = DefaultMaxLoadedBytes();
  // Triton-layout model repository loaded at start (model_repository.h).
  std::string model_repository;
  // Triton's model control (model_control.h): which of its models load at
  // start (load_models, "*" for all, in explicit mode), whether the
  // repository RPCs load and unload, and poll mode's rescan interval.
  ModelControlMode model_control_mode = ModelControlMode::kNone;
  std::vector<std::string> load_models;
  int repository_poll_secs = 15;
  std::string cache_dir;  // empty: memory-only kernel cache
  int64_t cache_max_bytes = int64_t{1} << 30;
  int64_t cache_memory_max_bytes = int64_t{256} << 20;
  double cache_min_compile_ms = 0;
  // The remote kernel cache tier (engine/remote_cache.h): redis://HOST:PORT[/DB],
  // empty for none, and its bounds.
  std::string remote_cache;
  int64_t remote_cache_ttl_s = 7 * 24 * 3600;
  int64_t remote_cache_max_entry_mb = 64;
  int remote_cache_connect_timeout_ms = 200;
  int remote_cache_timeout_ms = 500;
  double remote_cache_lease_wait_s = 120;
  // The shared model store (engine/model_store.h): redis://HOST:PORT[/DB],
  // empty for none; records above the bound are not stored.
  std::string model_store;
  int64_t model_store_max_mb = 256;
  int model_store_view_ms = 1000;
  // CPUs the threads running inference are bound to (cpu_affinity.h);
  // empty leaves them to the scheduler.
  std::vector<int> inference_cpus;
  // > 0: ModelInfer runs on one thread that polls for the next call this
  // long after each one (infer_spin_loop.h); 0: on gRPC's sync threads.
  int infer_spin_us = 100;
  // With the polling thread: calls it answers itself (the model's last run
  // took at most this long), and the threads running the rest.
  int infer_inline_us = 1000;
  int infer_workers = 4;
  // PEM files: the server's certificate chain and key (TLS on when both are
  // set), and the CA client certificates must be signed by (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Bearer tokens and scopes (token_table.h); empty: no token needed.
  std::string auth_tokens;
  // Connections with no call for this long are closed (their descriptors
  // freed: ~1100 idle connections at a 1024-descriptor limit stopped the
  // listener for good, issue 20); 0 keeps them.
  double max_connection_idle_s = 300;
  // Connections are closed this long after they open (gRPC adds +-10%
  // jitter); calls under way get 10 more minutes. 0 keeps them.
  double max_connection_age_s = 0;
  // Calls in flight on one connection.
  int max_concurrent_streams = 100;
  // Open connections at most (plaintext only: connection_gate.h); 0: no cap.
  int max_connections = 0;
  // Every compile's kernels check their loads and stores (CompileOptions's
  // kernel_bounds_checks, forced on).
  bool kernel_bounds_checks = false;
  // KServe v2 over HTTP/REST (server/http) and the Prometheus page
  // (server/metrics) on these ports, on `address` with the same TLS and
  // tokens: -1 off, 0 a free port.
  int http_port = -1;
  int metrics_port = -1;
};

class KilnServer {
 public:
  virtual ~KilnServer() = default;
  // The bound port (useful with port 0).
  virtual int port() const = 0;
  // The bound HTTP and metrics ports; -1 when off.
  virtual int http_port() const { return -1; }
  virtual int metrics_port() const { return -1; }
  // Stops taking calls; those under way get `grace` to finish, then are
  // cancelled.
  virtual void Shutdown(absl::Duration grace = absl::InfiniteDuration()) = 0;
  virtual void Wait() = 0;
};

absl::StatusOr<std::unique_ptr<KilnServer>> StartKilnServer(const ServerOptions& options);

}  // namespace kiln::server

#endif  // KILN_SERVER_KILN_SERVER_H_
