#include "compiler/pass/timing_instrument.h"

#include "common/ms_since.h"

namespace kiln {

void TimingInstrument::RunBeforePass(const PassInfo& info, int depth) {
  PassRecord r;
  r.name = info.name;
  r.depth = depth;
  records_.push_back(r);
  open_.push_back({records_.size() - 1, std::chrono::steady_clock::now(), 0});
}

void TimingInstrument::RunAfterPass(const PassInfo&, int, bool changed, PrintIr) {
  Open done = open_.back();
  open_.pop_back();
  PassRecord& r = records_[done.index];
  r.ms = MsSince(done.start);
  r.self_ms = r.ms - done.children_ms;
  r.changed = changed;
  if (!open_.empty()) open_.back().children_ms += r.ms;
}

void TimingInstrument::OnSkippedPass(const PassInfo& info, int depth, const std::string& reason) {
  PassRecord r;
  r.name = info.name;
  r.depth = depth;
  r.skipped = true;
  r.skip_reason = reason;
  records_.push_back(r);
}

}  // namespace kiln
