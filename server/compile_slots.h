// A bound on compiles running at once. Each compile runs LLVM on its own
// threads: 50 concurrent CompileModel calls made 112 threads and 626 MB and
// pushed inference p99 from under 1 ms to 126 ms (issue 20). Calls beyond
// the slots wait their turn, until their deadline; beyond a queue bound
// they are refused at once.
#ifndef KILN_SERVER_COMPILE_SLOTS_H_
#define KILN_SERVER_COMPILE_SLOTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kiln::server {

class CompileSlots {
 public:
  // `slots` compiles at once (--max-concurrent-compiles), `max_waiting`
  // more queued.
  CompileSlots(int slots, int max_waiting) : free_(slots), max_waiting_(max_waiting) {}

  // Held while a compile runs; freeing it lets the next one in.
  class Slot {
   public:
    explicit Slot(CompileSlots* owner) : owner_(owner) {}
    Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    CompileSlots* owner_;
  };

  // A slot, waiting for one until `deadline` (DeadlineExceeded after);
  // ResourceExhausted, naming the flag, when max_waiting calls already wait.
  absl::StatusOr<Slot> Acquire(absl::Time deadline);

  // Calls waiting for a slot now.
  int waiting() {
    absl::MutexLock lock(&mutex_);
    return waiting_;
  }

 private:
  void Release();

  absl::Mutex mutex_;
  int free_ ABSL_GUARDED_BY(mutex_);
  int waiting_ ABSL_GUARDED_BY(mutex_) = 0;
  const int max_waiting_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_COMPILE_SLOTS_H_
