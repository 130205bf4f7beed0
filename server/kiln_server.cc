#include "server/kiln_server.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "engine/model_manager.h"
#include "engine/model_store.h"
#include "engine/redis_connection.h"
#include "engine/remote_cache.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "runtime/thread_pool.h"
#include "server/compiler_service.h"
#include "server/connection_gate.h"
#include "server/http/http_front_end.h"
#include "server/infer_spin_loop.h"
#include "server/inference_service.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/repository_poller.h"
#include "server/server_credentials.h"
#include "server/token_table.h"
#include "server/unparsed_request_status.h"
#include "server/variant_unload_log.h"

namespace kiln::server {
namespace {

// An HTTP listener on `port` as the gRPC one is set up.
HttpListenerOptions HttpOptions(const ServerOptions& options, int port) {
  HttpListenerOptions http;
  http.address = options.address;
  http.port = port;
  http.tls_cert = options.tls_cert;
  http.tls_key = options.tls_key;
  http.tls_client_ca = options.tls_client_ca;
  http.max_body_bytes = int64_t{options.max_message_mb} << 20;
  return http;
}

// Members in dependency order: the services use the manager, the server the services.
class KilnServerImpl final : public KilnServer {
 public:
  KilnServerImpl(std::unique_ptr<engine::ModelManager> models,
                 std::unique_ptr<engine::ModelStore> store, const ServerOptions& options)
      : models_(std::move(models)),
        store_(std::move(store)),
        compiler_(models_.get(), options.inference_cpus,
                  {options.max_concurrent_compiles, options.max_graph_nodes,
                   options.max_upload_mb << 20}) {
    compiler_.set_model_store(store_.get());
  }

  ~KilnServerImpl() override {
    poller_.reset();
    if (gate_) gate_->Stop();
    if (metrics_) metrics_->Stop();
    if (http_) http_->Stop();
    if (server_) server_->Shutdown();
    if (spin_loop_) spin_loop_->Stop();
  }

  absl::Status Start(const ServerOptions& options) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
        MakeServerCredentials({options.tls_cert, options.tls_key, options.tls_client_ca});
    if (!credentials.ok()) return credentials.status();
    std::shared_ptr<const TokenTable> tokens;
    if (!options.auth_tokens.empty()) {
      absl::StatusOr<std::shared_ptr<const TokenTable>> loaded =
          TokenTable::Load(options.auth_tokens);
      if (!loaded.ok()) return loaded.status();
      tokens = *std::move(loaded);
    }
    if (!IsLoopback(options.address) && (options.tls_cert.empty() || !tokens)) {
      Log(LogLevel::kWarning, "server",
          absl::StrCat("serving on ", options.address, " without ",
                       options.tls_cert.empty() ? "TLS" : "",
                       options.tls_cert.empty() && !tokens ? " or " : "", !tokens ? "tokens" : "",
                       ": anyone who reaches this port can compile and run models. Set "
                       "--tls-cert/--tls-key and --auth-tokens, or bind 127.0.0.1."));
    }
    // grpc.health.v1.Health (gRPC's own, what Kubernetes' gRPC probes ask)
    // and server reflection (what grpcurl asks): both hook into every
    // builder made after these calls.
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    if (options.max_connections > 0) {
      if (!options.tls_cert.empty()) {
        return absl::InvalidArgumentError(
            "--max-connections needs plaintext gRPC: gRPC 1.51 cannot take over TLS "
            "connections a listener of Kiln's accepted (connection_gate.h)");
      }
      absl::StatusOr<std::unique_ptr<ConnectionGate>> gate =
          ConnectionGate::Listen(options.address, options.port, options.max_connections);
      if (!gate.ok()) return gate.status();
      gate_ = *std::move(gate);
      port_ = gate_->port();
    } else {
      builder.AddListeningPort(absl::StrCat(options.address, ":", options.port), *credentials,
                               &port_);
    }
    builder.SetMaxReceiveMessageSize(options.max_message_mb * 1024 * 1024);
    builder.SetMaxSendMessageSize(options.max_message_mb * 1024 * 1024);
    if (options.max_connection_idle_s > 0) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                                 static_cast<int>(std::min(options.max_connection_idle_s * 1000,
                                                           2e9)));
    }
    if (options.max_connection_age_s > 0) {
      builder.AddChannelArgument(
          GRPC_ARG_MAX_CONNECTION_AGE_MS,
          static_cast<int>(std::min(options.max_connection_age_s * 1000, 2e9)));
      // A long inference or compile on an aged connection finishes first.
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 600 * 1000);
    }
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
    // Keepalive pings: allowed every 10 s at most, also between calls (as
    // Triton's clients send them); a client pinging faster is sent away
    // after two strikes.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
    if (options.infer_spin_us > 0) {
      auto async = std::make_unique<AsyncInferenceService>(models_.get(), options.inference_cpus);
      spin_loop_ = std::make_unique<InferSpinLoop>(
          builder, async.get(), std::chrono::microseconds(options.infer_spin_us),
          std::chrono::microseconds(options.infer_inline_us), options.infer_workers);
      inference_ = std::move(async);
    } else {
      inference_ = std::make_unique<InferenceService>(models_.get(), options.inference_cpus);
    }
    inference_->set_tokens(tokens);
    inference_->set_repository(options.model_repository, &compiler_, options.model_control_mode);
    compiler_.set_tokens(tokens);
    builder.RegisterService(inference_.get());
    builder.RegisterService(&compiler_);
    std::set<std::string> parsed_by_the_server;
    if (spin_loop_) parsed_by_the_server.insert("/inference.GRPCInferenceService/ModelInfer");
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(UnparsedRequestStatusFactory(std::move(parsed_by_the_server)));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    if (!options.model_repository.empty()) LoadRepositoryAtStart(options);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address, ":",
                                                 options.port, " (is the port in use?)"));
    }
    if (gate_) gate_->Start(server_.get());
    if (spin_loop_) spin_loop_->Start();
    if (options.http_port >= 0) {
      absl::StatusOr<std::unique_ptr<HttpFrontEnd>> http = HttpFrontEnd::Start(
          HttpOptions(options, options.http_port), inference_.get(), tokens);
      if (!http.ok()) return http.status();
      http_ = *std::move(http);
    }
    if (options.metrics_port >= 0) {
      absl::StatusOr<std::unique_ptr<HttpListener>> metrics = StartMetricsEndpoint(
          HttpOptions(options, options.metrics_port), models_.get(), tokens, store_.get());
      if (!metrics.ok()) return metrics.status();
      metrics_ = *std::move(metrics);
    }
    SetServing(true);
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  int http_port() const override { return http_ ? http_->port() : -1; }
  int metrics_port() const override { return metrics_ ? metrics_->port() : -1; }
  void Shutdown(absl::Duration grace) override {
    SetServing(false);
    poller_.reset();  // no model loads once shutdown begins
    if (gate_) gate_->Stop();
    // Requests under way over HTTP finish first; new ones are refused.
    if (metrics_) metrics_->Stop();
    if (http_) http_->Stop();
    if (grace == absl::InfiniteDuration()) {
      server_->Shutdown();
    } else {
      server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    }
    if (spin_loop_) spin_loop_->Stop();
  }
  void Wait() override { server_->Wait(); }

 private:
  // The repository's models as the model control mode says: all of them, or
  // in explicit mode the --load-model ones; poll mode then follows the
  // repository from what it held before this load.
  void LoadRepositoryAtStart(const ServerOptions& options) {
    const std::string& dir = options.model_repository;
    std::map<std::string, std::string> before;
    if (options.model_control_mode == ModelControlMode::kPoll) before = RepositoryFingerprints(dir);
    if (options.model_control_mode != ModelControlMode::kExplicit ||
        LoadsEveryModel(options.load_models)) {
      compiler_.LoadRepository(dir);
    } else {
      for (const std::string& name : options.load_models) {
        absl::Status loaded = compiler_.LoadRepositoryModel(dir, name);
        if (!loaded.ok()) {
          Log(LogLevel::kError, "repository",
              absl::StrCat("--load-model ", name, ": ", loaded.message()));
        }
      }
    }
    if (options.model_control_mode == ModelControlMode::kPoll) {
      poller_ = std::make_unique<RepositoryPoller>(dir, absl::Seconds(options.repository_poll_secs),
                                                   std::move(before), &compiler_, models_.get());
    }
  }

  // Health follows readiness: SERVING once every start-up model is loaded
  // and the server listens, NOT_SERVING from the start of shutdown (the
  // overall status "" and each service's name).
  void SetServing(bool serving) {
    inference_->set_ready(serving);
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    if (health == nullptr) return;
    for (const char* service :
         {"", "inference.GRPCInferenceService", "kiln.v1.Compiler"}) {
      health->SetServingStatus(service, serving);
    }
  }

  std::unique_ptr<engine::ModelManager> models_;
  std::unique_ptr<engine::ModelStore> store_;  // null without --model-store
  // ModelInfer on gRPC's sync threads, or (an AsyncInferenceService) on the
  // spin loop.
  std::unique_ptr<InferenceService> inference_;
  CompilerService compiler_;
  std::unique_ptr<InferSpinLoop> spin_loop_;
  std::unique_ptr<grpc::Server> server_;
  // With --max-connections, the listener (else gRPC's own); after server_,
  // so it stops first.
  std::unique_ptr<ConnectionGate> gate_;
  int port_ = 0;
  std::unique_ptr<HttpFrontEnd> http_;
  std::unique_ptr<HttpListener> metrics_;
  // Last: it stops (joining its thread) before what it loads into goes.
  std::unique_ptr<RepositoryPoller> poller_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KilnServer>> StartKilnServer(const ServerOptions& options) {
  runtime::SetParallelThreads(options.threads > 0
                                  ? options.threads
                                  : static_cast<int>(std::thread::hardware_concurrency()));
  engine::ModelManagerOptions manager_options;
  manager_options.max_models = options.max_models;
  manager_options.max_shape_variants = options.max_shape_variants;
  manager_options.row_chunks.rows =
      options.row_chunks ? engine::RowChunkSetting::kAuto : engine::RowChunkSetting::kOff;
  manager_options.compile_threads = options.compile_threads;
  manager_options.compile_nice = options.compile_nice;
  manager_options.codegen.bounds_checks = options.kernel_bounds_checks;
  manager_options.cache.dir = options.cache_dir;
  manager_options.cache.max_bytes = options.cache_max_bytes;
  manager_options.cache.memory_max_bytes = options.cache_memory_max_bytes;
  manager_options.cache.min_compile_ms = options.cache_min_compile_ms;
  if (!options.remote_cache.empty()) {
    absl::StatusOr<engine::RedisAddress> redis = engine::ParseRedisUrl(options.remote_cache);
    if (!redis.ok()) return redis.status();
    engine::RemoteCacheOptions& remote = manager_options.cache.remote;
    remote.url = options.remote_cache;
    remote.ttl = absl::Seconds(options.remote_cache_ttl_s);
    remote.max_entry_bytes = options.remote_cache_max_entry_mb << 20;
    remote.timeouts.connect = absl::Milliseconds(options.remote_cache_connect_timeout_ms);
    remote.timeouts.command = absl::Milliseconds(options.remote_cache_timeout_ms);
    remote.max_lease_wait = absl::Seconds(options.remote_cache_lease_wait_s);
  }
  manager_options.max_loaded_bytes = options.max_loaded_bytes;
  manager_options.on_variant_unloaded = LogVariantUnloads(options.max_loaded_bytes);
  absl::StatusOr<std::unique_ptr<engine::ModelManager>> models =
      engine::ModelManager::Create(manager_options);
  if (!models.ok()) return models.status();
  std::unique_ptr<engine::ModelStore> store;
  if (!options.model_store.empty()) {
    engine::ModelStoreOptions store_options;
    store_options.url = options.model_store;
    store_options.max_model_bytes = options.model_store_max_mb << 20;
    store_options.view_ttl = absl::Milliseconds(options.model_store_view_ms);
    absl::StatusOr<std::unique_ptr<engine::ModelStore>> created =
        engine::ModelStore::Create(store_options);
    if (!created.ok()) return created.status();
    store = *std::move(created);
  }
  auto server = std::make_unique<KilnServerImpl>(*std::move(models), std::move(store), options);
  absl::Status started = server->Start(options);
  if (!started.ok()) return started;
  return std::unique_ptr<KilnServer>(std::move(server));
}

}  // namespace kiln::server
