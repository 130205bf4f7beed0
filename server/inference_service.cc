#include "server/inference_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/ms_since.h"
#include "common/version.h"
#include "engine/batch_rows.h"
#include "server/call_auth.h"
#include "server/compiler_service.h"
#include "server/cpu_affinity.h"
#include "server/infer_request.h"
#include "server/model_tensors.h"
#include "server/status_conversion.h"

namespace kiln::server {
grpc::Status InferenceService::ServerLive(grpc::ServerContext*,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* response) {
  response->set_live(true);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext*,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* response) {
  response->set_ready(ready_.load());
  return grpc::Status::OK;
}

absl::Status InferenceService::FromStore(const std::string& name, absl::Time deadline) {
  return compiler_ == nullptr ? absl::OkStatus() : compiler_->ResolveFromStore(name, deadline);
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext* context,
                                          const inference::ModelReadyRequest* request,
                                          inference::ModelReadyResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelReady"); !a.ok()) {
    return a;
  }
  response->set_ready(FromStore(request->name(), absl::FromChrono(context->deadline())).ok() &&
                      models_->Serve(request->name(), request->version()).ok());
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext* context,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ServerMetadata"); !a.ok()) {
    return a;
  }
  response->set_name("kiln");
  response->set_version(kKilnVersion);
  for (const char* extension : kExtensions) response->add_extensions(extension);
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext* context,
                                             const inference::ModelMetadataRequest* request,
                                             inference::ModelMetadataResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelMetadata"); !a.ok()) {
    return a;
  }
  if (absl::Status s = FromStore(request->name(), absl::FromChrono(context->deadline()));
      !s.ok()) {
    return Fail("ModelMetadata", s, request->name());
  }
  absl::StatusOr<engine::ServedModel> served = models_->Serve(request->name(), request->version());
  if (!served.ok()) return Fail("ModelMetadata", served.status(), request->name());
  response->set_name(request->name());
  // Every version a request may name, as Triton lists them.
  for (int64_t version : models_->Versions(request->name())) {
    response->add_versions(std::to_string(version));
  }
  response->set_platform(kPlatform);
  const ModelTensors tensors = TensorsOf(*served);
  auto fill = [](const TensorDescription& d,
                 inference::ModelMetadataResponse::TensorMetadata* t) {
    t->set_name(d.name);
    t->set_datatype(DatatypeName(d.dtype));
    for (int64_t dim : d.dims) t->add_shape(dim);
  };
  for (const TensorDescription& in : tensors.inputs) fill(in, response->add_inputs());
  for (const TensorDescription& out : tensors.outputs) fill(out, response->add_outputs());
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext* context,
                                          const inference::ModelInferRequest* request,
                                          inference::ModelInferResponse* response) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelInfer"); !a.ok()) {
    return a;
  }
  absl::Notification finished;
  grpc::Status status;
  StartInfer(
      *request, response,
      [&](const grpc::Status& s) {
        status = s;
        finished.Notify();
      },
      absl::FromChrono(context->deadline()));
  finished.WaitForNotification();
  return status;
}

namespace {

// `shapes`, in the signature's input order, in the program's.
absl::StatusOr<std::vector<std::vector<int64_t>>> InProgramOrder(
    const Program& program, const ModelSignature& signature,
    const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::vector<int64_t>> out;
  for (int v : program.inputs) {
    for (size_t i = 0; i < signature.inputs.size() && i < shapes.size(); ++i) {
      if (signature.inputs[i].name == program.values[v].name) out.push_back(shapes[i]);
    }
  }
  if (out.size() != program.inputs.size()) {
    return absl::InternalError("the model's inputs and its signature differ");
  }
  return out;
}

// The rows of a request: its first input's dim 0 (1 for a scalar input).
int64_t RequestRows(const std::vector<runtime::Tensor>& inputs) {
  if (inputs.empty() || inputs[0].type().shape.empty()) return 1;
  return inputs[0].type().shape[0];
}

}  // namespace

bool InferenceService::AnswersQuickly(const inference::ModelInferRequest& request,
                                      int64_t budget_ns) const {
  absl::StatusOr<engine::ServedModel> served =
      models_->Serve(request.model_name(), request.model_version());
  // A name the model store may hold: its load is a compile.
  if (!served.ok()) return compiler_ == nullptr || !compiler_->has_model_store();
  if (served->batcher) return true;
  std::shared_ptr<runtime::CompiledModel> model = served->model;
  if (served->variants) {
    absl::StatusOr<std::vector<std::vector<int64_t>>> key =
        RequestVariantKey(served->variants->signature(), request);
    if (!key.ok()) return true;  // refused at once
    model = served->variants->Peek(*key);
    if (!model) return false;  // a compile, or a refusal already known: not worth guessing
  }
  return model != nullptr && model->last_run_ns() <= budget_ns;
}

namespace {

absl::Status DeadlinePassed(const char* before) {
  return absl::DeadlineExceededError(
      absl::StrCat("the call's deadline passed before ", before,
                   "; it did not run (a compile it started goes on and is kept)"));
}

// A failed ModelInfer, logged with the model and the id the client chose.
grpc::Status FailInfer(const inference::ModelInferRequest& request, const absl::Status& status) {
  return Fail("ModelInfer", status, request.model_name(), request.id());
}

}  // namespace

void InferenceService::StartInfer(const inference::ModelInferRequest& request,
                                  inference::ModelInferResponse* response, InferDone done,
                                  absl::Time deadline, int64_t arrived_ns) {
  const int64_t arrived = arrived_ns > 0 ? arrived_ns : SteadyNowNs();
  BindHandlerThreadOrWarn(inference_cpus_, "ModelInfer");
  if (absl::Now() > deadline) return done(FailInfer(request, DeadlinePassed("its turn came")));
  if (absl::Status s = FromStore(request.model_name(), deadline); !s.ok()) {
    return done(FailInfer(request, s));
  }
  absl::StatusOr<engine::ServedModel> served =
      models_->Serve(request.model_name(), request.model_version());
  if (!served.ok()) return done(FailInfer(request, served.status()));
  auto times = std::make_shared<CallTimes>();
  times->arrived_ns = arrived;
  done = Recorded(*served, times, std::move(done));
  response->set_model_version(std::to_string(served->version));
  if (!served->variants) {
    return RunAndAnswer(*served, *served->model, 0, nullptr, request, response, std::move(done),
                        deadline, times.get());
  }
  // The variant for the request's shapes (and values of inputs that decide
  // shapes), compiled now if new.
  absl::StatusOr<std::vector<std::vector<int64_t>>> key =
      RequestVariantKey(served->variants->signature(), request);
  if (!key.ok()) return done(FailInfer(request, key.status()));
  if (served->batcher) {
    if (absl::Status valid = served->variants->Check(*key); !valid.ok()) {
      return done(FailInfer(request, valid));
    }
    return SubmitToBatcher(*served, *key, request, response, std::move(done), times.get());
  }
  if (served->pads_new_batches && !served->variants->Peek(*key) &&
      served->variants->Check(*key).ok()) {
    // A batch size not compiled yet: served from a larger loaded one,
    // padded, while its own compiles in the background, unless waiting for
    // that compile is quicker.
    std::optional<engine::ShapeVariants::LargerBatch> larger =
        served->variants->FindLargerBatch(*key);
    if (larger && engine::ServePaddedWhileCompiling(larger->model->last_run_ns(),
                                                     served->variants->last_compile_ns())) {
      served->variants->CompileSoon(*key, models_->BackgroundSchedule());
      return RunAndAnswer(*served, *larger->model, larger->rows, &*key, request, response,
                          std::move(done), deadline, times.get());
    }
  }
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> variant = served->variants->Get(*key);
  if (!variant.ok()) return done(FailInfer(request, variant.status()));
  if (absl::Now() > deadline) {
    return done(FailInfer(request, DeadlinePassed("its shape finished compiling")));
  }
  RunAndAnswer(*served, **variant, 0, &*key, request, response, std::move(done), deadline,
               times.get());
}

InferenceService::InferDone InferenceService::Recorded(const engine::ServedModel& served,
                                                       std::shared_ptr<CallTimes> times,
                                                       InferDone done) {
  return [stats = &models_->inference_stats(), name = served.name, version = served.version,
          times = std::move(times), done = std::move(done),
          histograms = &models_->request_histograms()](const grpc::Status& status) {
    const int64_t total_ns = SteadyNowNs() - times->arrived_ns;
    if (status.ok()) {
      times->times.total_ns = total_ns;
      stats->RecordSuccess(name, version, times->times);
      histograms->Record(name, version, times->times);
    } else {
      stats->RecordFailure(name, version, total_ns);
    }
    done(status);
  };
}

absl::StatusOr<std::vector<runtime::Tensor>> InferenceService::DecodeAtShapes(
    const Program& program, const ModelSignature& signature,
    const std::vector<std::vector<int64_t>>* shapes, const inference::ModelInferRequest& request) {
  if (shapes == nullptr) return DecodeInputs(program, request);
  absl::StatusOr<std::vector<std::vector<int64_t>>> program_shapes =
      InProgramOrder(program, signature, *shapes);
  if (!program_shapes.ok()) return program_shapes.status();
  std::set<std::string> consumed;  // folded into the program as constants
  for (const TensorSignature& in : signature.inputs) {
    if (in.decides_shapes) consumed.insert(in.name);
  }
  return DecodeInputs(program, request, &*program_shapes, &consumed);
}

void InferenceService::RunAndAnswer(const engine::ServedModel& served,
                                    runtime::CompiledModel& model, int64_t padded_rows,
                                    const std::vector<std::vector<int64_t>>* shapes,
                                    const inference::ModelInferRequest& request,
                                    inference::ModelInferResponse* response, InferDone done,
                                    absl::Time deadline, CallTimes* times) {
  const int64_t start = SteadyNowNs();
  const Program& program = model.program();
  absl::StatusOr<std::vector<runtime::Tensor>> inputs =
      DecodeAtShapes(program, served.variants ? served.variants->signature() : ModelSignature{},
                     shapes, request);
  if (!inputs.ok()) return done(FailInfer(request, inputs.status()));
  const int64_t decoded = SteadyNowNs();
  absl::StatusOr<runtime::RunResult> result;
  if (padded_rows > 0) {
    result = engine::RunPadded(model, *inputs, padded_rows);
  } else {
    std::vector<const runtime::Tensor*> pointers;
    for (const runtime::Tensor& t : *inputs) pointers.push_back(&t);
    result = model.Run(pointers, deadline);
  }
  if (!result.ok()) return done(FailInfer(request, result.status()));
  const int64_t ran = SteadyNowNs();
  absl::Status encoded = Answer(program, request, *std::move(result), response);
  if (!encoded.ok()) return done(FailInfer(request, encoded));
  const int64_t rows = RequestRows(*inputs);
  const int64_t answered = SteadyNowNs();
  served.batch_stats->RecordExecution(rows, decoded - start, ran - decoded, answered - ran,
                                      padded_rows > 0 ? padded_rows - rows : 0);
  // Triton's counts: a model whose dim 0 is no batch dim runs one "row".
  const int64_t batch = served.batcher || served.pads_new_batches ? rows : 1;
  times->times.queue_ns = start - times->arrived_ns;
  times->times.compute_input_ns = decoded - start;
  times->times.compute_infer_ns = ran - decoded;
  times->times.compute_output_ns = answered - ran;
  times->times.rows = batch;
  models_->inference_stats().RecordExecution(
      served.name, served.version, {batch, decoded - start, ran - decoded, answered - ran});
  done(grpc::Status::OK);
}

absl::Status InferenceService::Answer(const Program& program,
                                      const inference::ModelInferRequest& request,
                                      runtime::RunResult result,
                                      inference::ModelInferResponse* response) {
  response->set_model_name(request.model_name());
  response->set_id(request.id());
  return EncodeOutputs(program, request, std::move(result), response);
}

void InferenceService::SubmitToBatcher(const engine::ServedModel& served,
                                       const std::vector<std::vector<int64_t>>& shapes,
                                       const inference::ModelInferRequest& request,
                                       inference::ModelInferResponse* response,
                                       InferDone done, CallTimes* times) {
  // The load-time variant's program names the inputs, dtypes and outputs
  // (every variant shares them); the shapes are the request's, checked.
  absl::StatusOr<std::vector<runtime::Tensor>> inputs =
      DecodeAtShapes(served.model->program(), served.variants->signature(), &shapes, request);
  if (!inputs.ok()) return done(FailInfer(request, inputs.status()));
  // The callback holds the model, not the served entry: dropping the last
  // reference to the batcher from its own thread is what it must not do.
  // `times` lives as long as `done`, which owns it.
  times->times.rows = RequestRows(*inputs);
  served.batcher->SubmitTimed(
      *std::move(inputs),
      [model = served.model, &request, response, done = std::move(done), times,
       stats = &models_->inference_stats(), name = served.name, version = served.version](
          absl::StatusOr<runtime::RunResult> result, const engine::BatchTiming& timing) {
        times->times.queue_ns = timing.queue_ns;
        times->times.compute_input_ns = timing.compute_input_ns;
        times->times.compute_infer_ns = timing.compute_infer_ns;
        times->times.compute_output_ns = timing.compute_output_ns;
        if (timing.first_in_batch) {
          stats->RecordExecution(name, version,
                                 {timing.batch_rows, timing.compute_input_ns,
                                  timing.compute_infer_ns, timing.compute_output_ns});
        }
        if (!result.ok()) return done(FailInfer(request, result.status()));
        absl::Status encoded = Answer(model->program(), request, *std::move(result), response);
        if (!encoded.ok()) return done(FailInfer(request, encoded));
        done(grpc::Status::OK);
      });
}

}  // namespace kiln::server
