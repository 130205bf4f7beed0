#include "compiler/ops/op_registry.h"

#include "common/status_macros.h"
#include "compiler/ops/register_ops.h"

namespace kiln {

void OpRegistry::Register(OpDef def) {
  KILN_CHECK(!ops_.count(def.name));
  std::string name = def.name;
  ops_.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::Find(absl::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

const OpRegistry& OpRegistry::Default() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterElementwiseOps(*r);
    RegisterNnOps(*r);
    RegisterTransformOps(*r);
    RegisterReduceOps(*r);
    RegisterMathOps(*r);
    RegisterScanAndBitOps(*r);
    RegisterEinsumOp(*r);
    RegisterIndexOps(*r);
    RegisterGridSampleOp(*r);
    RegisterConvTransposeOp(*r);
    RegisterQuantizedConvOp(*r);
    RegisterValueShapeOps(*r);
    RegisterAttentionOp(*r);
    RegisterQuantizedMatMulOp(*r);
    RegisterLayoutOps(*r);
    return r;
  }();
  return *registry;
}

}  // namespace kiln
