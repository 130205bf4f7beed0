// Converts a kiln.v1.Graph from the wire into the in-memory IR, once, at the
// boundary: names resolved, attributes typed by each op's parser, the result
// verified (acyclic, arity, sizes). Every error is InvalidArgument naming the
// node or value, except an unknown op, which is Unimplemented.
#ifndef KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_
#define KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "proto/graph.pb.h"

namespace kiln {

class OpRegistry;

absl::StatusOr<Graph> ImportKilnGraph(const kiln::v1::Graph& proto, const OpRegistry& ops);

}  // namespace kiln

#endif  // KILN_COMPILER_FRONTEND_KILN_GRAPH_IMPORTER_H_
