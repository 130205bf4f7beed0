// ModelConfig: the Triton ModelConfig fields that describe a Kiln model.
// Triton's convention throughout: with max_batch_size > 0 (a model loaded
// with dynamic batching) the batch dim is left out of every input's and
// output's dims; otherwise dims are the full shape. Symbolic dims are -1.
#include <optional>
#include <string>

#include "server/call_auth.h"
#include "server/compiler_service.h"
#include "server/inference_service.h"
#include "server/kserve_datatype.h"
#include "server/model_tensors.h"
#include "server/status_conversion.h"

namespace kiln::server {
namespace {

// Triton's DataType for `dtype`: "TYPE_" and the KServe name, but for
// strings (KServe's BYTES), which Kiln does not serve.
inference::DataType ConfigDataType(DType dtype) {
  inference::DataType out = inference::TYPE_INVALID;
  inference::DataType_Parse("TYPE_" + DatatypeName(dtype), &out);
  return out;
}

template <typename Tensor>
void Describe(const TensorDescription& d, bool batched, Tensor* out) {
  out->set_name(d.name);
  out->set_data_type(ConfigDataType(d.dtype));
  for (size_t i = batched && !d.dims.empty() ? 1 : 0; i < d.dims.size(); ++i) {
    out->add_dims(d.dims[i]);
  }
}

}  // namespace

grpc::Status InferenceService::ModelConfig(grpc::ServerContext* context,
                                           const inference::ModelConfigRequest* request,
                                           inference::ModelConfigResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelConfig"); !a.ok()) {
    return a;
  }
  absl::StatusOr<engine::ServedModel> served = models_->Serve(request->name(), request->version());
  if (!served.ok()) return Fail("ModelConfig", served.status(), request->name());
  inference::ModelConfig* config = response->mutable_config();
  config->set_name(served->name);
  config->set_platform(kPlatform);
  config->set_backend(kPlatform);
  // A repository model's policy; a model compiled through kiln.v1 serves
  // its one version, the latest.
  std::optional<inference::ModelVersionPolicy> policy =
      compiler_ != nullptr ? compiler_->VersionPolicyOf(served->name) : std::nullopt;
  if (policy.has_value()) {
    *config->mutable_version_policy() = *std::move(policy);
  } else {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
  const bool batched = served->batcher != nullptr;
  if (batched) {
    const engine::DynamicBatchingConfig& b = served->batcher->config();
    config->set_max_batch_size(static_cast<int32_t>(b.max_batch_size));
    inference::ModelDynamicBatching* dynamic = config->mutable_dynamic_batching();
    for (int64_t size : b.preferred_batch_sizes) {
      dynamic->add_preferred_batch_size(static_cast<int32_t>(size));
    }
    dynamic->set_max_queue_delay_microseconds(static_cast<uint64_t>(b.max_queue_delay_us));
  }
  const ModelTensors tensors = TensorsOf(*served);
  for (const TensorDescription& in : tensors.inputs) {
    Describe(in, batched, config->add_input());
  }
  for (const TensorDescription& out : tensors.outputs) {
    Describe(out, batched, config->add_output());
  }
  return grpc::Status::OK;
}

}  // namespace kiln::server
