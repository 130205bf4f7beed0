// A model with a symbolic batch for the engine's shape tests: y = relu(x) * 2
// with x: [batch, 24], or (two inputs) y = relu(a) + b, and an "importer"
// that builds it at given shapes, refusing two batch sizes on purpose.
#ifndef KILN_TESTS_ENGINE_SYMBOLIC_BATCH_MODEL_H_
#define KILN_TESTS_ENGINE_SYMBOLIC_BATCH_MODEL_H_

#include <atomic>

#include "absl/status/statusor.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"
#include "engine/shape_variants.h"

namespace kiln::engine {

inline constexpr int64_t kWidth = 24;

// The inputs share the symbol "batch" as dim 0.
ModelSignature BatchModelSignature(bool two_inputs);

// The graph at `shapes`; counts calls in `builds` when given. Batch 13 is
// refused for good (InvalidArgument), batch 17 for now (ResourceExhausted).
absl::StatusOr<Graph> BatchModelGraph(const ShapeBinding& shapes, std::atomic<int>* builds);

}  // namespace kiln::engine

#endif  // KILN_TESTS_ENGINE_SYMBOLIC_BATCH_MODEL_H_
