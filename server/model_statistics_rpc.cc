// ModelStatistics: Triton's per-model statistics from the engine's store
// (engine/inference_statistics.h), for the models being served.
#include <string>

#include "absl/strings/str_cat.h"
#include "server/call_auth.h"
#include "server/inference_service.h"
#include "server/status_conversion.h"

namespace kiln::server {
namespace {

void ToProto(const engine::StatDuration& d, inference::StatisticDuration* out) {
  out->set_count(static_cast<uint64_t>(d.count));
  out->set_ns(static_cast<uint64_t>(d.ns));
}

void ToProto(const engine::ModelStatsSnapshot& s, inference::ModelStatistics* out) {
  out->set_name(s.name);
  out->set_version(std::to_string(s.version));
  out->set_last_inference(static_cast<uint64_t>(s.last_inference_ms));
  out->set_inference_count(static_cast<uint64_t>(s.inference_count));
  out->set_execution_count(static_cast<uint64_t>(s.execution_count));
  inference::InferStatistics* i = out->mutable_inference_stats();
  ToProto(s.success, i->mutable_success());
  ToProto(s.fail, i->mutable_fail());
  ToProto(s.queue, i->mutable_queue());
  ToProto(s.compute_input, i->mutable_compute_input());
  ToProto(s.compute_infer, i->mutable_compute_infer());
  ToProto(s.compute_output, i->mutable_compute_output());
  ToProto(s.cache_hit, i->mutable_cache_hit());
  ToProto(s.cache_miss, i->mutable_cache_miss());
  for (const engine::BatchSizeStats& b : s.batch_stats) {
    inference::InferBatchStatistics* o = out->add_batch_stats();
    o->set_batch_size(static_cast<uint64_t>(b.batch_size));
    ToProto(b.compute_input, o->mutable_compute_input());
    ToProto(b.compute_infer, o->mutable_compute_infer());
    ToProto(b.compute_output, o->mutable_compute_output());
  }
}

}  // namespace

grpc::Status InferenceService::ModelStatistics(grpc::ServerContext* context,
                                               const inference::ModelStatisticsRequest* request,
                                               inference::ModelStatisticsResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelStatistics"); !a.ok()) {
    return a;
  }
  const engine::InferenceStatistics& stats = models_->inference_stats();
  if (request->name().empty()) {
    if (!request->version().empty()) {
      return Fail("ModelStatistics", absl::InvalidArgumentError("a version without a model name"));
    }
    // Every served model, each at the version it serves (Kiln serves one).
    for (const engine::ServedModel& served : models_->List()) {
      ToProto(stats.Get(served.name, served.version), response->add_model_stats());
    }
    return grpc::Status::OK;
  }
  absl::StatusOr<engine::ServedModel> served = models_->Serve(request->name(), request->version());
  if (!served.ok()) return Fail("ModelStatistics", served.status());
  ToProto(stats.Get(served->name, served->version), response->add_model_stats());
  return grpc::Status::OK;
}

}  // namespace kiln::server
