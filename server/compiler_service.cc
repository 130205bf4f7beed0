#include "server/compiler_service.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen.h"
#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/ops/op_registry.h"
#include "runtime/thread_pool.h"
#include "server/report_conversion.h"
#include "server/status_conversion.h"
#include "common/version.h"

namespace kiln::server {
namespace {

grpc::Status Fail(const char* rpc, const absl::Status& status) {
  std::cerr << "kiln-server: " << rpc << ": " << status << "\n";
  return ToGrpcStatus(status);
}

CompileOptions ToCompileOptions(const kiln::v1::CompileOptions& in) {
  CompileOptions out;
  if (in.has_opt_level()) out.opt_level = in.opt_level();
  out.disabled_passes.assign(in.disabled_passes().begin(), in.disabled_passes().end());
  out.required_passes.assign(in.required_passes().begin(), in.required_passes().end());
  if (in.max_fuse_depth() != 0) out.max_fuse_depth = in.max_fuse_depth();
  out.print_ir_after.assign(in.print_ir_after().begin(), in.print_ir_after().end());
  return out;
}

}  // namespace

grpc::Status CompilerService::CompileModel(grpc::ServerContext*,
                                           const kiln::v1::CompileModelRequest* request,
                                           kiln::v1::CompileModelResponse* response) {
  if (request->model_case() == kiln::v1::CompileModelRequest::kOnnxModel) {
    return Fail("CompileModel", absl::UnimplementedError("ONNX import is not available yet"));
  }
  if (request->model_case() != kiln::v1::CompileModelRequest::kGraph) {
    return Fail("CompileModel", absl::InvalidArgumentError("the request carries no model"));
  }
  const std::string name =
      request->model_name().empty() ? request->graph().name() : request->model_name();
  if (name.empty()) {
    return Fail("CompileModel", absl::InvalidArgumentError(
                                    "no model name: set model_name or the graph's name"));
  }
  if (request->options().has_opt_level() &&
      (request->options().opt_level() < 0 || request->options().opt_level() > 3)) {
    return Fail("CompileModel", absl::InvalidArgumentError(absl::StrCat(
                                    "opt_level ", request->options().opt_level(),
                                    " is outside 0..3")));
  }
  absl::StatusOr<Graph> graph = ImportKilnGraph(request->graph(), OpRegistry::Default());
  if (!graph.ok()) return Fail("CompileModel", graph.status());
  absl::StatusOr<runtime::CompileResult> result =
      models_->Compile(name, *std::move(graph), ToCompileOptions(request->options()));
  if (!result.ok()) return Fail("CompileModel", result.status());
  response->set_model_name(name);
  FillCompileReport(*result, response->mutable_report());
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetCacheStats(grpc::ServerContext*,
                                            const kiln::v1::GetCacheStatsRequest*,
                                            kiln::v1::GetCacheStatsResponse* response) {
  FillCacheStats(models_->GetCacheStats(), response);
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetTimingStats(grpc::ServerContext*,
                                             const kiln::v1::GetTimingStatsRequest* request,
                                             kiln::v1::GetTimingStatsResponse* response) {
  if (!request->model_name().empty()) {
    auto model = models_->Find(request->model_name());
    if (!model) {
      return Fail("GetTimingStats", absl::NotFoundError(absl::StrCat(
                                        "unknown model '", request->model_name(), "'")));
    }
    FillModelTiming(request->model_name(), *model, response->add_models());
    return grpc::Status::OK;
  }
  for (const auto& [name, model] : models_->List()) {
    FillModelTiming(name, *model, response->add_models());
  }
  return grpc::Status::OK;
}

grpc::Status CompilerService::ListModels(grpc::ServerContext*, const kiln::v1::ListModelsRequest*,
                                         kiln::v1::ListModelsResponse* response) {
  for (const auto& [name, model] : models_->List()) {
    kiln::v1::ModelSummary* s = response->add_models();
    const Program& p = model->program();
    s->set_name(name);
    s->set_kernels(static_cast<int>(p.kernels.size()));
    for (int v : p.inputs) FillValueInfo(p.values[v], s->add_inputs());
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      kiln::v1::ValueInfo* out = s->add_outputs();
      FillValueInfo(p.values[p.outputs[i]], out);
      out->set_name(p.output_names[i]);
    }
  }
  return grpc::Status::OK;
}

grpc::Status CompilerService::UnloadModel(grpc::ServerContext*,
                                          const kiln::v1::UnloadModelRequest* request,
                                          kiln::v1::UnloadModelResponse*) {
  absl::Status s = models_->Unload(request->model_name());
  if (!s.ok()) return Fail("UnloadModel", s);
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetServerInfo(grpc::ServerContext*,
                                            const kiln::v1::GetServerInfoRequest*,
                                            kiln::v1::GetServerInfoResponse* response) {
  const codegen::HostTarget& host = codegen::GetHostTarget();
  response->set_version(kKilnVersion);
  response->set_llvm_version(codegen::LlvmVersionString());
  response->set_target_triple(host.triple);
  response->set_cpu(host.cpu);
  for (const std::string& f : host.features) response->add_cpu_features(f);
  for (const std::string& op : OpRegistry::Default().Names()) response->add_ops(op);
  response->set_threads(runtime::GetParallelThreads());
  return grpc::Status::OK;
}

}  // namespace kiln::server
