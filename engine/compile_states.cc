#include "engine/compile_states.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::engine {

CompileStates::Mark::Mark(CompileStates* states, std::string name)
    : states_(states), name_(std::move(name)) {
  absl::MutexLock lock(&states_->mutex_);
  ++states_->compiling_[name_];
}

CompileStates::Mark::Mark(Mark&& other) noexcept
    : states_(std::exchange(other.states_, nullptr)), name_(std::move(other.name_)) {}

CompileStates::Mark::~Mark() {
  if (states_ != nullptr) states_->End(name_);
}

void CompileStates::End(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  auto it = compiling_.find(name);
  if (it != compiling_.end() && --it->second == 0) compiling_.erase(it);
}

void CompileStates::Failed(const std::string& name, const absl::Status& why) {
  absl::MutexLock lock(&mutex_);
  const bool known = failures_.count(name) > 0;
  failures_[name] = absl::StrCat(absl::StatusCodeToString(why.code()), ": ", why.message());
  if (known) {
    failure_order_.erase(std::find(failure_order_.begin(), failure_order_.end(), name));
  }
  failure_order_.push_back(name);
  while (static_cast<int>(failure_order_.size()) > kMaxFailures) {
    failures_.erase(failure_order_.front());
    failure_order_.pop_front();
  }
}

void CompileStates::Forget(const std::string& name) {
  absl::MutexLock lock(&mutex_);
  if (failures_.erase(name) == 0) return;
  failure_order_.erase(std::find(failure_order_.begin(), failure_order_.end(), name));
}

absl::Status CompileStates::WhyNotServed(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  if (compiling_.count(name)) {
    return absl::UnavailableError(absl::StrCat(
        "model '", name, "' is still compiling; retry when its CompileModel call returns"));
  }
  auto failed = failures_.find(name);
  if (failed != failures_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name, "' is not loaded: its last compile failed with ", failed->second));
  }
  return absl::NotFoundError(
      absl::StrCat("unknown model '", name, "'; ListModels shows the loaded ones"));
}

std::vector<std::string> CompileStates::Compiling() const {
  absl::MutexLock lock(&mutex_);
  std::vector<std::string> names;
  for (const auto& [name, count] : compiling_) names.push_back(name);
  return names;
}

std::map<std::string, std::string> CompileStates::Failures() const {
  absl::MutexLock lock(&mutex_);
  return failures_;
}

}  // namespace kiln::engine
