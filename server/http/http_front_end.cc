#include "server/http/http_front_end.h"

#include <optional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "grpcpp/server_context.h"
#include "grpcpp/test/server_context_test_spouse.h"
#include "nlohmann/json.hpp"
#include "server/http/http_auth.h"
#include "server/http/http_status.h"
#include "server/http/kserve_json.h"
#include "server/http/proto_json.h"
#include "server/status_conversion.h"

namespace kiln::server {
namespace {

// "/v2/models/NAME" with an optional "/versions/V": the matches 1 and 2.
constexpr char kModel[] = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
constexpr char kJson[] = "application/json";
constexpr char kHeaderLength[] = "Inference-Header-Content-Length";

void Answer(httplib::Response& response, const absl::Status& status) {
  response.status = HttpStatusOf(status.code());
  response.set_content(RenderError(status.message()), kJson);
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// The route's own failure (one the service did not log), logged once as the
// gRPC services log theirs.
void Refuse(httplib::Response& response, const char* route, const absl::Status& status) {
  if (LogEnabled(FailureLogLevel(status.code()))) {
    Log(FailureLogLevel(status.code()), "http", FailureLogLine(route, status));
  }
  Answer(response, status);
}

// A ServerContext for calling the service in-process, carrying the HTTP
// Authorization header as gRPC's "authorization" metadata: the service then
// checks the token with the same scopes as over gRPC. gRPC's
// ServerContextTestSpouse is its public way to set a context's client
// metadata outside a call.
class CallContext {
 public:
  explicit CallContext(const httplib::Request& request) : spouse_(&context_) {
    if (request.has_header("Authorization")) {
      spouse_.AddClientMetadata("authorization", request.get_header_value("Authorization"));
    }
  }
  grpc::ServerContext* get() { return &context_; }

 private:
  grpc::ServerContext context_;
  grpc::testing::ServerContextTestSpouse spouse_;
};

template <typename Request, typename Response>
using Rpc = grpc::Status (InferenceService::*)(grpc::ServerContext*, const Request*, Response*);

// Calls `rpc`; false (the error answered) when it fails.
template <typename Request, typename Response>
bool Call(InferenceService* service, Rpc<Request, Response> rpc, const httplib::Request& http,
          const Request& request, Response* response, httplib::Response& answer) {
  CallContext context(http);
  grpc::Status s = (service->*rpc)(context.get(), &request, response);
  if (s.ok()) return true;
  Answer(answer, FromGrpc(s));  // logged by the service
  return false;
}

// A POST's body through `reader`, at most `max_bytes` once inflated (a
// Content-Encoding'd body is bounded on the wire only); 413 naming `flag`
// past it. Empty when the request announces no body (neither Content-Length
// nor chunked, as `curl -X POST` sends it: httplib would answer that 400
// before any route saw it). False (the error answered) when reading fails.
bool ReadBody(const httplib::Request& request, httplib::Response& response,
              const httplib::ContentReader& reader, int64_t max_bytes, const std::string& flag,
              std::string* body) {
  if (!request.has_header("Content-Length") &&
      request.get_header_value("Transfer-Encoding").find("chunked") == std::string::npos) {
    return true;
  }
  bool too_large = false;
  if (reader([&](const char* data, size_t size) {
        if (static_cast<int64_t>(body->size() + size) > max_bytes) {
          too_large = true;
          return false;
        }
        body->append(data, size);
        return true;
      })) {
    return true;
  }
  response.set_header("Connection", "close");  // what is left of the body is unread
  if (too_large) {
    Answer(response, absl::ResourceExhaustedError(absl::StrCat("the request body is larger than ",
                                                               max_bytes, " bytes (", flag, ")")));
    response.status = 413;
  } else if (response.status < 400) {
    Answer(response, absl::InvalidArgumentError("the request body could not be read"));
  }
  return false;
}

// The route's model name and version (empty when the path has none).
std::pair<std::string, std::string> ModelOf(const httplib::Request& request) {
  return {request.matches[1].str(),
          request.matches.size() > 2 ? request.matches[2].str() : std::string()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpFrontEnd>> HttpFrontEnd::Start(
    const HttpListenerOptions& options, InferenceService* service,
    std::shared_ptr<const TokenTable> tokens) {
  std::unique_ptr<HttpFrontEnd> front(new HttpFrontEnd(service, std::move(tokens), options));
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(options, [&](httplib::Server& server) { front->AddRoutes(server); });
  if (!listener.ok()) return listener.status();
  front->listener_ = *std::move(listener);
  return front;
}

void HttpFrontEnd::AddRoutes(httplib::Server& server) {
  InferenceService* service = service_;
  // Reads a POST's body (see ReadBody).
  auto read_body = [max = max_body_bytes_, flag = max_body_flag_](
                       const httplib::Request& request, httplib::Response& response,
                       const httplib::ContentReader& reader, std::string* body) {
    return ReadBody(request, response, reader, max, flag, body);
  };
  using Req = httplib::Request;
  using Res = httplib::Response;

  // Health: no token, as over gRPC (probes).
  server.Get("/v2/health/live", [service](const Req& request, Res& response) {
    inference::ServerLiveResponse live;
    if (!Call(service, &InferenceService::ServerLive, request,
              inference::ServerLiveRequest::default_instance(), &live, response)) {
      return;
    }
    response.status = live.live() ? 200 : 503;
    response.set_content(live.live() ? "{}" : RenderError("not live"), kJson);
  });
  server.Get("/v2/health/ready", [service](const Req& request, Res& response) {
    inference::ServerReadyResponse ready;
    if (!Call(service, &InferenceService::ServerReady, request,
              inference::ServerReadyRequest::default_instance(), &ready, response)) {
      return;
    }
    response.status = ready.ready() ? 200 : 503;
    response.set_content(ready.ready() ? "{}" : RenderError("not ready"), kJson);
  });
  server.Get("/v2", [service](const Req& request, Res& response) {
    inference::ServerMetadataResponse metadata;
    if (Call(service, &InferenceService::ServerMetadata, request,
             inference::ServerMetadataRequest::default_instance(), &metadata, response)) {
      response.set_content(RenderServerMetadata(metadata), kJson);
    }
  });

  // Before kModel, which would take "stats" for a model's name.
  server.Get("/v2/models/stats", [service](const Req& request, Res& response) {
    inference::ModelStatisticsResponse stats;
    if (Call(service, &InferenceService::ModelStatistics, request,
             inference::ModelStatisticsRequest::default_instance(), &stats, response)) {
      response.set_content(ProtoToJson(stats), kJson);
    }
  });
  server.Get(std::string(kModel) + "/stats", [service](const Req& request, Res& response) {
    inference::ModelStatisticsRequest stats_request;
    std::tie(*stats_request.mutable_name(), *stats_request.mutable_version()) = ModelOf(request);
    inference::ModelStatisticsResponse stats;
    if (Call(service, &InferenceService::ModelStatistics, request, stats_request, &stats,
             response)) {
      response.set_content(ProtoToJson(stats), kJson);
    }
  });
  // Triton answers the ModelConfig itself, not its response wrapper.
  server.Get(std::string(kModel) + "/config", [service](const Req& request, Res& response) {
    inference::ModelConfigRequest config_request;
    std::tie(*config_request.mutable_name(), *config_request.mutable_version()) = ModelOf(request);
    inference::ModelConfigResponse config;
    if (Call(service, &InferenceService::ModelConfig, request, config_request, &config, response)) {
      response.set_content(ProtoToJson(config.config()), kJson);
    }
  });
  server.Get(kModel, [service](const Req& request, Res& response) {
    inference::ModelMetadataRequest metadata_request;
    std::tie(*metadata_request.mutable_name(), *metadata_request.mutable_version()) =
        ModelOf(request);
    inference::ModelMetadataResponse metadata;
    if (Call(service, &InferenceService::ModelMetadata, request, metadata_request, &metadata,
             response)) {
      response.set_content(RenderModelMetadata(metadata), kJson);
    }
  });
  server.Get(std::string(kModel) + "/ready", [service](const Req& request, Res& response) {
    inference::ModelReadyRequest ready_request;
    std::tie(*ready_request.mutable_name(), *ready_request.mutable_version()) = ModelOf(request);
    inference::ModelReadyResponse ready;
    if (!Call(service, &InferenceService::ModelReady, request, ready_request, &ready, response)) {
      return;
    }
    if (ready.ready()) {
      response.set_content("{}", kJson);
      return;
    }
    // Not ready: why, with its status (404 unknown, 503 compiling, ...),
    // from the metadata call that fails for the same reason.
    inference::ModelMetadataRequest metadata_request;
    metadata_request.set_name(ready_request.name());
    metadata_request.set_version(ready_request.version());
    inference::ModelMetadataResponse metadata;
    if (!Call(service, &InferenceService::ModelMetadata, request, metadata_request, &metadata,
              response)) {
      return;
    }
    Answer(response, absl::FailedPreconditionError(
                         absl::StrCat("model '", ready_request.name(), "' is not ready")));
  });

  server.Post(std::string(kModel) + "/infer",
              [this, service, read_body](const Req& request, Res& response,
                                         const httplib::ContentReader& reader) {
                if (absl::Status s = CheckBearer(tokens_.get(), request, Scope::kInfer); !s.ok()) {
                  response.set_header("Connection", "close");  // the body is not read
                  return Refuse(response, "HTTP ModelInfer", s);
                }
                std::string text;
                if (!read_body(request, response, reader, &text)) return;
                std::optional<size_t> json_length;
                if (request.has_header(kHeaderLength)) {
                  size_t n = 0;
                  if (!absl::SimpleAtoi(request.get_header_value(kHeaderLength), &n)) {
                    return Refuse(response, "HTTP ModelInfer",
                                  absl::InvalidArgumentError(absl::StrCat(
                                      kHeaderLength, " must be a non-negative integer")));
                  }
                  json_length = n;
                }
                const auto [name, version] = ModelOf(request);
                absl::StatusOr<inference::ModelInferRequest> infer =
                    ParseInferRequest(text, json_length, name, version);
                if (!infer.ok()) return Refuse(response, "HTTP ModelInfer", infer.status());
                inference::ModelInferResponse answer;
                absl::Notification finished;
                grpc::Status status;
                service->StartInfer(*infer, &answer, [&](const grpc::Status& s) {
                  status = s;
                  finished.Notify();
                });
                finished.WaitForNotification();
                if (!status.ok())
                  return Answer(response, FromGrpc(status));  // logged by the service
                absl::StatusOr<HttpBody> body = RenderInferResponse(*infer, answer);
                if (!body.ok()) return Refuse(response, "HTTP ModelInfer", body.status());
                if (body->json_length) {
                  response.set_header(kHeaderLength, std::to_string(*body->json_length));
                  response.set_content(std::move(body->body), "application/octet-stream");
                } else {
                  response.set_content(std::move(body->body), kJson);
                }
              });

  // Triton's repository extension. The index answers a JSON array.
  server.Post("/v2/repository/index", [service, read_body](const Req& request, Res& response,
                                                           const httplib::ContentReader& reader) {
    std::string text;
    if (!read_body(request, response, reader, &text)) return;
    inference::RepositoryIndexRequest index_request;
    if (!text.empty()) {
      const nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        return Refuse(response, "HTTP RepositoryIndex",
                      absl::InvalidArgumentError("the request body is not a JSON object"));
      }
      auto ready = body.find("ready");
      if (ready != body.end()) {
        if (!ready->is_boolean()) {
          return Refuse(response, "HTTP RepositoryIndex",
                        absl::InvalidArgumentError("'ready' must be true or false"));
        }
        index_request.set_ready(ready->get<bool>());
      }
    }
    inference::RepositoryIndexResponse index;
    if (!Call(service, &InferenceService::RepositoryIndex, request, index_request, &index,
              response)) {
      return;
    }
    nlohmann::json models = nlohmann::json::array();
    for (const auto& m : index.models()) {
      nlohmann::json entry = nlohmann::json::parse(ProtoToJson(m));
      for (const char* field : {"version", "state", "reason"}) {
        if (entry[field] == "") entry.erase(field);  // as Triton leaves them out
      }
      models.push_back(std::move(entry));
    }
    response.set_content(models.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                         kJson);
  });
  server.Post(R"(/v2/repository/models/([^/]+)/load)", [service, read_body](
                                                           const Req& request, Res& response,
                                                           const httplib::ContentReader& reader) {
    std::string text;
    if (!read_body(request, response, reader, &text)) return;
    inference::RepositoryModelLoadRequest load;
    load.set_model_name(request.matches[1].str());
    if (absl::Status s = ParseRepositoryParameters(text, load.mutable_parameters()); !s.ok()) {
      return Refuse(response, "HTTP RepositoryModelLoad", s);
    }
    inference::RepositoryModelLoadResponse loaded;
    if (Call(service, &InferenceService::RepositoryModelLoad, request, load, &loaded, response)) {
      response.set_content("{}", kJson);
    }
  });
  server.Post(R"(/v2/repository/models/([^/]+)/unload)", [service, read_body](
                                                             const Req& request, Res& response,
                                                             const httplib::ContentReader& reader) {
    std::string text;
    if (!read_body(request, response, reader, &text)) return;
    inference::RepositoryModelUnloadRequest unload;
    unload.set_model_name(request.matches[1].str());
    if (absl::Status s = ParseRepositoryParameters(text, unload.mutable_parameters()); !s.ok()) {
      return Refuse(response, "HTTP RepositoryModelUnload", s);
    }
    inference::RepositoryModelUnloadResponse unloaded;
    if (Call(service, &InferenceService::RepositoryModelUnload, request, unload, &unloaded,
             response)) {
      response.set_content("{}", kJson);
    }
  });
}

}  // namespace kiln::server
