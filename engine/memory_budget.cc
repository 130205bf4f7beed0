// The memory budget for loaded models.
//
//   compile: lower ─► PlanFootprint ─► Admit ──fits──► compile kernels, copy
//                                        │              constants ─► Grow(code)
//                                        │ does not fit
//                                        ▼
//                 Unload() the least recently used idle variant, try again
//                                        │ nothing left to unload
//                                        ▼
//                       ResourceExhausted naming --max-loaded-mb
//
// * Charged before allocation. A model is admitted from its lowered program
//   alone, so one that will not fit neither compiles its kernels nor copies
//   its constants, and a value larger than the whole budget (a 128 GiB
//   output) is refused before anything of it exists.
// * Released by lifetime, not by bookkeeping. The charge travels with the
//   model (ChargedTo) and ends when its last owner lets go: a variant
//   dropped from its set while a call still runs on it stays charged until
//   that call returns, so `used` is memory really held, never memory
//   promised back.
// * Unloading is the owner's (ModelManager): the budget only asks for one
//   thing at a time, with its own lock released, and the owner unloads only
//   what nothing else holds (its memory is freed as the call returns) and
//   never a model a user loaded, only a shape variant it can compile again.
// * Concurrent admissions each reserve under the lock, so two compiles
//   cannot both take the last free bytes.
#include "engine/memory_budget.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/human_bytes.h"
#include "compiler/ir/verifier.h"

namespace kiln::engine {

struct MemoryBudget::Ledger {
  absl::Mutex mutex;
  int64_t used ABSL_GUARDED_BY(mutex) = 0;
  int64_t unloads ABSL_GUARDED_BY(mutex) = 0;
};

namespace {

// The model's fault: it can never load on this server.
absl::Status TooLargeForTheBudget(std::string message) {
  absl::Status s = absl::ResourceExhaustedError(std::move(message));
  s.SetPayload(kLimitPayload, absl::Cord(kMaxLoadedLimitName));
  return s;
}

}  // namespace

MemoryBudget::Charge& MemoryBudget::Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    Release();
    ledger_ = std::move(other.ledger_);
    bytes_ = other.bytes_;
    other.ledger_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryBudget::Charge::Release() {
  if (ledger_ != nullptr) {
    absl::MutexLock lock(&ledger_->mutex);
    ledger_->used -= bytes_;
  }
  ledger_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(int64_t max_bytes, Unload unload)
    : max_bytes_(max_bytes), unload_(std::move(unload)), ledger_(std::make_shared<Ledger>()) {}

absl::StatusOr<MemoryBudget::Charge> MemoryBudget::Admit(const runtime::ModelFootprint& footprint,
                                                         absl::string_view what) {
  if (footprint.largest_value_bytes > max_bytes_) {
    return TooLargeForTheBudget(absl::StrCat(
        what, ": ", footprint.largest_value, " alone needs ",
        HumanBytes(footprint.largest_value_bytes), ", more than the server's whole budget of ",
        HumanBytes(max_bytes_), " for loaded models (--max-loaded-mb)"));
  }
  const std::string parts = absl::StrCat(
      "weights ", HumanBytes(footprint.constant_bytes), ", intermediates ",
      HumanBytes(footprint.arena_bytes),
      footprint.temp_bytes > 0
          ? absl::StrCat(", kernel temporaries ", HumanBytes(footprint.temp_bytes))
          : "",
      footprint.code_bytes > 0 ? absl::StrCat(", code ", HumanBytes(footprint.code_bytes)) : "");
  return Reserve(footprint.held_bytes(), absl::StrCat(what, " (", parts, ")"));
}

absl::StatusOr<MemoryBudget::Charge> MemoryBudget::Reserve(int64_t bytes, absl::string_view what) {
  Charge charge;
  charge.ledger_ = ledger_;
  if (absl::Status s = Grow(charge, bytes, what); !s.ok()) return s;
  return charge;
}

absl::Status MemoryBudget::Grow(Charge& charge, int64_t bytes, absl::string_view what) {
  if (bytes <= 0) return absl::OkStatus();
  if (charge.bytes_ + bytes > max_bytes_) {
    return TooLargeForTheBudget(absl::StrCat(
        what, " needs ", HumanBytes(charge.bytes_ + bytes),
        " loaded, more than the server's whole budget of ", HumanBytes(max_bytes_),
        " for loaded models (--max-loaded-mb)"));
  }
  while (true) {
    int64_t used = 0;
    {
      absl::MutexLock lock(&ledger_->mutex);
      if (ledger_->used + bytes <= max_bytes_) {
        ledger_->used += bytes;
        charge.bytes_ += bytes;
        return absl::OkStatus();
      }
      used = ledger_->used;
    }
    // Unloaded with the lock released: the unloaded model's charge ends
    // (taking the lock) before Unload returns.
    if (!unload_ || !unload_(what)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " needs ", HumanBytes(bytes), charge.bytes_ > 0 ? " more" : "", ", but ",
          HumanBytes(used), " of the server's ", HumanBytes(max_bytes_),
          " budget for loaded models is held by models loaded explicitly or in use, and nothing "
          "more can be unloaded to make room (--max-loaded-mb); unload a model or raise the "
          "budget"));
    }
    absl::MutexLock lock(&ledger_->mutex);
    ++ledger_->unloads;
  }
}

int64_t MemoryBudget::used_bytes() const {
  absl::MutexLock lock(&ledger_->mutex);
  return ledger_->used;
}

int64_t MemoryBudget::unloads() const {
  absl::MutexLock lock(&ledger_->mutex);
  return ledger_->unloads;
}

}  // namespace kiln::engine
