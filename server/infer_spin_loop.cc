#include "server/infer_spin_loop.h"

#include <deque>
#include <functional>

#include "common/ms_since.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/call_auth.h"
#include "server/status_conversion.h"

namespace kiln::server {

// Threads that run the calls the loop does not answer itself, in arrival order.
class InferSpinLoop::Workers {
 public:
  explicit Workers(int count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Work(); });
  }
  // Finishes what is queued, then joins.
  ~Workers() {
    {
      absl::MutexLock lock(&mutex_);
      stopping_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  void Run(std::function<void()> task) {
    absl::MutexLock lock(&mutex_);
    tasks_.push_back(std::move(task));
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mutex_);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) {
          return stopping_ || !tasks_.empty();
        };
        mutex_.Await(absl::Condition(&ready));
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mutex_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

namespace {

// One ModelInfer call from arrival to its answer being sent.
struct InferCall {
  grpc::ServerContext context;
  grpc::ByteBuffer request_bytes;
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder{&context};
  bool answered = false;
};

// The call's request from its bytes; InvalidArgument for bytes that are not one.
absl::Status ParseRequest(InferCall& call) {
  grpc::Status parsed =
      grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&call.request_bytes,
                                                                            &call.request);
  call.request_bytes.Clear();
  if (parsed.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "the request bytes are not a ModelInferRequest (inference.GRPCInferenceService)");
}

// Sends the call's response, or `answer` when it is an error.
void Finish(InferCall& call, const grpc::Status& answer) {
  call.answered = true;
  if (!answer.ok()) return call.responder.FinishWithError(answer, &call);
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  grpc::Status serialized = grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(
      call.response, &bytes, &own_buffer);
  if (!serialized.ok()) return call.responder.FinishWithError(serialized, &call);
  call.responder.Finish(bytes, grpc::Status::OK, &call);
}

// How long the loop sleeps in one wait once it stops spinning; calls wake
// it at once, this only bounds how stale its clock gets.
constexpr auto kBlockingWait = std::chrono::milliseconds(100);

}  // namespace

InferSpinLoop::InferSpinLoop(grpc::ServerBuilder& builder, AsyncInferenceService* service,
                             std::chrono::microseconds spin,
                             std::chrono::microseconds inline_budget, int workers)
    : service_(service),
      spin_(spin),
      inline_budget_ns_(std::chrono::nanoseconds(inline_budget).count()),
      workers_(std::make_unique<Workers>(std::max(1, workers))),
      queue_(builder.AddCompletionQueue()) {}

InferSpinLoop::~InferSpinLoop() { Stop(); }

void InferSpinLoop::Start() {
  RequestNextCall();
  thread_ = std::thread([this] { Run(); });
}

void InferSpinLoop::Stop() {
  if (!queue_) return;
  {
    // Their answers still go through the queue.
    absl::MutexLock lock(&in_flight_mutex_);
    auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(in_flight_mutex_) { return in_flight_ == 0; };
    in_flight_mutex_.Await(absl::Condition(&idle));
  }
  queue_->Shutdown();
  workers_.reset();
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
  service_->RequestModelInfer(&call->context, &call->request_bytes, &call->responder,
                              queue_.get(), queue_.get(), call);
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
    const int64_t arrived = SteadyNowNs();
    if (accepting) RequestNextCall();
    {
      absl::MutexLock lock(&in_flight_mutex_);
      ++in_flight_;
    }
    // Runs on whichever thread answers: this one, a worker, or a batcher.
    auto done = [this, call](const grpc::Status& answer) {
      Finish(*call, answer);
      absl::MutexLock lock(&in_flight_mutex_);
      --in_flight_;
    };
    if (grpc::Status allowed =
            Authorize(service_->tokens(), call->context, Scope::kInfer, "ModelInfer");
        !allowed.ok()) {
      done(allowed);
      last_call = Clock::now();
      continue;
    }
    if (absl::Status parsed = ParseRequest(*call); !parsed.ok()) {
      done(Fail("ModelInfer", parsed));
      last_call = Clock::now();
      continue;
    }
    if (service_->AnswersQuickly(call->request, inline_budget_ns_)) {
      service_->StartInfer(call->request, &call->response, std::move(done),
                           absl::FromChrono(call->context.deadline()), arrived);
    } else {
      workers_->Run([this, call, arrived, done = std::move(done)]() mutable {
        service_->StartInfer(call->request, &call->response, std::move(done),
                             absl::FromChrono(call->context.deadline()), arrived);
      });
    }
    last_call = Clock::now();
  }
}

}  // namespace kiln::server
