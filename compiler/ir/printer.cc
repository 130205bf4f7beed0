#include "compiler/ir/printer.h"

#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/ir/op_def.h"

namespace kiln {

std::string PrintGraph(const Graph& graph) {
  std::unordered_map<const Node*, std::string> names;
  std::vector<std::string> params;
  for (const Node* in : graph.inputs()) {
    names[in] = absl::StrCat("%", in->name);
    params.push_back(absl::StrCat(names[in], ": ", in->type.ToString()));
  }
  std::string body;
  int next = 0;
  for (const Node* n : graph.TopologicalOrder()) {
    if (n->is_input()) continue;
    if (n->is_constant()) {
      names[n] = absl::StrCat("%", n->name);
      absl::StrAppend(&body, "  ", names[n], " = constant(", n->type.ToString(), ")\n");
      continue;
    }
    names[n] = absl::StrCat("%", next++);
    std::vector<std::string> args;
    for (const Node* in : n->inputs) args.push_back(names[in]);
    std::string attrs = AttrsToString(n->attrs);
    absl::StrAppend(&body, "  ", names[n], " = ", n->op->name, "(", absl::StrJoin(args, ", "),
                    attrs.empty() ? "" : ", ", attrs, ")",
                    n->type_known ? absl::StrCat(" : ", n->type.ToString()) : "", "  /* ",
                    n->name, " */\n");
  }
  std::vector<std::string> outs;
  for (const Node* o : graph.outputs()) outs.push_back(names[o]);
  return absl::StrCat("def @", graph.name.empty() ? "main" : graph.name, "(",
                      absl::StrJoin(params, ", "), ") {\n", body, "  return (",
                      absl::StrJoin(outs, ", "), ")\n}\n");
}

}  // namespace kiln
