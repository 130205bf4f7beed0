// Converts a kiln.v1.Graph from the wire into the in-memory IR, once, at the
// boundary: names resolved, attributes typed by each op's parser, the result
// verified (acyclic, arity, sizes). Inputs may declare symbolic dims, fixed
// per import by the caller (the engine compiles one graph per shape). Every
// error is InvalidArgument naming the node or value, except an unknown op,
// which is Unimplemented.
#ifndef KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_
#define KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/model_signature.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/verifier.h"
#include "proto/graph.pb.h"

namespace kiln {

class OpRegistry;

// `input_shapes`, when given, fix inputs' shapes by name: needed for every
// input with a symbolic (-1) dim, which is InvalidArgument otherwise. Each
// must keep the input's rank and fixed dims.
// More than `max_nodes` nodes, constants and inputs: ResourceExhausted (as
// CheckNodeLimit).
absl::StatusOr<Graph> ImportKilnGraph(
    const kiln::v1::Graph& proto, const OpRegistry& ops,
    const std::map<std::string, std::vector<int64_t>>* input_shapes = nullptr,
    int64_t max_nodes = kMaxGraphNodes);

// The graph's inputs as declared, -1 dims and their dim_params included
// (outputs carry no declared shape). InvalidArgument for a dim below -1 or
// more dim_params than dims.
absl::StatusOr<ModelSignature> ReadKilnGraphSignature(const kiln::v1::Graph& proto);

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_
