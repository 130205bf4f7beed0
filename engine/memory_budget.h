// The server's budget for what loaded models hold (--max-loaded-mb). Every
// compiled model and shape variant is charged its footprint
// (runtime/model_footprint.h) before that memory is allocated, and stays
// charged for as long as it lives. See memory_budget.cc for the design.
#ifndef KILN_ENGINE_MEMORY_BUDGET_H_
#define KILN_ENGINE_MEMORY_BUDGET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/model_footprint.h"

namespace kiln::engine {

// Which limit a model too large for the whole budget ran into
// (compiler/ir/verifier.h's kLimitPayload): the model's own fault.
inline constexpr char kMaxLoadedLimitName[] = "max_loaded_mb";

class MemoryBudget {
 public:
  // Unloads the least recently used thing that nothing else holds, so that
  // its charge ends before this returns, to make room for `for_what`; false
  // when nothing is left to unload. Called with none of the budget's locks
  // held.
  using Unload = std::function<bool(absl::string_view for_what)>;

  struct Ledger;  // shared by the budget and its charges

  // Bytes held against the budget until destroyed or released.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& other) noexcept { *this = std::move(other); }
    Charge& operator=(Charge&& other) noexcept;
    ~Charge() { Release(); }
    int64_t bytes() const { return bytes_; }
    void Release();

   private:
    friend class MemoryBudget;
    std::shared_ptr<Ledger> ledger_;
    int64_t bytes_ = 0;
  };

  // Everything charged at once stays within `max_bytes`.
  MemoryBudget(int64_t max_bytes, Unload unload);

  // A charge of `footprint` for `what` ("model 'm'"). ResourceExhausted
  // naming --max-loaded-mb: with the payload kLimitPayload when one value
  // of the model, or the whole of it, is larger than the budget (it can
  // never load); without, when it does not fit beside what is loaded and
  // nothing more can be unloaded.
  absl::StatusOr<Charge> Admit(const runtime::ModelFootprint& footprint, absl::string_view what);
  // As Admit, for bytes that are not a model's (a model's source kept to
  // compile its other shapes).
  absl::StatusOr<Charge> Reserve(int64_t bytes, absl::string_view what);
  // Adds `bytes` to `charge` (a model's code, known once its kernels are
  // linked), as Reserve; `charge` is unchanged on failure.
  absl::Status Grow(Charge& charge, int64_t bytes, absl::string_view what);

  int64_t max_bytes() const { return max_bytes_; }
  int64_t used_bytes() const;
  // Things unloaded to make room so far.
  int64_t unloads() const;

 private:
  const int64_t max_bytes_;
  const Unload unload_;
  const std::shared_ptr<Ledger> ledger_;
};

// `object`, owned from now on by the returned pointer, with `charge`
// released when the last owner lets it go (not before: a variant dropped
// from its set while a call runs on it is still held).
template <typename T>
std::shared_ptr<T> ChargedTo(std::unique_ptr<T> object, MemoryBudget::Charge charge) {
  auto held = std::make_shared<MemoryBudget::Charge>(std::move(charge));
  return std::shared_ptr<T>(object.release(), [held](T* p) {
    delete p;
    held->Release();
  });
}

}  // namespace kiln::engine

#endif  // KILN_ENGINE_MEMORY_BUDGET_H_
