// Reading typed values out of RawAttrs, for the ops' attribute parsers. Each
// getter rejects a wrong kind or an unknown attribute with InvalidArgument.
#ifndef KILN_COMPILER_OPS_ATTR_PARSING_H_
#define KILN_COMPILER_OPS_ATTR_PARSING_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir/attrs.h"
#include "compiler/ir/raw_attrs.h"

namespace kiln {

// InvalidArgument naming the first attribute not in `allowed`.
absl::Status CheckKnownAttrs(const RawAttrs& raw, std::initializer_list<const char*> allowed);
absl::StatusOr<int64_t> GetIntAttr(const RawAttrs& raw, const std::string& name,
                                   int64_t default_value);
absl::StatusOr<std::vector<int64_t>> GetIntsAttr(const RawAttrs& raw, const std::string& name,
                                                 std::vector<int64_t> default_value);
absl::StatusOr<float> GetFloatAttr(const RawAttrs& raw, const std::string& name,
                                   float default_value);
// For ops without attributes: InvalidArgument if any are given.
absl::StatusOr<Attrs> ParseNoAttrs(const RawAttrs& raw);
// conv2d's attributes (strides, padding[2 or 4], dilation, groups), shared by
// the blocked conv2d_nchwc.
absl::StatusOr<Attrs> ParseConv2DAttrs(const RawAttrs& raw);
// Whether the attribute is present.
bool HasAttr(const RawAttrs& raw, const std::string& name);

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_ATTR_PARSING_H_
