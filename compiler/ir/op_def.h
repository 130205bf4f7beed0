// What an op is: everything the compiler knows about one op, in one entry
// (like TVM's RELAY_REGISTER_OP). Entries live in compiler/ops/.
#ifndef KILN_COMPILER_IR_OP_DEF_H_
#define KILN_COMPILER_IR_OP_DEF_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/attrs.h"
#include "compiler/ir/raw_attrs.h"
#include "compiler/ir/tensor_type.h"

namespace kiln {

struct ConstantData;  // compiler/ir/graph.h

namespace te {
struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;
class ComputeContext;
}  // namespace te

// Fusion pattern kinds, ordered as TVM orders them: FuseOps compares with <.
enum class OpPattern {
  kElemWise = 0,        // out[i] = f(in[i]), same shape
  kBroadcast = 1,       // out[i, j] = f(in[i, j], b[j])
  kInjective = 2,       // each output reads one input element (reshape, transpose)
  kCommReduce = 3,      // reductions
  kOutEWiseFusable = 4, // dense, conv2d: may absorb an elementwise epilogue
  kTuple = 7,
  kOpaque = 8,          // never fused
};

const char* OpPatternName(OpPattern pattern);

// An input whose int64 values index a dim of `size` of another (gather's
// indices into data's axis). See index_range.h for where it is checked.
struct IndexOperand {
  int input = 0;
  int64_t size = 0;
};

struct OpDef {
  std::string name;
  OpPattern pattern = OpPattern::kOpaque;
  int min_inputs = 1;
  int max_inputs = 1;
  // One line for GetServerInfo and error messages.
  std::string summary;
  // Validates and types the raw attributes; InvalidArgument naming the attribute.
  std::function<absl::StatusOr<Attrs>(const RawAttrs&)> parse_attrs;
  // The output type from the input types; InvalidArgument on mismatch.
  std::function<absl::StatusOr<TensorType>(const std::vector<TensorType>&, const Attrs&)>
      infer_type;
  // The output element at ctx.output_indices() as an index expression over the inputs.
  std::function<te::Expr(te::ComputeContext&)> compute;
  // For ops that take indices: which input and the dim size they index
  // (types already inferred). Unset for the rest.
  std::function<std::optional<IndexOperand>(const std::vector<TensorType>&, const Attrs&)>
      index_operand;
  // Optional: the output computed on the host from constant inputs, for
  // FoldConstant, where `compute` would be slow to interpret (nonzero's
  // nested count is n^2 per element; a host loop is n). Writes every byte
  // of `out`, whose type is already inferred. Unset: `compute` is evaluated.
  std::function<void(const std::vector<const ConstantData*>& inputs, const Attrs&,
                     ConstantData& out)>
      fold;
  // Floating-point operations for one evaluation (types inferred), a multiply-add
  // counting two, as TVM's per-op FLOP counters. Unset: the default by pattern
  // (op_cost.h), which is right for elementwise ops and reductions.
  std::function<double(const std::vector<TensorType>& inputs, const TensorType& output,
                       const Attrs&)>
      flops;
};

}  // namespace kiln

#endif  // KILN_COMPILER_IR_OP_DEF_H_
