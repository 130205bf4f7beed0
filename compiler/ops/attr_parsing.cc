#include "compiler/ops/attr_parsing.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kiln {

absl::Status CheckKnownAttrs(const RawAttrs& raw, std::initializer_list<const char*> allowed) {
  for (const auto& [name, value] : raw) {
    bool known = false;
    for (const char* a : allowed) known |= name == a;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown attribute '", name, "' (expected one of: ",
                       allowed.size() ? absl::StrJoin(allowed, ", ") : "none", ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Attrs> ParseNoAttrs(const RawAttrs& raw) {
  absl::Status known = CheckKnownAttrs(raw, {});
  if (!known.ok()) return known;
  return Attrs(NoAttrs{});
}

bool HasAttr(const RawAttrs& raw, const std::string& name) { return raw.count(name) > 0; }

namespace {

// No op's integer attribute (axis, stride, pad, size, repeat) is anywhere
// near this in a real model; within it, shape arithmetic on the attribute
// and a dim cannot overflow int64 (issue 20: pads of INT64_MAX wrapped to a
// valid shape and compiled).
constexpr int64_t kMaxIntAttr = int64_t{1} << 31;

absl::Status CheckIntAttr(const std::string& name, int64_t v) {
  if (v <= kMaxIntAttr && v >= -kMaxIntAttr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", name, "' = ", v, " is out of range (|value| <= 2^31)"));
}

}  // namespace

absl::StatusOr<int64_t> GetIntAttr(const RawAttrs& raw, const std::string& name,
                                   int64_t default_value) {
  auto it = raw.find(name);
  if (it == raw.end()) return default_value;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) {
    if (absl::Status s = CheckIntAttr(name, *v); !s.ok()) return s;
    return *v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", name, "' must be an integer"));
}

absl::StatusOr<float> GetFloatAttr(const RawAttrs& raw, const std::string& name,
                                   float default_value) {
  auto it = raw.find(name);
  if (it == raw.end()) return default_value;
  if (const float* v = std::get_if<float>(&it->second)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<float>(*v);
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be a number"));
}

absl::StatusOr<std::vector<int64_t>> GetIntsAttr(const RawAttrs& raw, const std::string& name,
                                                 std::vector<int64_t> default_value) {
  auto it = raw.find(name);
  if (it == raw.end()) return default_value;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) {
    for (int64_t x : *v) {
      if (absl::Status s = CheckIntAttr(name, x); !s.ok()) return s;
    }
    return *v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", name, "' must be a list of integers"));
}

absl::StatusOr<Attrs> ParseConv2DAttrs(const RawAttrs& raw) {
  KILN_RETURN_IF_ERROR(CheckKnownAttrs(raw, {"strides", "padding", "dilation", "groups"}));
  Conv2DAttrs a;
  KILN_ASSIGN_OR_RETURN(a.strides, GetIntsAttr(raw, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.padding, GetIntsAttr(raw, "padding", {0, 0, 0, 0}));
  KILN_ASSIGN_OR_RETURN(a.dilation, GetIntsAttr(raw, "dilation", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.groups, GetIntAttr(raw, "groups", 1));
  if (a.padding.size() == 2) a.padding = {a.padding[0], a.padding[1], a.padding[0], a.padding[1]};
  if (a.strides.size() != 2 || a.dilation.size() != 2 || a.padding.size() != 4) {
    return absl::InvalidArgumentError(
        "conv2d wants strides[2], dilation[2] and padding[2 or 4]");
  }
  for (int64_t v : a.strides) {
    if (v < 1) return absl::InvalidArgumentError("conv2d strides must be >= 1");
  }
  for (int64_t v : a.dilation) {
    if (v < 1) return absl::InvalidArgumentError("conv2d dilation must be >= 1");
  }
  for (int64_t v : a.padding) {
    if (v < 0) return absl::InvalidArgumentError("conv2d padding must be >= 0");
  }
  if (a.groups < 1) return absl::InvalidArgumentError("conv2d groups must be >= 1");
  return Attrs(a);
}

}  // namespace kiln
