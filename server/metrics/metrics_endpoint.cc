#include "server/metrics/metrics_endpoint.h"

#include "server/http/http_auth.h"
#include "server/http/http_status.h"
#include "server/http/kserve_json.h"
#include "server/metrics/kiln_metrics.h"

namespace kiln::server {

absl::StatusOr<std::unique_ptr<HttpListener>> StartMetricsEndpoint(
    const HttpListenerOptions& options, const engine::ModelManager* models,
    std::shared_ptr<const TokenTable> tokens, const engine::ModelStore* store) {
  return HttpListener::Start(options, [models, tokens, store](httplib::Server& server) {
    server.Get("/metrics", [models, tokens, store](const httplib::Request& request,
                                                   httplib::Response& response) {
      if (absl::Status s = CheckBearer(tokens.get(), request, Scope::kInfer); !s.ok()) {
        response.status = HttpStatusOf(s.code());
        response.set_content(RenderError(s.message()), "application/json");
        return;
      }
      response.set_content(RenderKilnMetrics(*models, store),
                           "text/plain; version=0.0.4; charset=utf-8");
    });
  });
}

}  // namespace kiln::server
