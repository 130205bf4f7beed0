#include "engine/dynamic_batching.h"

#include "absl/strings/str_cat.h"

namespace kiln::engine {
namespace {

// OkStatus when `t`'s first dim is symbolic and, if named, named `*symbol`
// (set from the first tensor that names it).
absl::Status CheckBatchAxis(const TensorSignature& t, const char* kind, std::string* symbol,
                            std::string* symbol_from) {
  if (t.dims.empty() || t.dims[0] != TensorSignature::kSymbolicDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dynamic batching joins requests along dim 0, but ", kind, " '", t.name, "' has ",
        t.dims.empty() ? "no dims" : absl::StrCat("a fixed dim 0 of ", t.dims[0]),
        "; export the model with a dynamic batch axis"));
  }
  const std::string& s = t.symbols[0];
  if (s.empty()) return absl::OkStatus();
  if (symbol->empty()) {
    *symbol = s;
    *symbol_from = t.name;
  } else if (*symbol != s) {
    return absl::InvalidArgumentError(
        absl::StrCat("dynamic batching needs one batch axis, but ", kind, " '", t.name,
                     "' dim 0 is '", s, "' while '", *symbol_from, "' dim 0 is '", *symbol, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDynamicBatching(const DynamicBatchingConfig& config,
                                     const ModelSignature& signature) {
  if (config.max_batch_size < 0 || config.max_batch_size > kMaxBatchSizeLimit) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch_size ", config.max_batch_size,
                                                   " is outside 0..", kMaxBatchSizeLimit));
  }
  if (!config.enabled()) {
    if (!config.preferred_batch_sizes.empty() || config.max_queue_delay_us != 0) {
      return absl::InvalidArgumentError(
          "preferred_batch_size and max_queue_delay_us need max_batch_size > 0");
    }
    return absl::OkStatus();
  }
  for (int64_t p : config.preferred_batch_sizes) {
    if (p < 1 || p > config.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat("preferred_batch_size ", p,
                                                     " is outside 1..max_batch_size (",
                                                     config.max_batch_size, ")"));
    }
  }
  if (config.max_queue_delay_us < 0 || config.max_queue_delay_us > 10'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queue_delay_us ", config.max_queue_delay_us, " is outside 0..10000000 (10 s)"));
  }
  std::string symbol, symbol_from;
  for (const TensorSignature& t : signature.inputs) {
    if (t.decides_shapes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dynamic batching cannot join requests on a model whose input '", t.name,
          "' decides shapes: each value compiles a model of its own"));
    }
    if (absl::Status s = CheckBatchAxis(t, "input", &symbol, &symbol_from); !s.ok()) return s;
  }
  for (const TensorSignature& t : signature.outputs) {
    if (!t.has_shape) continue;
    if (absl::Status s = CheckBatchAxis(t, "output", &symbol, &symbol_from); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kiln::engine
