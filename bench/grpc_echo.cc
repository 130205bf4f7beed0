// grpc-echo: the bare gRPC round trip of an inference's payload, to set Kiln's
// server overhead against. The server implements only KServe's ModelInfer and
// answers every request with a zero-filled output of a fixed shape, running
// nothing; the client is the CLI's own KilnClient::Infer, as `kiln bench` uses
// it (profile on). What remains is protobuf encoding and gRPC over loopback.
//
//   grpc-echo --input NAME=1x784 --output 1x10 [--iterations N] [--warmup W] [--json]
//       client and server in this process (the server on a port of its own)
//   grpc-echo --serve --output 1x10 [--port P] [--busy-us U]   only the server
//   grpc-echo --server HOST:PORT --input ... [...]              only the client
//
// --busy-us makes the server spin that long per call before answering: with a
// model's run time, it tells gRPC's own cost for a handler that takes a while
// (threads that went to sleep meanwhile wake up late) from the server's code.
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_util.h"
#include "client/cli_app.h"
#include "common/ms_since.h"
#include "client/kiln_client.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "proto/grpc_service.grpc.pb.h"

namespace kiln::bench {
namespace {

constexpr int kMaxMessageBytes = 256 * 1024 * 1024;

absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text) {
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad shape '", text, "' (want D1xD2...)"));
    }
    dims.push_back(v);
  }
  return dims;
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ModelInfer answered with a canned float32 output; every other RPC unimplemented.
class EchoService final : public inference::GRPCInferenceService::Service {
 public:
  EchoService(std::vector<int64_t> output_shape, int busy_us)
      : output_shape_(std::move(output_shape)),
        output_bytes_(Product(output_shape_) * sizeof(float), '\0'),
        busy_(std::chrono::microseconds(busy_us)) {}

  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < busy_) {
    }
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    response->set_id(request->id());
    auto* out = response->add_outputs();
    out->set_name("output");
    out->set_datatype("FP32");
    for (int64_t d : output_shape_) out->add_shape(d);
    response->add_raw_output_contents(output_bytes_);
    auto profile = request->parameters().find("kiln.profile");
    if (profile != request->parameters().end() && profile->second.bool_param()) {
      (*response->mutable_parameters())["kiln.total_ns"].set_int64_param(0);
    }
    return grpc::Status::OK;
  }

 private:
  std::vector<int64_t> output_shape_;
  std::string output_bytes_;
  std::chrono::steady_clock::duration busy_;
};

struct EchoServer {
  std::unique_ptr<EchoService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

absl::StatusOr<EchoServer> StartEchoServer(std::vector<int64_t> output_shape, int port,
                                           int busy_us) {
  EchoServer s;
  s.service = std::make_unique<EchoService>(std::move(output_shape), busy_us);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &s.port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(s.service.get());
  s.server = builder.BuildAndStart();
  if (!s.server || s.port == 0) return absl::UnavailableError("cannot start the echo server");
  return s;
}

int Fail(const absl::Status& status) { return client::PrintFailure("grpc-echo", status); }

int Main(int argc, char** argv) {
  std::unique_ptr<CLI::App> cli = client::NewCliApp(
      "grpc-echo",
      "grpc-echo: the bare gRPC round trip of an inference's payload. Runs its own echo\n"
      "server and a client, only the server (--serve), or only a client (--server).");
  client::AddValue(cli.get(), "input", "NAME=D1xD2...", "The request's FP32 input");
  client::AddValue(cli.get(), "output", "D1xD2...", "The FP32 output the echo server answers");
  client::AddValue(cli.get(), "iterations", "N", "Timed calls (default 1000)");
  client::AddValue(cli.get(), "warmup", "W", "Untimed calls first (default 50)");
  client::AddSwitch(cli.get(), "serve", "Only serve, on --port");
  client::AddValue(cli.get(), "port", "P", "The echo server's port (default: any free one)");
  client::AddValue(cli.get(), "busy-us", "U", "The echo server spins U us before answering");
  client::AddValue(cli.get(), "server", "HOST:PORT", "Only a client, of this server");
  client::AddSwitch(cli.get(), "json", "Print the result as one JSON object");
  client::SetExample(cli.get(), "grpc-echo --input x=1x3x224x224 --output 1x1000 --json");
  client::CliArgs parsed;
  if (std::optional<int> done = client::ParseCommandLine(*cli, argc, argv, &parsed)) return *done;
  const client::CliArgs* args = &parsed;
  absl::StatusOr<int> iterations = args->GetInt("iterations", 1000, 1);
  absl::StatusOr<int> warmup = args->GetInt("warmup", 50, 0);
  absl::StatusOr<int> port = args->GetInt("port", 0, 0);
  absl::StatusOr<int> busy_us = args->GetInt("busy-us", 0, 0);
  for (const auto* v : {&iterations, &warmup, &port, &busy_us}) {
    if (!v->ok()) return Fail(v->status());
  }
  const bool client_only = !args->Get("server").empty();
  EchoServer server;
  std::string target = args->Get("server");
  if (!client_only) {
    absl::StatusOr<std::vector<int64_t>> output = ParseDims(args->Get("output"));
    if (!output.ok()) return Fail(output.status());
    absl::StatusOr<EchoServer> started = StartEchoServer(*output, *port, *busy_us);
    if (!started.ok()) return Fail(started.status());
    server = *std::move(started);
    target = absl::StrCat("localhost:", server.port);
    if (args->Has("serve")) {
      std::cout << "grpc-echo listening on 127.0.0.1:" << server.port << std::endl;
      server.server->Wait();
      return 0;
    }
  }

  const std::string spec = args->Get("input");
  const size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return Fail(absl::InvalidArgumentError("--input wants NAME=D1xD2..."));
  absl::StatusOr<std::vector<int64_t>> input_shape = ParseDims(spec.substr(eq + 1));
  if (!input_shape.ok()) return Fail(input_shape.status());
  client::NpyArray input;
  input.datatype = "FP32";
  input.shape = *input_shape;
  std::vector<float> values(Product(*input_shape));
  FillPseudorandom(values.data(), values.size(), 12345);
  input.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  const std::vector<std::pair<std::string, client::NpyArray>> inputs = {
      {spec.substr(0, eq), std::move(input)}};

  absl::StatusOr<std::unique_ptr<client::KilnClient>> client = client::KilnClient::Create(target);
  if (!client.ok()) return Fail(client.status());
  for (int i = 0; i < *warmup; ++i) {
    absl::StatusOr<client::InferResult> r = (*client)->Infer("echo", inputs, false);
    if (!r.ok()) return Fail(r.status());
  }
  std::vector<double> ms;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < *iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<client::InferResult> r = (*client)->Infer("echo", inputs, true);
    if (!r.ok()) return Fail(r.status());
    ms.push_back(MsSince(t0));
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const LatencySummary s = Summarize(ms);
  const int64_t request_bytes = static_cast<int64_t>(values.size() * sizeof(float));
  if (args->Has("json")) {
    std::cout << absl::StrFormat(
        "{\"tool\": \"grpc-echo\", \"schema_version\": 1, "
        "\"input_bytes\": %d, \"output\": \"%s\", \"iterations\": %d, "
        "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p95_ms\": %.4f, \"p99_ms\": %.4f, "
        "\"mean_ms\": %.4f, \"min_ms\": %.4f, \"calls_per_s\": %.1f}\n",
        request_bytes, args->Get("output"), *iterations, s.p50, s.p90, s.p95, s.p99, s.mean, s.min,
        *iterations / wall_s);
  } else {
    std::cout << absl::StrFormat(
        "bare gRPC ModelInfer round trip, %d input bytes: p50 %.1f us  p90 %.1f us  p99 %.1f us  "
        "(%d calls, %.0f calls/s)\n",
        request_bytes, s.p50 * 1e3, s.p90 * 1e3, s.p99 * 1e3, *iterations, *iterations / wall_s);
  }
  if (server.server) server.server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  // As kiln-server does: the baseline pays what Kiln's server pays.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return kiln::bench::Main(argc, argv);
}
