#include "compiler/frontend/kiln_graph_importer.h"

#include <algorithm>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/ir/verifier.h"
#include "compiler/ops/op_registry.h"

namespace kiln {
namespace {

absl::StatusOr<DType> ConvertDType(kiln::v1::DataType dtype, const std::string& what) {
  switch (dtype) {
    case kiln::v1::FLOAT32:
      return DType::kFloat32;
    case kiln::v1::INT64:
      return DType::kInt64;
    case kiln::v1::FLOAT16:
      return DType::kFloat16;
    case kiln::v1::BFLOAT16:
      return DType::kBFloat16;
    case kiln::v1::FLOAT64:
      return DType::kFloat64;
    case kiln::v1::INT8:
      return DType::kInt8;
    case kiln::v1::UINT8:
      return DType::kUInt8;
    case kiln::v1::INT16:
      return DType::kInt16;
    case kiln::v1::UINT16:
      return DType::kUInt16;
    case kiln::v1::INT32:
      return DType::kInt32;
    case kiln::v1::UINT32:
      return DType::kUInt32;
    case kiln::v1::UINT64:
      return DType::kUInt64;
    case kiln::v1::BOOL:
      return DType::kBool;
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, " has unsupported dtype ",
                                                     kiln::v1::DataType_Name(dtype)));
  }
}

absl::StatusOr<TensorType> ConvertType(kiln::v1::DataType dtype,
                                       const google::protobuf::RepeatedField<int64_t>& dims,
                                       const std::string& what) {
  TensorType type;
  KILN_ASSIGN_OR_RETURN(type.dtype, ConvertDType(dtype, what));
  type.shape.assign(dims.begin(), dims.end());
  absl::StatusOr<int64_t> n = CheckedNumElements(type.shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
  return type;
}

absl::StatusOr<RawAttrs> ConvertAttrs(const kiln::v1::Node& node) {
  RawAttrs raw;
  for (const auto& [name, value] : node.attributes()) {
    switch (value.value_case()) {
      case kiln::v1::AttributeValue::kI:
        raw[name] = value.i();
        break;
      case kiln::v1::AttributeValue::kF:
        raw[name] = value.f();
        break;
      case kiln::v1::AttributeValue::kS:
        raw[name] = value.s();
        break;
      case kiln::v1::AttributeValue::kInts:
        raw[name] = std::vector<int64_t>(value.ints().values().begin(),
                                         value.ints().values().end());
        break;
      case kiln::v1::AttributeValue::kFloats:
        raw[name] = std::vector<float>(value.floats().values().begin(),
                                       value.floats().values().end());
        break;
      case kiln::v1::AttributeValue::VALUE_NOT_SET:
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' has no value"));
    }
  }
  return raw;
}

}  // namespace

absl::StatusOr<ModelSignature> ReadKilnGraphSignature(const kiln::v1::Graph& proto) {
  ModelSignature signature;
  for (const kiln::v1::ValueInfo& in : proto.inputs()) {
    TensorSignature t;
    t.name = in.name();
    KILN_ASSIGN_OR_RETURN(t.dtype,
                          ConvertDType(in.dtype(), absl::StrCat("input '", in.name(), "'")));
    if (in.dim_params_size() > in.dims_size()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name(), "' has ",
                                                     in.dim_params_size(), " dim_params for ",
                                                     in.dims_size(), " dims"));
    }
    for (int d = 0; d < in.dims_size(); ++d) {
      const int64_t size = in.dims(d);
      if (size < TensorSignature::kSymbolicDim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name(), "' dim ", d, " is ", size, " (a size, or -1 for symbolic)"));
      }
      const std::string param = d < in.dim_params_size() ? in.dim_params(d) : "";
      if (!param.empty() && size != TensorSignature::kSymbolicDim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name(), "' dim ", d, " names symbol '", param,
            "' but has the fixed size ", size, "; a named dim needs -1"));
      }
      t.dims.push_back(size);
      t.symbols.push_back(param);
    }
    signature.inputs.push_back(std::move(t));
  }
  for (const std::string& out : proto.outputs()) {
    TensorSignature t;
    t.name = out;
    t.has_shape = false;
    signature.outputs.push_back(std::move(t));
  }
  return signature;
}

absl::StatusOr<Graph> ImportKilnGraph(
    const kiln::v1::Graph& proto, const OpRegistry& ops,
    const std::map<std::string, std::vector<int64_t>>* input_shapes, int64_t max_nodes) {
  KILN_RETURN_IF_ERROR(
      CheckNodeLimit(int64_t{proto.nodes_size()} + proto.constants_size() + proto.inputs_size(),
                     std::min(max_nodes, kMaxGraphNodes)));
  Graph graph;
  graph.name = proto.name();
  std::unordered_map<std::string, Node*> values;
  auto define = [&](const std::string& name, Node* node) -> absl::Status {
    if (name.empty()) return absl::InvalidArgumentError("a value has an empty name");
    if (!values.emplace(name, node).second) {
      return absl::InvalidArgumentError(absl::StrCat("value '", name, "' is defined twice"));
    }
    return absl::OkStatus();
  };

  for (const kiln::v1::ValueInfo& in : proto.inputs()) {
    const std::string what = absl::StrCat("input '", in.name(), "'");
    google::protobuf::RepeatedField<int64_t> dims = in.dims();
    const auto fixed = input_shapes != nullptr ? input_shapes->find(in.name())
                                               : std::map<std::string, std::vector<int64_t>>::
                                                     const_iterator();
    if (input_shapes != nullptr && fixed != input_shapes->end()) {
      if (static_cast<int>(fixed->second.size()) != dims.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " has rank ", dims.size(), ", given shape ", ShapeToString(fixed->second)));
      }
      for (int d = 0; d < dims.size(); ++d) {
        if (dims[d] != TensorSignature::kSymbolicDim && dims[d] != fixed->second[d]) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, " dim ", d, " is ", dims[d], ", given ", fixed->second[d]));
        }
        dims[d] = fixed->second[d];
      }
    }
    for (int d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " dim ", d, " is ", dims[d],
            dims[d] == TensorSignature::kSymbolicDim ? " (symbolic) and no shape fixes it" : ""));
      }
    }
    KILN_ASSIGN_OR_RETURN(TensorType type, ConvertType(in.dtype(), dims, what));
    KILN_RETURN_IF_ERROR(define(in.name(), graph.AddInput(in.name(), std::move(type))));
  }
  for (const kiln::v1::Tensor& c : proto.constants()) {
    const std::string what = absl::StrCat("constant '", c.name(), "'");
    KILN_ASSIGN_OR_RETURN(TensorType type, ConvertType(c.dtype(), c.dims(), what));
    const int64_t expected = type.ByteSize();
    if (static_cast<int64_t>(c.raw_data().size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(what, " of type ", type.ToString(),
                                                     " needs ", expected, " bytes of raw_data, got ",
                                                     c.raw_data().size()));
    }
    auto data = std::make_shared<ConstantData>();
    data->type = type;
    data->bytes = c.raw_data();
    KILN_RETURN_IF_ERROR(define(c.name(), graph.AddConstant(c.name(), std::move(data))));
  }

  // Nodes may be listed in any order: create them all, then resolve inputs by name.
  std::vector<std::pair<const kiln::v1::Node*, Node*>> created;
  for (const kiln::v1::Node& n : proto.nodes()) {
    const std::string what = absl::StrCat("node '", n.name(), "' (", n.op(), ")");
    const OpDef* op = ops.Find(n.op());
    if (op == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat(what, ": unknown op '", n.op(), "'; GetServerInfo lists the supported ops"));
    }
    KILN_ASSIGN_OR_RETURN(RawAttrs raw, ConvertAttrs(n));
    absl::StatusOr<Attrs> attrs = op->parse_attrs(raw);
    if (!attrs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", attrs.status().message()));
    }
    Node* node = graph.AddOp(n.name(), op, {}, *std::move(attrs));
    KILN_RETURN_IF_ERROR(define(n.name(), node));
    created.push_back({&n, node});
  }
  for (auto& [proto_node, node] : created) {
    for (const std::string& in : proto_node->inputs()) {
      auto it = values.find(in);
      if (it == values.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", proto_node->name(), "' reads '", in,
            "', which no graph input, constant or node defines"));
      }
      node->inputs.push_back(it->second);
    }
  }
  for (const std::string& out : proto.outputs()) {
    auto it = values.find(out);
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", out, "' is not defined"));
    }
    graph.AddOutput(it->second);
  }
  KILN_RETURN_IF_ERROR(VerifyGraph(graph));
  return graph;
}

}  // namespace kiln
