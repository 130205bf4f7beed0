#include "compiler/timing_instrument.h"

namespace kiln {

void TimingInstrument::RunBeforePass(const Graph&, const PassInfo& info, int depth) {
  PassRecord r;
  r.name = info.name;
  r.depth = depth;
  records_.push_back(r);
  open_.push_back({records_.size() - 1, std::chrono::steady_clock::now()});
}

void TimingInstrument::RunAfterPass(const Graph&, const PassInfo&, int, bool changed) {
  auto [index, start] = open_.back();
  open_.pop_back();
  records_[index].ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  records_[index].changed = changed;
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
