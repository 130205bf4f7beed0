// The plans a tuner times for one contraction, ordered by the schedule's own
// cost estimate so a short search reaches the likely winners first.
#ifndef KILN_COMPILER_LOWER_SCHEDULE_CANDIDATES_H_
#define KILN_COMPILER_LOWER_SCHEDULE_CANDIDATES_H_

#include <vector>

#include "compiler/lower/contraction_plan.h"
#include "compiler/lower/schedule_override.h"

namespace kiln::lower {

struct CandidateOptions {
  int max_candidates = 12;  // besides the estimate's own plan
  // Also vary how channel lanes split pixels among threads (pointless on one).
  bool vary_pixel_parts = false;
};

// The estimate's plan first (as an override with every field set), then up
// to max_candidates other plans PlanContraction accepts for `shape`, each
// distinct: every layout that applies with every legal register tile, by
// estimated cycles, each followed by its K-blocked (or unblocked) twin and,
// when asked, its other pixel splits.
std::vector<ScheduleOverride> ScheduleCandidates(const ContractionShape& shape,
                                                 const CandidateOptions& options = {},
                                                 const ContractionKnobs& knobs = {});

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_SCHEDULE_CANDIDATES_H_
