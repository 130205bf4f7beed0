// How a model's concurrent requests are batched (Triton's dynamic_batching
// vocabulary), and the check that a model can be batched at all.
#ifndef KILN_ENGINE_DYNAMIC_BATCHING_H_
#define KILN_ENGINE_DYNAMIC_BATCHING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compiler/frontend/model_signature.h"

namespace kiln::engine {

struct DynamicBatchingConfig {
  // Rows one run may hold; 0 turns batching off.
  int64_t max_batch_size = 0;
  // Batch sizes to form when the queue allows. A batch is also padded up to
  // the smallest of these that holds it, so the model compiles only these
  // shapes (and any larger batch's exact size) however traffic mixes; with
  // none, batches are padded to powers of two.
  std::vector<int64_t> preferred_batch_sizes;
  // How long the first request of a batch may wait for others to join it.
  int64_t max_queue_delay_us = 0;

  bool enabled() const { return max_batch_size > 0; }
};

// The largest max_batch_size accepted: a bound on one run's rows.
inline constexpr int64_t kMaxBatchSizeLimit = 1 << 16;

// InvalidArgument unless `config` is coherent and every input (and every
// output that declares a shape) of `signature` has a symbolic first dim,
// the same symbol throughout: the batch axis requests are joined along.
absl::Status ValidateDynamicBatching(const DynamicBatchingConfig& config,
                                     const ModelSignature& signature);

}  // namespace kiln::engine

#endif  // KILN_ENGINE_DYNAMIC_BATCHING_H_
