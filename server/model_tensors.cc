#include "server/model_tensors.h"

namespace kiln::server {
namespace {

// The declared dims where the model declares them at the compiled rank
// (symbolic ones stay -1), else the compiled ones.
std::vector<int64_t> DimsOf(const std::vector<TensorSignature>* declared, size_t i,
                            const std::vector<int64_t>& compiled) {
  if (declared != nullptr && i < declared->size() && (*declared)[i].has_shape &&
      (*declared)[i].dims.size() == compiled.size()) {
    return (*declared)[i].dims;
  }
  return compiled;
}

}  // namespace

ModelTensors TensorsOf(const engine::ServedModel& served) {
  ModelTensors out;
  if (!served.model) {
    for (const TensorSignature& in : served.variants->signature().inputs) {
      out.inputs.push_back({in.name, in.dtype, in.dims});
    }
    for (const TensorSignature& o : served.variants->signature().outputs) {
      out.outputs.push_back({o.name, o.dtype, o.dims});
    }
    return out;
  }
  const Program& p = served.model->program();
  const ModelSignature* signature = served.variants ? &served.variants->signature() : nullptr;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const ValueSpec& v = p.values[p.inputs[i]];
    out.inputs.push_back(
        {v.name, v.type.dtype, DimsOf(signature ? &signature->inputs : nullptr, i, v.type.shape)});
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ValueSpec& v = p.values[p.outputs[i]];
    out.outputs.push_back({p.output_names[i], v.type.dtype,
                           DimsOf(signature ? &signature->outputs : nullptr, i, v.type.shape)});
  }
  return out;
}

}  // namespace kiln::server
