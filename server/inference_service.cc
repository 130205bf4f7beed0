#include "server/inference_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "server/cpu_affinity.h"
#include "server/infer_request.h"
#include "server/status_conversion.h"

namespace kiln::server {
namespace {

absl::Status UnknownModel(const std::string& name) {
  return absl::NotFoundError(
      absl::StrCat("unknown model '", name, "'; ListModels shows the loaded ones"));
}

}  // namespace

grpc::Status InferenceService::ServerLive(grpc::ServerContext*,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* response) {
  response->set_live(true);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext*,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* response) {
  response->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext*,
                                          const inference::ModelReadyRequest* request,
                                          inference::ModelReadyResponse* response) {
  response->set_ready(models_->Find(request->name()) != nullptr);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext*,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* response) {
  response->set_name("kiln");
  response->set_version(kKilnVersion);
  response->add_extensions("kiln.profile");
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext*,
                                             const inference::ModelMetadataRequest* request,
                                             inference::ModelMetadataResponse* response) {
  std::optional<engine::ServedModel> served = models_->Get(request->name());
  if (!served) return Fail("ModelMetadata", UnknownModel(request->name()));
  const Program& p = served->model->program();
  // A model with symbolic dims reports them as -1, as KServe clients expect.
  const ModelSignature* signature =
      served->variants ? &served->variants->signature() : nullptr;
  auto dims_of = [&](const std::vector<TensorSignature>* declared, size_t i,
                     const std::vector<int64_t>& compiled) {
    if (declared != nullptr && i < declared->size() && (*declared)[i].has_shape &&
        (*declared)[i].dims.size() == compiled.size()) {
      return (*declared)[i].dims;
    }
    return compiled;
  };
  response->set_name(request->name());
  response->add_versions("1");
  response->set_platform("kiln");
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const ValueSpec& v = p.values[p.inputs[i]];
    auto* t = response->add_inputs();
    t->set_name(v.name);
    t->set_datatype(DatatypeName(v.type.dtype));
    for (int64_t d : dims_of(signature ? &signature->inputs : nullptr, i, v.type.shape)) {
      t->add_shape(d);
    }
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ValueSpec& v = p.values[p.outputs[i]];
    auto* t = response->add_outputs();
    t->set_name(p.output_names[i]);
    t->set_datatype(DatatypeName(v.type.dtype));
    for (int64_t d : dims_of(signature ? &signature->outputs : nullptr, i, v.type.shape)) {
      t->add_shape(d);
    }
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext*,
                                          const inference::ModelInferRequest* request,
                                          inference::ModelInferResponse* response) {
  return Infer(*request, response);
}

grpc::Status InferenceService::Infer(const inference::ModelInferRequest& request,
                                     inference::ModelInferResponse* response) {
  BindHandlerThreadOrWarn(inference_cpus_, "ModelInfer");
  std::optional<engine::ServedModel> served = models_->Get(request.model_name());
  if (!served) return Fail("ModelInfer", UnknownModel(request.model_name()));
  std::shared_ptr<runtime::CompiledModel> model = served->model;
  if (served->variants) {
    // The variant for the request's shapes, compiled now if new; a missing
    // input is left to DecodeInputs to name.
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorSignature& input : served->variants->signature().inputs) {
      for (const auto& in : request.inputs()) {
        if (in.name() == input.name) shapes.emplace_back(in.shape().begin(), in.shape().end());
      }
    }
    if (shapes.size() == served->variants->signature().inputs.size()) {
      absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> variant =
          served->variants->Get(shapes);
      if (!variant.ok()) return Fail("ModelInfer", variant.status());
      model = *std::move(variant);
    }
  }
  const Program& program = model->program();
  absl::StatusOr<std::vector<runtime::Tensor>> inputs = DecodeInputs(program, request);
  if (!inputs.ok()) return Fail("ModelInfer", inputs.status());
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : *inputs) pointers.push_back(&t);
  absl::StatusOr<runtime::RunResult> result = model->Run(pointers);
  if (!result.ok()) return Fail("ModelInfer", result.status());
  response->set_model_name(request.model_name());
  response->set_model_version("1");
  response->set_id(request.id());
  absl::Status encoded = EncodeOutputs(program, request, *std::move(result), response);
  if (!encoded.ok()) return Fail("ModelInfer", encoded);
  return grpc::Status::OK;
}

}  // namespace kiln::server
