// The table of ops every pass consults. Entries are added by explicit
// Register*Ops functions (never static initializers, which Bazel's linker may
// drop); Default() holds every built-in op.
#ifndef KILN_COMPILER_OPS_OP_REGISTRY_H_
#define KILN_COMPILER_OPS_OP_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compiler/ir/op_def.h"

namespace kiln {

class OpRegistry {
 public:
  // Adds `def`; a second op with the same name is a bug (KILN_CHECK).
  void Register(OpDef def);
  // Null when no op has that name.
  const OpDef* Find(absl::string_view name) const;
  // Every registered name, sorted.
  std::vector<std::string> Names() const;

  // The registry with every built-in op, built once, thread-safely.
  static const OpRegistry& Default();

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_OPS_OP_REGISTRY_H_
