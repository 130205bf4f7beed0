// kiln-server's flags, defined in server/flags/ one file per group
// (network, HTTP and metrics, security, cache, compile, limits, inference,
// logging) so that --help lists them under those headings.
#ifndef KILN_SERVER_SERVER_FLAGS_H_
#define KILN_SERVER_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, address);
ABSL_DECLARE_FLAG(int, port);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, max_models);
ABSL_DECLARE_FLAG(int64_t, max_loaded_mb);
ABSL_DECLARE_FLAG(int, max_shape_variants);
ABSL_DECLARE_FLAG(bool, row_chunks);
ABSL_DECLARE_FLAG(int, max_message_mb);
ABSL_DECLARE_FLAG(int, compile_threads);
ABSL_DECLARE_FLAG(std::string, cache_dir);
ABSL_DECLARE_FLAG(int64_t, cache_max_bytes);
ABSL_DECLARE_FLAG(std::string, model_repository);
ABSL_DECLARE_FLAG(std::string, model_control_mode);
ABSL_DECLARE_FLAG(std::vector<std::string>, load_model);
ABSL_DECLARE_FLAG(int, repository_poll_secs);
ABSL_DECLARE_FLAG(int64_t, max_upload_mb);
ABSL_DECLARE_FLAG(int64_t, max_graph_nodes);
ABSL_DECLARE_FLAG(int, max_concurrent_compiles);
ABSL_DECLARE_FLAG(int64_t, cache_memory_max_bytes);
ABSL_DECLARE_FLAG(std::string, inference_cpus);
ABSL_DECLARE_FLAG(int, infer_spin_us);
ABSL_DECLARE_FLAG(int, infer_inline_us);
ABSL_DECLARE_FLAG(int, infer_workers);
ABSL_DECLARE_FLAG(double, cache_min_compile_ms);
ABSL_DECLARE_FLAG(std::string, remote_cache);
ABSL_DECLARE_FLAG(int64_t, remote_cache_ttl_s);
ABSL_DECLARE_FLAG(int64_t, remote_cache_max_entry_mb);
ABSL_DECLARE_FLAG(int, remote_cache_connect_timeout_ms);
ABSL_DECLARE_FLAG(int, remote_cache_timeout_ms);
ABSL_DECLARE_FLAG(double, remote_cache_lease_wait_s);
ABSL_DECLARE_FLAG(std::string, model_store);
ABSL_DECLARE_FLAG(int64_t, model_store_max_mb);
ABSL_DECLARE_FLAG(int, model_store_view_ms);
ABSL_DECLARE_FLAG(bool, kernel_bounds_checks);
ABSL_DECLARE_FLAG(double, max_connection_idle_s);
ABSL_DECLARE_FLAG(double, max_connection_age_s);
ABSL_DECLARE_FLAG(int, max_concurrent_streams);
ABSL_DECLARE_FLAG(int, max_connections);
ABSL_DECLARE_FLAG(int, compile_nice);
ABSL_DECLARE_FLAG(double, shutdown_grace_s);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_client_ca);
ABSL_DECLARE_FLAG(std::string, auth_tokens);
ABSL_DECLARE_FLAG(std::string, log_format);
ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(int, http_port);
ABSL_DECLARE_FLAG(int, metrics_port);

#endif  // KILN_SERVER_SERVER_FLAGS_H_
