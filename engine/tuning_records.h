// Measured schedule choices (the tuner's output, tuner.cc), one per kernel
// structure and CPU, kept in the kernel cache's directory so they travel with
// it. A later compile on the same CPU follows them; a record made on another
// CPU is kept but never used.
#ifndef KILN_ENGINE_TUNING_RECORDS_H_
#define KILN_ENGINE_TUNING_RECORDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "compiler/lower/schedule_override.h"

namespace kiln::engine {

// The CPU a record was measured on: LLVM's CPU name and feature string (as
// in the kernel cache key) and /proc/cpuinfo's model name. All three must
// match for a record to be used.
struct TuningCpu {
  std::string cpu;
  std::string model;
  std::string features;
  bool operator==(const TuningCpu& o) const {
    return cpu == o.cpu && model == o.model && features == o.features;
  }
};

struct TuningRecord {
  std::string structure;  // SHA-256 hex of the kernel's canonical form
  TuningCpu cpu;
  std::string schedule_override;  // lower::ScheduleOverride::ToString
  std::string kernel;             // the kernel's name where it was tuned
  std::string default_schedule;   // the estimate's plan summary
  std::string tuned_schedule;     // the record's plan summary
  double default_us = 0;          // median time of one call, each plan
  double tuned_us = 0;
  int candidates = 0;  // plans timed
  // How many times faster the tuned plan ran than the estimate's.
  double Gain() const { return tuned_us > 0 ? default_us / tuned_us : 1; }
};

// The structure key of a kernel's canonical form.
std::string TuningStructureKey(const std::string& canonical);

class TuningRecords {
 public:
  // Records for `host`, read from `dir` if set (a missing file is no
  // records; unreadable lines are skipped and counted) and written back there
  // on every Put.
  TuningRecords(std::string dir, TuningCpu host);

  // This CPU's override for a kernel's canonical form, if recorded. Counts a
  // use. Thread-safe.
  std::optional<lower::ScheduleOverride> Lookup(const std::string& canonical);
  // This CPU's record for a structure key (TuningStructureKey), if any.
  std::optional<TuningRecord> Find(const std::string& structure) const;
  // Adds or replaces the record of its structure and CPU and writes the
  // file (Internal when that fails; the record is kept in memory).
  absl::Status Put(const TuningRecord& record);
  // Every record, this CPU's and others'.
  std::vector<TuningRecord> All() const;

  const TuningCpu& host() const { return host_; }
  int64_t uses() const;
  int64_t skipped_lines() const;
  // The file holding the records ("" without a directory).
  std::string path() const;

 private:
  absl::Status Write() const ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  const std::string dir_;
  const TuningCpu host_;
  mutable absl::Mutex mutex_;
  // By (structure, cpu, model, features).
  std::map<std::vector<std::string>, TuningRecord> records_ ABSL_GUARDED_BY(mutex_);
  int64_t uses_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t skipped_lines_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace kiln::engine

#endif  // KILN_ENGINE_TUNING_RECORDS_H_
