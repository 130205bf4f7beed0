// The output dims of a model with symbolic inputs whose outputs declare no
// shape (a kiln.v1.Graph names its outputs only; an ONNX output may leave
// its shape out): which dims follow the symbols, found by typing the graph
// at two sizes of every symbol. What ModelMetadata reports (-1 for those)
// and what dynamic batching checks its batch axis against.
#ifndef KILN_COMPILER_DRIVER_OUTPUT_DIMS_H_
#define KILN_COMPILER_DRIVER_OUTPUT_DIMS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"

namespace kiln {

// Input shapes by input name.
using InputShapes = std::map<std::string, std::vector<int64_t>>;
using ImportAtShapes = std::function<absl::StatusOr<Graph>(const InputShapes& shapes,
                                                           const InputShapes& values)>;

// Fills the dims of `signature`'s outputs that declare no shape: the graph
// is imported and typed at `load` and again with every symbolic input dim
// larger (each named symbol by its own step); a dim that moves is symbolic,
// named after the symbol whose size it takes both times, if one does.
// Shapes already declared stay.
absl::Status FillOutputDims(ModelSignature& signature, const ImportAtShapes& import_at,
                            const InputShapes& load);

}  // namespace kiln

#endif  // KILN_COMPILER_DRIVER_OUTPUT_DIMS_H_
