#include "client/kiln_client.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "grpcpp/create_channel.h"
#include "common/sha256.h"
#include "grpcpp/security/credentials.h"

namespace kiln::client {
namespace {

constexpr int kMaxMessageBytes = 256 * 1024 * 1024;

// Sends `token` (when set) as the call's bearer token: as metadata rather
// than call credentials, which gRPC sends only over TLS.
void Authorize(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

template <typename Response, typename Call>
absl::StatusOr<Response> Unary(const std::string& token, Call call) {
  grpc::ClientContext context;
  Authorize(context, token);
  Response response;
  grpc::Status status = call(&context, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", flag, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientOptions& options) {
  if (options.tls_ca.empty() && options.tls_cert.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(options.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(options.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KilnClient>> KilnClient::Create(const std::string& target,
                                                               const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(options);
  if (!credentials.ok()) return credentials.status();
  auto channel = grpc::CreateCustomChannel(target, *credentials, args);
  if (!channel) return absl::InvalidArgumentError("cannot create a channel to " + target);
  return std::unique_ptr<KilnClient>(
      new KilnClient(inference::GRPCInferenceService::NewStub(channel),
                     kiln::v1::Compiler::NewStub(channel), options.token));
}

absl::StatusOr<kiln::v1::CompileModelResponse> KilnClient::Compile(
    const kiln::v1::CompileModelRequest& request) {
  return Unary<kiln::v1::CompileModelResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->CompileModel(ctx, request, resp);
  });
}

absl::StatusOr<kiln::v1::CompileModelResponse> KilnClient::CompileWithProgress(
    const kiln::v1::CompileModelRequest& request,
    const std::function<void(const kiln::v1::CompileProgress&)>& on_progress) {
  grpc::ClientContext context;
  Authorize(context, token_);
  auto reader = compiler_->CompileModelStream(&context, request);
  kiln::v1::CompileProgress progress;
  kiln::v1::CompileModelResponse response;
  bool finished = false;
  while (reader->Read(&progress)) {
    if (progress.kind() == kiln::v1::CompileProgress::FINISHED) {
      response = progress.response();
      finished = true;
    } else if (on_progress) {
      on_progress(progress);
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!finished) return absl::UnavailableError("the compile stream ended without a result");
  return response;
}

absl::StatusOr<kiln::v1::TuneProgress> KilnClient::Tune(
    const kiln::v1::TuneModelRequest& request,
    const std::function<void(const kiln::v1::TuneProgress&)>& on_progress) {
  grpc::ClientContext context;
  Authorize(context, token_);
  auto reader = compiler_->TuneModel(&context, request);
  kiln::v1::TuneProgress progress, finished;
  bool done = false;
  while (reader->Read(&progress)) {
    if (progress.kind() == kiln::v1::TuneProgress::FINISHED) {
      finished = progress;
      done = true;
    } else if (on_progress) {
      on_progress(progress);
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!done) return absl::UnavailableError("the tune stream ended without a result");
  return finished;
}

absl::StatusOr<kiln::v1::CompileModelResponse> KilnClient::Upload(
    kiln::v1::CompileModelRequest request) {
  constexpr size_t kChunkBytes = size_t{4} << 20;
  kiln::v1::ModelChunk header_chunk;
  kiln::v1::UploadHeader* header = header_chunk.mutable_header();
  std::string model;
  if (request.model_case() == kiln::v1::CompileModelRequest::kGraph) {
    header->set_graph(true);
    request.graph().SerializeToString(&model);
    request.clear_graph();
  } else {
    model = std::move(*request.mutable_onnx_model());
    request.clear_onnx_model();
  }
  *header->mutable_request() = std::move(request);
  const absl::string_view bytes = model;
  header->set_total_bytes(static_cast<int64_t>(bytes.size()));
  header->set_sha256(Sha256Hex(bytes));
  grpc::ClientContext context;
  Authorize(context, token_);
  kiln::v1::CompileModelResponse response;
  std::unique_ptr<grpc::ClientWriter<kiln::v1::ModelChunk>> writer =
      compiler_->UploadModel(&context, &response);
  bool sent = writer->Write(header_chunk);
  for (size_t at = 0; sent && at < bytes.size(); at += kChunkBytes) {
    kiln::v1::ModelChunk chunk;
    chunk.set_data(std::string(bytes.substr(at, kChunkBytes)));
    sent = writer->Write(chunk);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();  // the server's word, even when a write failed
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<kiln::v1::ListKernelsResponse> KilnClient::ListKernels() {
  return Unary<kiln::v1::ListKernelsResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->ListKernels(ctx, kiln::v1::ListKernelsRequest(), resp);
  });
}

absl::StatusOr<kiln::v1::CallKernelResponse> KilnClient::CallKernel(
    const kiln::v1::CallKernelRequest& r) {
  return Unary<kiln::v1::CallKernelResponse>(token_, 
      [&](auto* ctx, auto* resp) { return compiler_->CallKernel(ctx, r, resp); });
}

absl::StatusOr<kiln::v1::BenchmarkKernelResponse> KilnClient::BenchmarkKernel(
    const kiln::v1::BenchmarkKernelRequest& r) {
  return Unary<kiln::v1::BenchmarkKernelResponse>(token_, 
      [&](auto* ctx, auto* resp) { return compiler_->BenchmarkKernel(ctx, r, resp); });
}

namespace {

inference::ModelInferRequest MakeInferRequest(
    const std::string& model, const std::vector<std::pair<std::string, NpyArray>>& inputs,
    bool profile) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  for (const auto& [name, array] : inputs) {
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype(array.datatype);
    for (int64_t d : array.shape) in->add_shape(d);
    request.add_raw_input_contents(array.data);
  }
  if (profile) (*request.mutable_parameters())["kiln.profile"].set_bool_param(true);
  return request;
}

}  // namespace

absl::StatusOr<std::vector<TimedInfer>> KilnClient::InferConcurrently(
    const std::string& model, const std::vector<std::pair<std::string, NpyArray>>& inputs,
    int concurrency, int requests) {
  using Clock = std::chrono::steady_clock;
  const inference::ModelInferRequest request = MakeInferRequest(model, inputs, true);
  struct Call {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status status;
    Clock::time_point start;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  };
  grpc::CompletionQueue queue;
  int started = 0, finished = 0;
  auto start_one = [&] {
    auto* call = new Call;
    Authorize(call->context, token_);
    call->start = Clock::now();
    call->reader = inference_->AsyncModelInfer(&call->context, request, &queue);
    call->reader->Finish(&call->response, &call->status, call);
    ++started;
  };
  for (int i = 0; i < std::min(concurrency, requests); ++i) start_one();
  std::vector<TimedInfer> timed;
  timed.reserve(requests);
  absl::Status failure;
  void* tag = nullptr;
  bool ok = false;
  while (finished < started && queue.Next(&tag, &ok)) {
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    ++finished;
    if (!call->status.ok()) {
      failure.Update(FromGrpcStatus(call->status));
      continue;  // no new calls; drain those in flight
    }
    TimedInfer t;
    t.ms = std::chrono::duration<double, std::milli>(Clock::now() - call->start).count();
    auto total = call->response.parameters().find("kiln.total_ns");
    if (total != call->response.parameters().end()) t.server_ms = total->second.int64_param() / 1e6;
    timed.push_back(t);
    if (failure.ok() && started < requests) start_one();
  }
  if (!failure.ok()) return failure;
  return timed;
}

absl::StatusOr<InferResult> KilnClient::Infer(
    const std::string& model, const std::vector<std::pair<std::string, NpyArray>>& inputs,
    bool profile) {
  const inference::ModelInferRequest request = MakeInferRequest(model, inputs, profile);
  auto response = Unary<inference::ModelInferResponse>(token_, 
      [&](auto* ctx, auto* resp) { return inference_->ModelInfer(ctx, request, resp); });
  if (!response.ok()) return response.status();
  InferResult result;
  for (int i = 0; i < response->outputs_size(); ++i) {
    const auto& out = response->outputs(i);
    NpyArray array;
    array.datatype = out.datatype();
    array.shape.assign(out.shape().begin(), out.shape().end());
    if (i < response->raw_output_contents_size()) array.data = response->raw_output_contents(i);
    result.outputs.push_back({out.name(), std::move(array)});
  }
  for (const auto& [key, value] : response->parameters()) {
    if (key == "kiln.total_ns") {
      result.total_ns = value.int64_param();
      continue;
    }
    constexpr absl::string_view kPrefix = "kiln.kernel_ns.";
    if (!absl::StartsWith(key, kPrefix)) continue;
    absl::string_view rest = absl::string_view(key).substr(kPrefix.size());
    const size_t dot = rest.find('.');
    KernelTime k;
    if (dot == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot), &k.index)) continue;
    k.name = std::string(rest.substr(dot + 1));
    k.ns = value.int64_param();
    result.kernels.push_back(std::move(k));
  }
  std::sort(result.kernels.begin(), result.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.index < b.index; });
  return result;
}

absl::StatusOr<kiln::v1::GetCacheStatsResponse> KilnClient::GetCacheStats() {
  return Unary<kiln::v1::GetCacheStatsResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->GetCacheStats(ctx, kiln::v1::GetCacheStatsRequest(), resp);
  });
}

absl::StatusOr<kiln::v1::GetTimingStatsResponse> KilnClient::GetTimingStats(
    const std::string& model) {
  kiln::v1::GetTimingStatsRequest request;
  request.set_model_name(model);
  return Unary<kiln::v1::GetTimingStatsResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->GetTimingStats(ctx, request, resp);
  });
}

absl::StatusOr<kiln::v1::ListModelsResponse> KilnClient::ListModels() {
  return Unary<kiln::v1::ListModelsResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->ListModels(ctx, kiln::v1::ListModelsRequest(), resp);
  });
}

absl::Status KilnClient::UnloadModel(const std::string& model) {
  kiln::v1::UnloadModelRequest request;
  request.set_model_name(model);
  return Unary<kiln::v1::UnloadModelResponse>(token_, [&](auto* ctx, auto* resp) {
           return compiler_->UnloadModel(ctx, request, resp);
         }).status();
}

absl::StatusOr<kiln::v1::GetServerInfoResponse> KilnClient::GetServerInfo() {
  return Unary<kiln::v1::GetServerInfoResponse>(token_, [&](auto* ctx, auto* resp) {
    return compiler_->GetServerInfo(ctx, kiln::v1::GetServerInfoRequest(), resp);
  });
}

absl::StatusOr<bool> KilnClient::ServerLive() {
  auto r = Unary<inference::ServerLiveResponse>(token_, [&](auto* ctx, auto* resp) {
    return inference_->ServerLive(ctx, inference::ServerLiveRequest(), resp);
  });
  if (!r.ok()) return r.status();
  return r->live();
}

absl::StatusOr<inference::ModelMetadataResponse> KilnClient::ModelMetadata(
    const std::string& model) {
  inference::ModelMetadataRequest request;
  request.set_name(model);
  return Unary<inference::ModelMetadataResponse>(token_, [&](auto* ctx, auto* resp) {
    return inference_->ModelMetadata(ctx, request, resp);
  });
}

}  // namespace kiln::client
