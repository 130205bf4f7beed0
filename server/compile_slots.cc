#include "server/compile_slots.h"

#include "absl/strings/str_cat.h"

namespace kiln::server {

CompileSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release();
}

absl::StatusOr<CompileSlots::Slot> CompileSlots::Acquire(absl::Time deadline) {
  absl::MutexLock lock(&mutex_);
  if (free_ == 0 && waiting_ >= max_waiting_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        waiting_, " compiles are already waiting for a compile slot; the server runs a bounded "
        "number at once (--max-concurrent-compiles)"));
  }
  ++waiting_;
  auto has_free = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return free_ > 0; };
  const bool got = mutex_.AwaitWithDeadline(absl::Condition(&has_free), deadline);
  --waiting_;
  if (!got) {
    return absl::DeadlineExceededError(
        "the call's deadline passed while it waited for a compile slot "
        "(--max-concurrent-compiles)");
  }
  --free_;
  return Slot(this);
}

void CompileSlots::Release() {
  absl::MutexLock lock(&mutex_);
  ++free_;
}

}  // namespace kiln::server
