// A C++ client for both of Kiln's services. Needs only the protos.
#ifndef KILN_CLIENT_KILN_CLIENT_H_
#define KILN_CLIENT_KILN_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/npy.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/kiln_service.grpc.pb.h"

namespace kiln::client {

struct KernelTime {
  int index = 0;
  std::string name;
  int64_t ns = 0;
};

// One request of InferConcurrently: its round trip and the server's own
// time for it (the kiln.profile total).
struct TimedInfer {
  double ms = 0;
  double server_ms = 0;
};

struct InferResult {
  std::vector<std::pair<std::string, NpyArray>> outputs;  // in response order
  std::vector<KernelTime> kernels;                         // with profile, by index
  int64_t total_ns = 0;
};

// How to reach a server started with TLS or tokens (kiln-server --tls-cert,
// --tls-client-ca, --auth-tokens).
struct ClientOptions {
  std::string tls_ca;    // PEM CA the server's certificate is checked against; TLS when set
  std::string tls_cert;  // PEM client certificate and key, for mutual TLS
  std::string tls_key;
  std::string token;     // sent as 'authorization: Bearer TOKEN'
};

class KilnClient {
 public:
  // `target`: "host:port". Connects lazily; the first call reports UNAVAILABLE
  // if nobody listens. InvalidArgument for unreadable TLS files.
  static absl::StatusOr<std::unique_ptr<KilnClient>> Create(const std::string& target,
                                                            const ClientOptions& options = {});

  absl::StatusOr<kiln::v1::CompileModelResponse> Compile(
      const kiln::v1::CompileModelRequest& request);
  // The streaming compile: `on_progress` sees each pass and kernel event; the
  // final response is returned.
  absl::StatusOr<kiln::v1::CompileModelResponse> CompileWithProgress(
      const kiln::v1::CompileModelRequest& request,
      const std::function<void(const kiln::v1::CompileProgress&)>& on_progress);
  // Measured tuning (TuneModel): `on_progress` sees each kernel as it is
  // tuned; the FINISHED event is returned.
  absl::StatusOr<kiln::v1::TuneProgress> Tune(
      const kiln::v1::TuneModelRequest& request,
      const std::function<void(const kiln::v1::TuneProgress&)>& on_progress);
  // Compile, for a model of any size: `request`'s model (ONNX bytes or
  // graph) goes as a header and chunks of at most 4 MiB with its SHA-256.
  // Taken by value: the model's bytes move out of it, never copied (a
  // 346 MB model made the client hold two copies).
  absl::StatusOr<kiln::v1::CompileModelResponse> Upload(kiln::v1::CompileModelRequest request);
  absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels();
  absl::StatusOr<kiln::v1::CallKernelResponse> CallKernel(const kiln::v1::CallKernelRequest& r);
  absl::StatusOr<kiln::v1::BenchmarkKernelResponse> BenchmarkKernel(
      const kiln::v1::BenchmarkKernelRequest& r);
  absl::StatusOr<InferResult> Infer(const std::string& model,
                                    const std::vector<std::pair<std::string, NpyArray>>& inputs,
                                    bool profile);
  // `requests` inferences of the same inputs with `concurrency` of them in
  // flight at all times, as perf_analyzer's async mode does: one thread and
  // a completion queue, so the client's own threads do not crowd the
  // machine. The first error ends the run.
  absl::StatusOr<std::vector<TimedInfer>> InferConcurrently(
      const std::string& model, const std::vector<std::pair<std::string, NpyArray>>& inputs,
      int concurrency, int requests);
  absl::StatusOr<kiln::v1::GetCacheStatsResponse> GetCacheStats();
  absl::StatusOr<kiln::v1::GetTimingStatsResponse> GetTimingStats(const std::string& model);
  absl::StatusOr<kiln::v1::ListModelsResponse> ListModels();
  absl::Status UnloadModel(const std::string& model);
  absl::StatusOr<kiln::v1::GetServerInfoResponse> GetServerInfo();
  absl::StatusOr<bool> ServerLive();
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model);

 private:
  KilnClient(std::unique_ptr<inference::GRPCInferenceService::Stub> inference,
             std::unique_ptr<kiln::v1::Compiler::Stub> compiler, std::string token)
      : inference_(std::move(inference)),
        compiler_(std::move(compiler)),
        token_(std::move(token)) {}

  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
  std::unique_ptr<kiln::v1::Compiler::Stub> compiler_;
  std::string token_;
};

// The one bridge from grpc::Status, keeping code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kiln::client

#endif  // KILN_CLIENT_KILN_CLIENT_H_
