// ModelInfer answered by one thread that keeps polling for the next call for
// a while after each one (kiln-server --infer_spin_us), instead of gRPC's
// sync threads that sleep between calls.
//
// Why: a thread that sleeps between calls must be woken for each one. For
// the MLP at 1 thread the client's round trip went from 122-133 us p50 on
// the sync threads to 95-99 polling (six interleaved runs). The kernels' own
// time did not improve (35-39 us either way, against 29 in process back to
// back; in process a 60 us sleep before each run also gives 35), so the gain
// is the wake-up, not warmer caches. The cost: the thread holds a core for
// up to the spin time after each call. Like the runtime pool's spin, it
// trades idle CPU for latency. On by default (100 us); --infer_spin_us=0
// restores the sync threads.
//
// The loop answers a call itself only when that is quick (the model's last
// run took at most --infer_inline_us and nothing needs compiling, or the
// model batches and the call only queues); anything else goes to a few
// worker threads (--infer_workers), so a first-use compile or a large model
// does not hold up the small calls behind it.
#ifndef KILN_SERVER_INFER_SPIN_LOOP_H_
#define KILN_SERVER_INFER_SPIN_LOOP_H_

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/inference_service.h"

namespace kiln::server {

// The inference service with ModelInfer taken off gRPC's sync threads. Its
// requests arrive as bytes the loop parses itself: gRPC's own parse of an
// async call answers bytes that are no ModelInferRequest with INTERNAL
// "Unable to parse request", where the fault is the client's.
class AsyncInferenceService final
    : public inference::GRPCInferenceService::WithRawMethod_ModelInfer<InferenceService> {
 public:
  AsyncInferenceService(engine::ModelManager* models, std::vector<int> inference_cpus) {
    Init(models, std::move(inference_cpus));
  }
};

class InferSpinLoop {
 public:
  // Call before the server is built: the loop's completion queue.
  InferSpinLoop(grpc::ServerBuilder& builder, AsyncInferenceService* service,
                std::chrono::microseconds spin, std::chrono::microseconds inline_budget,
                int workers);
  ~InferSpinLoop();

  // After the server is built and started.
  void Start();
  // After the server's Shutdown: waits for the calls under way, drains the
  // queue and joins the threads.
  void Stop();

 private:
  class Workers;

  void Run();
  void RequestNextCall();

  AsyncInferenceService* service_;
  std::chrono::microseconds spin_;
  int64_t inline_budget_ns_;
  std::unique_ptr<Workers> workers_;
  // Calls started and not yet answered.
  absl::Mutex in_flight_mutex_;
  int in_flight_ ABSL_GUARDED_BY(in_flight_mutex_) = 0;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::thread thread_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_INFER_SPIN_LOOP_H_
