// Tuning records on disk: <cache dir>/tuning_records.tsv, next to the kernel
// cache's entries, one line per record after a header line:
//   kiln-tuning-records <TAB> 1
//   structure cpu model features override kernel default_schedule
//   tuned_schedule default_us tuned_us candidates        (tab-separated)
// Text, so a user can read what was tuned where, and small (one line per
// distinct kernel and CPU). Every Put rewrites the whole file durably
// (common/durable_file.h: a reader, or a restart after a crash, sees the old
// or the new file). Processes sharing the directory (replicas, `kiln tune`
// against two servers) each hold their own copy in memory, so a Put re-reads
// the file under an inter-process lock and merges before writing: the file's
// records win except the one being put, and none is lost to a concurrent
// writer. Records of other CPUs are kept: a cache directory shared by, or
// copied between, machines carries each one's records, and each uses only its
// own.
#include "engine/tuning_records.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/durable_file.h"
#include "common/sha256.h"

namespace kiln::engine {
namespace {

constexpr char kFileName[] = "tuning_records.tsv";
constexpr char kLockSuffix[] = ".lock";
constexpr char kHeader[] = "kiln-tuning-records\t1";
constexpr int kFields = 11;

std::vector<std::string> KeyOf(const std::string& structure, const TuningCpu& cpu) {
  return {structure, cpu.cpu, cpu.model, cpu.features};
}

std::string Field(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"\t", " "}, {"\n", " "}, {"\r", " "}});
}

std::string Line(const TuningRecord& r) {
  return absl::StrJoin(
      {Field(r.structure), Field(r.cpu.cpu), Field(r.cpu.model), Field(r.cpu.features),
       Field(r.schedule_override), Field(r.kernel), Field(r.default_schedule),
       Field(r.tuned_schedule), absl::StrCat(r.default_us), absl::StrCat(r.tuned_us),
       absl::StrCat(r.candidates)},
      "\t");
}

std::optional<TuningRecord> ParseLine(absl::string_view line) {
  std::vector<std::string> f = absl::StrSplit(line, '\t');
  if (f.size() != kFields || f[0].size() != 64) return std::nullopt;
  TuningRecord r;
  r.structure = f[0];
  r.cpu = {f[1], f[2], f[3]};
  r.schedule_override = f[4];
  r.kernel = f[5];
  r.default_schedule = f[6];
  r.tuned_schedule = f[7];
  if (!absl::SimpleAtod(f[8], &r.default_us) || !absl::SimpleAtod(f[9], &r.tuned_us) ||
      !absl::SimpleAtoi(f[10], &r.candidates) ||
      !lower::ParseScheduleOverride(r.schedule_override)) {
    return std::nullopt;
  }
  return r;
}

using RecordMap = std::map<std::vector<std::string>, TuningRecord>;

// Reads the records in `path` into `records` (a missing file or another
// format is none); counts unreadable lines in `skipped`.
void ReadFile(const std::string& path, RecordMap* records, int64_t* skipped) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kHeader) return;
  while (std::getline(in, line)) {
    std::optional<TuningRecord> r = ParseLine(line);
    if (!r) {
      ++*skipped;
      continue;
    }
    (*records)[KeyOf(r->structure, r->cpu)] = *std::move(r);
  }
}

}  // namespace

std::string TuningStructureKey(const std::string& canonical) { return Sha256Hex(canonical); }

TuningRecords::TuningRecords(std::string dir, TuningCpu host)
    : dir_(std::move(dir)), host_(std::move(host)) {
  if (dir_.empty()) return;
  absl::MutexLock lock(&mutex_);
  ReadFile(path(), &records_, &skipped_lines_);
}

std::string TuningRecords::path() const {
  return dir_.empty() ? "" : absl::StrCat(dir_, "/", kFileName);
}

std::optional<lower::ScheduleOverride> TuningRecords::Lookup(const std::string& canonical) {
  absl::MutexLock lock(&mutex_);
  if (records_.empty()) return std::nullopt;
  auto it = records_.find(KeyOf(TuningStructureKey(canonical), host_));
  if (it == records_.end()) return std::nullopt;
  std::optional<lower::ScheduleOverride> o =
      lower::ParseScheduleOverride(it->second.schedule_override);
  if (o && !o->empty()) ++uses_;
  return o;
}

std::optional<TuningRecord> TuningRecords::Find(const std::string& structure) const {
  absl::ReaderMutexLock lock(&mutex_);
  auto it = records_.find(KeyOf(structure, host_));
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

absl::Status TuningRecords::Put(const TuningRecord& record) {
  absl::MutexLock lock(&mutex_);
  const std::vector<std::string> key = KeyOf(record.structure, record.cpu);
  if (dir_.empty()) {
    records_[key] = record;
    return absl::OkStatus();
  }
  FileLock file_lock(absl::StrCat(path(), kLockSuffix));
  // What other processes wrote since this one last read, over what only this
  // one holds (records whose write failed); then the new record.
  RecordMap merged;
  int64_t skipped = 0;
  ReadFile(path(), &merged, &skipped);
  merged.insert(records_.begin(), records_.end());  // keeps the file's where both have one
  merged[key] = record;
  records_ = std::move(merged);
  return Write();
}

absl::Status TuningRecords::Write() const {
  if (dir_.empty()) return absl::OkStatus();
  std::ostringstream text;
  text << kHeader << "\n";
  for (const auto& [key, r] : records_) text << Line(r) << "\n";
  absl::Status written = WriteFileDurably(path(), text.str());
  if (!written.ok()) {
    return absl::InternalError(absl::StrCat("tuning records: ", written.message()));
  }
  return absl::OkStatus();
}

std::vector<TuningRecord> TuningRecords::All() const {
  absl::ReaderMutexLock lock(&mutex_);
  std::vector<TuningRecord> all;
  for (const auto& [key, r] : records_) all.push_back(r);
  return all;
}

int64_t TuningRecords::uses() const {
  absl::ReaderMutexLock lock(&mutex_);
  return uses_;
}

int64_t TuningRecords::skipped_lines() const {
  absl::ReaderMutexLock lock(&mutex_);
  return skipped_lines_;
}

}  // namespace kiln::engine
