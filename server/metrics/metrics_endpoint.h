// kiln-server --metrics-port: GET /metrics answers RenderKilnMetrics's page.
// With --auth-tokens it needs an `infer` token (Prometheus sends one with its
// scrape config's `authorization`), as the numbers name the models.
#ifndef KILN_SERVER_METRICS_METRICS_ENDPOINT_H_
#define KILN_SERVER_METRICS_METRICS_ENDPOINT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model_manager.h"
#include "engine/model_store.h"
#include "server/http/http_listener.h"
#include "server/token_table.h"

namespace kiln::server {

// `models`, `store` (null: no --model-store) and `tokens` must outlive the
// listener.
absl::StatusOr<std::unique_ptr<HttpListener>> StartMetricsEndpoint(
    const HttpListenerOptions& options, const engine::ModelManager* models,
    std::shared_ptr<const TokenTable> tokens, const engine::ModelStore* store = nullptr);

}  // namespace kiln::server

#endif  // KILN_SERVER_METRICS_METRICS_ENDPOINT_H_
