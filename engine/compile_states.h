// What a name that serves no model is doing: compiling, or failed its last
// compile. A call that finds no model by a name answers with this rather
// than NotFound, so that a client polling for a model it just sent learns
// to wait, or why it never came (issue 20: both were NOT_FOUND, and the
// diagnostic was lost).
#ifndef KILN_ENGINE_COMPILE_STATES_H_
#define KILN_ENGINE_COMPILE_STATES_H_

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace kiln::engine {

class CompileStates {
 public:
  // Failures remembered, oldest forgotten first: names are the clients'
  // to choose, so the memory they take is bounded.
  static constexpr int kMaxFailures = 256;

  // `name` is compiling while a Mark for it lives.
  class Mark {
   public:
    Mark(CompileStates* states, std::string name);
    Mark(Mark&& other) noexcept;
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;
    Mark& operator=(Mark&&) = delete;
    ~Mark();

   private:
    CompileStates* states_;
    std::string name_;
  };

  Mark Begin(const std::string& name) { return Mark(this, name); }
  // The compile of `name` failed with `why` (only failures that are the
  // model's: callers leave out deadlines, cancellations and busy servers).
  void Failed(const std::string& name, const absl::Status& why);
  // `name` compiled, or was unloaded: no failure to tell any more.
  void Forget(const std::string& name);
  // For a name no model is served under: Unavailable while a compile of it
  // runs; FailedPrecondition with the diagnostic after its compile failed;
  // NotFound otherwise.
  absl::Status WhyNotServed(const std::string& name) const;
  // Names compiling now, and names whose last compile failed with their
  // diagnostic (what RepositoryIndex lists as LOADING and UNAVAILABLE).
  std::vector<std::string> Compiling() const;
  std::map<std::string, std::string> Failures() const;

 private:
  void End(const std::string& name);

  mutable absl::Mutex mutex_;
  std::map<std::string, int> compiling_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::string> failures_ ABSL_GUARDED_BY(mutex_);
  std::deque<std::string> failure_order_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_COMPILE_STATES_H_
