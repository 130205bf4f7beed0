#include "server/infer_spin_loop.h"

namespace kiln::server {
namespace {

// One ModelInfer call from arrival to its answer being sent.
struct InferCall {
  grpc::ServerContext context;
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder{&context};
  bool answered = false;
};

// How long the loop sleeps in one wait once it stops spinning; calls wake
// it at once, this only bounds how stale its clock gets.
constexpr auto kBlockingWait = std::chrono::milliseconds(100);

}  // namespace

InferSpinLoop::InferSpinLoop(grpc::ServerBuilder& builder, AsyncInferenceService* service,
                             std::chrono::microseconds spin)
    : service_(service), spin_(spin), queue_(builder.AddCompletionQueue()) {}

InferSpinLoop::~InferSpinLoop() { Stop(); }

void InferSpinLoop::Start() {
  RequestNextCall();
  thread_ = std::thread([this] { Run(); });
}

void InferSpinLoop::Stop() {
  if (!queue_) return;
  queue_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    void* tag;
    bool ok;
    while (queue_->Next(&tag, &ok)) delete static_cast<InferCall*>(tag);
  }
  queue_.reset();
}

void InferSpinLoop::RequestNextCall() {
  auto* call = new InferCall;
  service_->RequestModelInfer(&call->context, &call->request, &call->responder, queue_.get(),
                              queue_.get(), call);
}

void InferSpinLoop::Run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_call = Clock::now();
  bool accepting = true;
  for (;;) {
    void* tag = nullptr;
    bool ok = false;
    const bool spinning = Clock::now() - last_call < spin_;
    // A deadline already past polls without sleeping.
    const auto deadline = spinning ? std::chrono::system_clock::time_point()
                                   : std::chrono::system_clock::now() + kBlockingWait;
    const grpc::CompletionQueue::NextStatus status = queue_->AsyncNext(&tag, &ok, deadline);
    if (status == grpc::CompletionQueue::SHUTDOWN) return;
    if (status == grpc::CompletionQueue::TIMEOUT) continue;
    auto* call = static_cast<InferCall*>(tag);
    if (call->answered || !ok) {
      // Sent (or the client left), or a requested call the shutting-down
      // server will never fill: nothing more to ask for.
      if (!call->answered) accepting = false;
      delete call;
      continue;
    }
    if (accepting) RequestNextCall();
    const grpc::Status answer = service_->Infer(call->request, &call->response);
    call->answered = true;
    if (answer.ok()) {
      call->responder.Finish(call->response, answer, call);
    } else {
      call->responder.FinishWithError(answer, call);
    }
    last_call = Clock::now();
  }
}

}  // namespace kiln::server
