// ModelStreamInfer: ModelInfer over one bidirectional stream, as Triton's
// clients use it (stream_infer). Answers go out in the order the requests
// came; a request that fails is answered with its error in error_message
// (and its id and model in infer_response, so a client can tell which) and
// the stream goes on. The stream itself fails only for a missing token.
//
// Requests run as they arrive, not one after another: this thread reads and
// starts each (a model without batching runs it right here; one with
// dynamic batching only queues it), a writer thread sends each answer once it
// and all before it are done. So requests on one stream batch together: run
// one at a time, each would wait out max_queue_delay alone for a batch that
// the next request, not yet read, was to complete. At most kMaxInFlight
// requests of a stream are under way; reading waits for the writer beyond.
#include <deque>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "server/call_auth.h"
#include "server/inference_service.h"

namespace kiln::server {
namespace {

constexpr size_t kMaxInFlight = 256;

// One request of the stream, from its start to its answer being sent.
struct StreamCall {
  inference::ModelInferRequest request;
  inference::ModelStreamInferResponse answer;
  grpc::Status status;
  bool done = false;
};

// Fills the answer of a call that failed.
void AnswerWithError(StreamCall& call) {
  call.answer.set_error_message(call.status.error_message());
  inference::ModelInferResponse* header = call.answer.mutable_infer_response();
  header->Clear();
  header->set_model_name(call.request.model_name());
  header->set_model_version(call.request.model_version());
  header->set_id(call.request.id());
}

}  // namespace

grpc::Status InferenceService::ModelStreamInfer(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
        stream) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelStreamInfer"); !a.ok()) {
    return a;
  }
  absl::Mutex mutex;
  std::deque<std::unique_ptr<StreamCall>> calls;  // in arrival order
  bool reading = true;

  std::thread writer([&] {
    bool client_gone = false;
    for (;;) {
      std::unique_ptr<StreamCall> call;
      {
        absl::MutexLock lock(&mutex);
        auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex) {
          return (!calls.empty() && calls.front()->done) || (!reading && calls.empty());
        };
        mutex.Await(absl::Condition(&ready));
        if (calls.empty()) return;  // read all, answered all
        call = std::move(calls.front());
        calls.pop_front();
      }
      if (!call->status.ok()) AnswerWithError(*call);
      // A client gone still has its calls finish (they are under way); only
      // their answers go nowhere.
      if (!client_gone) client_gone = !stream->Write(call->answer);
    }
  });

  const absl::Time deadline = absl::FromChrono(context->deadline());
  for (;;) {
    auto call = std::make_unique<StreamCall>();
    if (!stream->Read(&call->request)) break;
    StreamCall* started = call.get();
    {
      absl::MutexLock lock(&mutex);
      auto room = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex) { return calls.size() < kMaxInFlight; };
      mutex.Await(absl::Condition(&room));
      calls.push_back(std::move(call));
    }
    // The deque owns the call until the writer takes it, after `done`.
    StartInfer(
        started->request, started->answer.mutable_infer_response(),
        [started, &mutex](const grpc::Status& s) {
          absl::MutexLock lock(&mutex);
          started->status = s;
          started->done = true;
        },
        deadline);
  }
  {
    absl::MutexLock lock(&mutex);
    reading = false;
  }
  writer.join();
  return grpc::Status::OK;
}

}  // namespace kiln::server
