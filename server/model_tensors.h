// A served model's inputs and outputs as its clients see them: names, element
// types and dims, symbolic dims as -1. What ModelMetadata and ModelConfig
// (and the HTTP routes that mirror them) describe.
#ifndef KILN_SERVER_MODEL_TENSORS_H_
#define KILN_SERVER_MODEL_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/dtype.h"
#include "engine/model_manager.h"

namespace kiln::server {

struct TensorDescription {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;  // -1: symbolic
};

struct ModelTensors {
  std::vector<TensorDescription> inputs;
  std::vector<TensorDescription> outputs;
};

// The load-time variant's program, with the dims the model declares
// symbolic as -1; for a model with no variant compiled yet (its inputs
// decide shapes), its signature as declared.
ModelTensors TensorsOf(const engine::ServedModel& served);

}  // namespace kiln::server

#endif  // KILN_SERVER_MODEL_TENSORS_H_
