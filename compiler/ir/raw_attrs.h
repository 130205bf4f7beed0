// Attributes as they arrive at the import boundary, before an op's parser turns
// them into its typed struct. Nothing past the importers sees this.
#ifndef KILN_COMPILER_IR_RAW_ATTRS_H_
#define KILN_COMPILER_IR_RAW_ATTRS_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

using RawAttrValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;
using RawAttrs = std::map<std::string, RawAttrValue>;

}  // namespace kiln

#endif  // KILN_COMPILER_IR_RAW_ATTRS_H_
