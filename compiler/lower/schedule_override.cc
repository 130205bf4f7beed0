#include "compiler/lower/schedule_override.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln::lower {

const char* ContractionLayoutName(ContractionLayout layout) {
  switch (layout) {
    case ContractionLayout::kFlatTiles:
      return "flat";
    case ContractionLayout::kRowTiles:
      return "rows";
    case ContractionLayout::kChannelLanes:
      return "lanes";
  }
  return "?";
}

std::string ScheduleOverride::ToString() const {
  std::vector<std::string> parts;
  if (layout) parts.push_back(absl::StrCat("layout=", ContractionLayoutName(*layout)));
  if (mr > 0 || nv > 0) parts.push_back(absl::StrCat("tile=", mr, "x", nv * 16));
  if (k_block_span >= 0) parts.push_back(absl::StrCat("kblock=", k_block_span));
  if (pixel_parts > 0) parts.push_back(absl::StrCat("parts=", pixel_parts));
  return absl::StrJoin(parts, " ");
}

std::optional<ScheduleOverride> ParseScheduleOverride(absl::string_view text) {
  ScheduleOverride o;
  for (absl::string_view field : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return std::nullopt;
    const absl::string_view key = kv[0], value = kv[1];
    if (key == "layout") {
      if (value == "flat") {
        o.layout = ContractionLayout::kFlatTiles;
      } else if (value == "rows") {
        o.layout = ContractionLayout::kRowTiles;
      } else if (value == "lanes") {
        o.layout = ContractionLayout::kChannelLanes;
      } else {
        return std::nullopt;
      }
    } else if (key == "tile") {
      std::vector<absl::string_view> mn = absl::StrSplit(value, 'x');
      int nr = 0;
      if (mn.size() != 2 || !absl::SimpleAtoi(mn[0], &o.mr) || !absl::SimpleAtoi(mn[1], &nr) ||
          o.mr < 1 || nr < 16 || nr % 16 != 0) {
        return std::nullopt;
      }
      o.nv = nr / 16;
    } else if (key == "kblock") {
      if (!absl::SimpleAtoi(value, &o.k_block_span) || o.k_block_span < 0) return std::nullopt;
    } else if (key == "parts") {
      if (!absl::SimpleAtoi(value, &o.pixel_parts) || o.pixel_parts < 1) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace kiln::lower
