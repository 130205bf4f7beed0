// Bytes -> kiln.v1.Graph -> ImportKilnGraph, as CompileModel does with a Kiln
// graph: the signature is read first and every symbolic dim is fixed (to 2)
// for the import, so symbolic graphs get past the shape check too.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/ops/op_registry.h"
#include "proto/graph.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::v1::Graph proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<kiln::ModelSignature> signature = kiln::ReadKilnGraphSignature(proto);
  if (!signature.ok()) return 0;
  std::map<std::string, std::vector<int64_t>> shapes;
  if (signature->IsSymbolic()) {
    for (const kiln::TensorSignature& input : signature->inputs) {
      std::vector<int64_t>& dims = shapes[input.name];
      for (int64_t d : input.dims) {
        dims.push_back(d == kiln::TensorSignature::kSymbolicDim ? 2 : d);
      }
    }
  }
  (void)kiln::ImportKilnGraph(proto, kiln::OpRegistry::Default(), &shapes);
  return 0;
}
