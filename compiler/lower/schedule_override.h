// A measured choice that replaces the contraction schedule's estimate for one
// kernel (the tuner's output, engine/tuner.cc). Plain data with a stable text
// form, so it can be stored in tuning records, put in the kernel cache key and
// printed in reports.
#ifndef KILN_COMPILER_LOWER_SCHEDULE_OVERRIDE_H_
#define KILN_COMPILER_LOWER_SCHEDULE_OVERRIDE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln::lower {

// How a contraction maps onto tiles (see contraction_schedule.cc's note).
enum class ContractionLayout { kFlatTiles, kRowTiles, kChannelLanes };

// Each field unset keeps the estimate's choice; PlanContraction ignores an
// override that does not fit the shape, whole, and says why.
struct ScheduleOverride {
  std::optional<ContractionLayout> layout;
  int mr = 0;  // register tile rows; 0: the estimate's tile (mr and nv go together)
  int nv = 0;  // register tile vectors of 16 lanes
  // Values of the outermost reduction variable per K block; 0: no K blocks,
  // -1: the estimate's choice.
  int64_t k_block_span = -1;
  // Parts the channel-lanes pixels split into across threads; 0: the estimate's.
  int64_t pixel_parts = 0;

  bool empty() const {
    return !layout && mr == 0 && nv == 0 && k_block_span < 0 && pixel_parts == 0;
  }
  // "layout=lanes tile=6x32 kblock=4 parts=2", only the fields set; "" when empty.
  std::string ToString() const;
  bool operator==(const ScheduleOverride& o) const { return ToString() == o.ToString(); }
};

// The inverse of ToString; nullopt for text it did not write.
std::optional<ScheduleOverride> ParseScheduleOverride(absl::string_view text);

// "flat", "rows", "lanes".
const char* ContractionLayoutName(ContractionLayout layout);

// The override for a fused group by its canonical structure
// (KernelSpec::canonical), or nullopt to keep the estimate.
using ScheduleOverrideLookup =
    std::function<std::optional<ScheduleOverride>(const std::string& canonical)>;

}  // namespace kiln::lower

#endif  // KILN_COMPILER_LOWER_SCHEDULE_OVERRIDE_H_
