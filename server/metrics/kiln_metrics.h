// The Prometheus page of kiln-server (--metrics-port, GET /metrics): what
// Triton's users know, named kiln_* (requests, inferences, executions and
// their times per model, request latency histograms), and what only Kiln
// has (compiles, the kernel cache per tier, kernels' calls and time, pass
// times). Everything is read at scrape time from the engine's own stores,
// the ones ModelStatistics, GetCacheStats and GetTimingStats answer from.
#ifndef KILN_SERVER_METRICS_KILN_METRICS_H_
#define KILN_SERVER_METRICS_KILN_METRICS_H_

#include <string>

#include "engine/model_manager.h"
#include "engine/model_store.h"

namespace kiln::server {

// Per-kernel series are the kernels with the most total time, this many at
// most (across models): bounded cardinality however many models load.
inline constexpr int kMetricsTopKernels = 20;

// The exposition text (version 0.0.4) of `models`' numbers now, and of the
// model store's (--model-store) when `store` is not null.
std::string RenderKilnMetrics(const engine::ModelManager& models,
                              const engine::ModelStore* store = nullptr);

}  // namespace kiln::server

#endif  // KILN_SERVER_METRICS_KILN_METRICS_H_
