// KServe v2 over HTTP/REST (kiln-server --http-port): each route turns its
// request into the inference:: message the gRPC service takes, calls that
// service in-process, and answers its result as KServe's JSON. One
// implementation of the semantics, two front ends.
#ifndef KILN_SERVER_HTTP_HTTP_FRONT_END_H_
#define KILN_SERVER_HTTP_HTTP_FRONT_END_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/http/http_listener.h"
#include "server/inference_service.h"
#include "server/token_table.h"

namespace kiln::server {

class HttpFrontEnd {
 public:
  // Serves `service` (the gRPC server's own instance: one readiness, one
  // repository state) on `options`' port; it must outlive this. The
  // Authorization header goes to the service as gRPC's "authorization"
  // metadata, so each route needs the token scope its RPC needs; `tokens`
  // (null: none needed) is checked here only for infer, whose in-process
  // entry point (StartInfer) comes after ModelInfer's check.
  static absl::StatusOr<std::unique_ptr<HttpFrontEnd>> Start(
      const HttpListenerOptions& options, InferenceService* service,
      std::shared_ptr<const TokenTable> tokens);

  int port() const { return listener_->port(); }
  void Stop() { listener_->Stop(); }

 private:
  HttpFrontEnd(InferenceService* service, std::shared_ptr<const TokenTable> tokens,
               const HttpListenerOptions& options)
      : service_(service),
        tokens_(std::move(tokens)),
        max_body_bytes_(options.max_body_bytes),
        max_body_flag_(options.max_body_flag) {}
  void AddRoutes(httplib::Server& server);

  InferenceService* service_;
  std::shared_ptr<const TokenTable> tokens_;
  // Bodies are read up to this many bytes once inflated (a gzip body is
  // bounded on the wire only by httplib).
  int64_t max_body_bytes_;
  std::string max_body_flag_;
  std::unique_ptr<HttpListener> listener_;  // last: stops before the rest goes
};

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_HTTP_FRONT_END_H_
