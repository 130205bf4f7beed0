#include "compiler/lower/schedule_candidates.h"

#include <algorithm>
#include <set>
#include <string>

namespace kiln::lower {
namespace {

using Layout = ContractionPlan::Layout;

struct Candidate {
  ScheduleOverride o;
  double cost = 0;  // estimated cycles; a stable sort keeps variants after their base
};

}  // namespace

std::vector<ScheduleOverride> ScheduleCandidates(const ContractionShape& shape,
                                                 const CandidateOptions& options,
                                                 const ContractionKnobs& knobs) {
  const ScheduleOverride estimate = OverrideOf(PlanContraction(shape, knobs));
  std::vector<Candidate> all;
  auto add = [&](const ScheduleOverride& o, double cost) {
    std::string ignored;
    const ContractionPlan p = PlanContraction(shape, knobs, &o, &ignored);
    if (!ignored.empty()) return;
    all.push_back({OverrideOf(p), cost});
  };
  for (Layout layout : {Layout::kFlatTiles, Layout::kRowTiles, Layout::kChannelLanes}) {
    bool layout_applies = true;
    for (int mr = 1; mr <= kMaxTileRows && layout_applies; ++mr) {
      for (int nv = 1; nv <= kMaxTileVectors; ++nv) {
        if (!TileIsLegal(mr, nv)) continue;
        ScheduleOverride o;
        o.layout = layout;
        o.mr = mr;
        o.nv = nv;
        std::string ignored;
        const ContractionPlan p = PlanContraction(shape, knobs, &o, &ignored);
        // A legal tile with nothing else forced is refused only for its layout.
        if (!ignored.empty()) {
          layout_applies = false;
          break;
        }
        // Tile costs are per batch element except the channel lanes'.
        const double cost = p.tile.cost * (layout == Layout::kChannelLanes ? 1 : shape.batch);
        all.push_back({OverrideOf(p), cost});
        // The K blocks the estimate did not choose: none where it chose
        // some, else the L1 target's span without the estimate's thresholds.
        ScheduleOverride twin = o;
        twin.k_block_span =
            p.k_block_span > 0 ? 0 : LargestKBlockSpan(p, knobs.k_block_bytes / (p.tile.nr() * 4));
        if (twin.k_block_span != p.k_block_span) add(twin, cost);
        if (options.vary_pixel_parts && layout == Layout::kChannelLanes &&
            p.loop_order == ContractionPlan::LoopOrder::kTilesInParallel) {
          for (int64_t parts : {1, 2, 4}) {
            ScheduleOverride split = o;
            split.pixel_parts = parts;
            if (parts != p.pixel_parts) add(split, cost);
          }
        }
      }
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
  std::vector<ScheduleOverride> out = {estimate};
  std::set<std::string> seen = {estimate.ToString()};
  for (const Candidate& c : all) {
    if (static_cast<int>(out.size()) > options.max_candidates) break;
    if (seen.insert(c.o.ToString()).second) out.push_back(c.o);
  }
  return out;
}

}  // namespace kiln::lower
