// Design note. nlohmann::json is used without exceptions: parse() with
// allow_exceptions=false, every get<>() after its type is checked, and dump()
// replacing invalid UTF-8 (client text such as model names is echoed). JSON
// tensor data may be nested (row-major) or flat; it is flattened and checked
// against the shape here, then encoded little-endian into
// raw_input_contents, where DecodeInputs checks it as it checks gRPC's.
#include "server/http/kserve_json.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/half_float.h"
#include "compiler/ir/dtype.h"
#include "nlohmann/json.hpp"
#include "server/kserve_datatype.h"

namespace kiln::server {
namespace {

using Json = nlohmann::json;

// Nesting deeper than any tensor's rank: refused rather than recursed into.
constexpr int kMaxDataDepth = 32;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// `data`'s leaves in row-major order.
absl::Status Flatten(const Json& data, int depth, std::vector<const Json*>* out) {
  if (!data.is_array()) {
    out->push_back(&data);
    return absl::OkStatus();
  }
  if (depth > kMaxDataDepth) return Invalid("data is nested deeper than any tensor's rank");
  for (const Json& item : data) {
    if (absl::Status s = Flatten(item, depth + 1, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

template <typename T>
void AppendBytes(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

template <typename T>
absl::Status AppendInteger(const Json& v, const std::string& where, std::string* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return Invalid(absl::StrCat(where, ": ", u, " is out of range"));
    }
    AppendBytes(static_cast<T>(u), out);
    return absl::OkStatus();
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) return Invalid(absl::StrCat(where, ": ", i, " is out of range"));
      if (static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Invalid(absl::StrCat(where, ": ", i, " is out of range"));
      }
    } else {
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return Invalid(absl::StrCat(where, ": ", i, " is out of range"));
      }
    }
    AppendBytes(static_cast<T>(i), out);
    return absl::OkStatus();
  }
  return Invalid(absl::StrCat(where, ": expected an integer, got ", Dump(v)));
}

absl::Status AppendValue(const Json& v, DType dtype, const std::string& where, std::string* out) {
  switch (dtype) {
    case DType::kBool:
      if (!v.is_boolean()) return Invalid(absl::StrCat(where, ": expected true or false"));
      out->push_back(v.get<bool>() ? 1 : 0);
      return absl::OkStatus();
    case DType::kInt8:
      return AppendInteger<int8_t>(v, where, out);
    case DType::kInt16:
      return AppendInteger<int16_t>(v, where, out);
    case DType::kInt32:
      return AppendInteger<int32_t>(v, where, out);
    case DType::kInt64:
      return AppendInteger<int64_t>(v, where, out);
    case DType::kUInt8:
      return AppendInteger<uint8_t>(v, where, out);
    case DType::kUInt16:
      return AppendInteger<uint16_t>(v, where, out);
    case DType::kUInt32:
      return AppendInteger<uint32_t>(v, where, out);
    case DType::kUInt64:
      return AppendInteger<uint64_t>(v, where, out);
    default:
      break;
  }
  if (!v.is_number()) return Invalid(absl::StrCat(where, ": expected a number, got ", Dump(v)));
  const double d = v.get<double>();
  switch (dtype) {
    case DType::kFloat16:
      AppendBytes(FloatToHalf(static_cast<float>(d)), out);
      return absl::OkStatus();
    case DType::kBFloat16:
      AppendBytes(FloatToBFloat16(static_cast<float>(d)), out);
      return absl::OkStatus();
    case DType::kFloat32:
      AppendBytes(static_cast<float>(d), out);
      return absl::OkStatus();
    case DType::kFloat64:
      AppendBytes(d, out);
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(absl::StrCat(where, ": datatype not served"));
  }
}

// A JSON parameter value as the protocol's InferParameter.
absl::StatusOr<inference::InferParameter> ToParameter(const Json& v, const std::string& where) {
  inference::InferParameter p;
  if (v.is_boolean()) {
    p.set_bool_param(v.get<bool>());
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      p.set_int64_param(static_cast<int64_t>(u));
    } else {
      p.set_uint64_param(u);
    }
  } else if (v.is_number_integer()) {
    p.set_int64_param(v.get<int64_t>());
  } else if (v.is_number_float()) {
    p.set_double_param(v.get<double>());
  } else if (v.is_string()) {
    p.set_string_param(v.get<std::string>());
  } else {
    return Invalid(absl::StrCat(where, " must be a bool, number or string"));
  }
  return p;
}

absl::Status ParseParameters(const Json& object, const std::string& where,
                             google::protobuf::Map<std::string, inference::InferParameter>* out) {
  if (!object.is_object()) return Invalid(absl::StrCat(where, " must be an object"));
  for (auto it = object.begin(); it != object.end(); ++it) {
    absl::StatusOr<inference::InferParameter> p =
        ToParameter(it.value(), absl::StrCat(where, ".", it.key()));
    if (!p.ok()) return p.status();
    (*out)[it.key()] = *std::move(p);
  }
  return absl::OkStatus();
}

Json FromParameter(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return p.bool_param();
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kStringParam:
      return p.string_param();
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return nullptr;
  }
}

// The product of `shape`'s dims; InvalidArgument for a negative dim or an
// overflow.
absl::StatusOr<int64_t> Elements(const google::protobuf::RepeatedField<int64_t>& shape,
                                 const std::string& where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Invalid(absl::StrCat(where, " has a negative dim"));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return Invalid(absl::StrCat(where, "'s shape has too many elements"));
    }
    n *= d;
  }
  return n;
}

absl::Status ParseInput(const Json& in, size_t index, absl::string_view binary, size_t* binary_used,
                        inference::ModelInferRequest* request) {
  std::string where = absl::StrCat("inputs[", index, "]");
  if (!in.is_object()) return Invalid(absl::StrCat(where, " must be an object"));
  auto name = in.find("name");
  if (name == in.end() || !name->is_string()) {
    return Invalid(absl::StrCat(where, " needs a string 'name'"));
  }
  where = absl::StrCat("input '", name->get<std::string>(), "'");
  auto* tensor = request->add_inputs();
  tensor->set_name(name->get<std::string>());
  auto datatype = in.find("datatype");
  if (datatype == in.end() || !datatype->is_string()) {
    return Invalid(absl::StrCat(where, " needs a string 'datatype'"));
  }
  tensor->set_datatype(datatype->get<std::string>());
  absl::StatusOr<DType> dtype = DTypeFromDatatype(tensor->datatype(), where);
  if (!dtype.ok()) return dtype.status();
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array()) {
    return Invalid(absl::StrCat(where, " needs a 'shape' array"));
  }
  for (const Json& d : *shape) {
    if (!d.is_number_integer()) return Invalid(absl::StrCat(where, "'s shape must be integers"));
    tensor->add_shape(d.get<int64_t>());
  }
  absl::StatusOr<int64_t> elements = Elements(tensor->shape(), where);
  if (!elements.ok()) return elements.status();
  std::optional<uint64_t> binary_size;
  if (auto params = in.find("parameters"); params != in.end()) {
    if (absl::Status s =
            ParseParameters(*params, where + "'s parameters", tensor->mutable_parameters());
        !s.ok()) {
      return s;
    }
    auto size = tensor->parameters().find("binary_data_size");
    if (size != tensor->parameters().end()) {
      if (size->second.parameter_choice_case() != inference::InferParameter::kInt64Param ||
          size->second.int64_param() < 0) {
        return Invalid(absl::StrCat(where, "'s binary_data_size must be a non-negative integer"));
      }
      binary_size = static_cast<uint64_t>(size->second.int64_param());
    }
  }
  std::string* raw = request->add_raw_input_contents();
  auto data = in.find("data");
  if (binary_size) {
    if (data != in.end()) {
      return Invalid(absl::StrCat(where, " has both 'data' and binary_data_size"));
    }
    if (*binary_size > binary.size() - *binary_used) {
      return Invalid(absl::StrCat(where, "'s binary_data_size ", *binary_size, " runs past the ",
                                  binary.size(), " bytes of binary data after the JSON header"));
    }
    const absl::string_view chunk = binary.substr(*binary_used, *binary_size);
    raw->assign(chunk.data(), chunk.size());
    *binary_used += *binary_size;
    return absl::OkStatus();
  }
  if (data == in.end()) {
    return Invalid(absl::StrCat(where, " needs 'data' (or a binary_data_size parameter)"));
  }
  std::vector<const Json*> values;
  if (absl::Status s = Flatten(*data, 0, &values); !s.ok()) {
    return Invalid(absl::StrCat(where, ": ", s.message()));
  }
  if (static_cast<int64_t>(values.size()) != *elements) {
    return Invalid(absl::StrCat(where, " has ", values.size(), " values for a shape of ", *elements,
                                " elements"));
  }
  raw->reserve(values.size() * DTypeSize(*dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (absl::Status s = AppendValue(*values[i], *dtype, absl::StrCat(where, " value ", i), raw);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Whether `parameters` holds `name` as true.
bool IsTrue(const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
            const std::string& name) {
  auto it = parameters.find(name);
  return it != parameters.end() &&
         it->second.parameter_choice_case() == inference::InferParameter::kBoolParam &&
         it->second.bool_param();
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element `i` of `bytes` (of `dtype`) as a JSON value.
Json ElementAt(DType dtype, const char* p) {
  switch (dtype) {
    case DType::kBool:
      return *p != 0;
    case DType::kInt8:
      return Load<int8_t>(p);
    case DType::kInt16:
      return Load<int16_t>(p);
    case DType::kInt32:
      return Load<int32_t>(p);
    case DType::kInt64:
      return Load<int64_t>(p);
    case DType::kUInt8:
      return Load<uint8_t>(p);
    case DType::kUInt16:
      return Load<uint16_t>(p);
    case DType::kUInt32:
      return Load<uint32_t>(p);
    case DType::kUInt64:
      return Load<uint64_t>(p);
    case DType::kFloat16:
      return static_cast<double>(HalfToFloat(Load<uint16_t>(p)));
    case DType::kBFloat16:
      return static_cast<double>(BFloat16ToFloat(Load<uint16_t>(p)));
    case DType::kFloat32:
      return static_cast<double>(Load<float>(p));
    case DType::kFloat64:
      return Load<double>(p);
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<inference::ModelInferRequest> ParseInferRequest(absl::string_view body,
                                                               std::optional<size_t> json_length,
                                                               const std::string& model,
                                                               const std::string& version) {
  if (json_length && *json_length > body.size()) {
    return Invalid(absl::StrCat("Inference-Header-Content-Length ", *json_length,
                                " is more than the body's ", body.size(), " bytes"));
  }
  const absl::string_view header = json_length ? body.substr(0, *json_length) : body;
  const absl::string_view binary = json_length ? body.substr(*json_length) : absl::string_view();
  const Json root = Json::parse(header.begin(), header.end(), nullptr, false);
  if (root.is_discarded()) return Invalid("the request body is not valid JSON");
  if (!root.is_object()) return Invalid("the request body must be a JSON object");
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(version);
  if (auto id = root.find("id"); id != root.end()) {
    if (!id->is_string()) return Invalid("'id' must be a string");
    request.set_id(id->get<std::string>());
  }
  if (auto params = root.find("parameters"); params != root.end()) {
    if (absl::Status s = ParseParameters(*params, "parameters", request.mutable_parameters());
        !s.ok()) {
      return s;
    }
  }
  auto inputs = root.find("inputs");
  if (inputs == root.end() || !inputs->is_array()) return Invalid("'inputs' must be an array");
  size_t binary_used = 0;
  for (size_t i = 0; i < inputs->size(); ++i) {
    if (absl::Status s = ParseInput((*inputs)[i], i, binary, &binary_used, &request); !s.ok()) {
      return s;
    }
  }
  if (binary_used != binary.size()) {
    return Invalid(absl::StrCat(binary.size() - binary_used,
                                " bytes of binary data after the JSON header belong to no input "
                                "(binary_data_size)"));
  }
  if (auto outputs = root.find("outputs"); outputs != root.end()) {
    if (!outputs->is_array()) return Invalid("'outputs' must be an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const Json& out = (*outputs)[i];
      const std::string where = absl::StrCat("outputs[", i, "]");
      if (!out.is_object()) return Invalid(absl::StrCat(where, " must be an object"));
      auto name = out.find("name");
      if (name == out.end() || !name->is_string()) {
        return Invalid(absl::StrCat(where, " needs a string 'name'"));
      }
      auto* requested = request.add_outputs();
      requested->set_name(name->get<std::string>());
      if (auto params = out.find("parameters"); params != out.end()) {
        if (absl::Status s =
                ParseParameters(*params, where + ".parameters", requested->mutable_parameters());
            !s.ok()) {
          return s;
        }
      }
    }
  }
  return request;
}

absl::StatusOr<HttpBody> RenderInferResponse(const inference::ModelInferRequest& request,
                                             const inference::ModelInferResponse& response) {
  const bool binary_default = IsTrue(request.parameters(), "binary_data_output");
  Json root = Json::object();
  root["model_name"] = response.model_name();
  root["model_version"] = response.model_version();
  if (!response.id().empty()) root["id"] = response.id();
  if (!response.parameters().empty()) {
    Json params = Json::object();
    for (const auto& [key, value] : response.parameters()) params[key] = FromParameter(value);
    root["parameters"] = std::move(params);
  }
  Json outputs = Json::array();
  std::string binary;
  bool any_binary = false;
  if (response.raw_output_contents_size() != response.outputs_size()) {
    return absl::InternalError("the response's outputs and raw contents differ in number");
  }
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    const std::string& bytes = response.raw_output_contents(i);
    Json o = Json::object();
    o["name"] = out.name();
    o["datatype"] = out.datatype();
    o["shape"] = Json::array();
    for (int64_t d : out.shape()) o["shape"].push_back(d);
    bool as_binary = binary_default;
    for (const auto& requested : request.outputs()) {
      if (requested.name() != out.name()) continue;
      auto it = requested.parameters().find("binary_data");
      if (it != requested.parameters().end()) {
        as_binary = IsTrue(requested.parameters(), "binary_data");
      }
    }
    if (as_binary) {
      any_binary = true;
      o["parameters"] = {{"binary_data_size", bytes.size()}};
      binary += bytes;
    } else {
      absl::StatusOr<DType> dtype = DTypeFromDatatype(out.datatype(), out.name());
      if (!dtype.ok()) return dtype.status();
      const size_t item = DTypeSize(*dtype);
      Json data = Json::array();
      for (size_t at = 0; at + item <= bytes.size(); at += item) {
        data.push_back(ElementAt(*dtype, bytes.data() + at));
      }
      o["data"] = std::move(data);
    }
    outputs.push_back(std::move(o));
  }
  root["outputs"] = std::move(outputs);
  HttpBody result;
  result.body = Dump(root);
  if (any_binary) {
    result.json_length = result.body.size();
    result.body += binary;
  }
  return result;
}

absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* out) {
  if (body.empty()) return absl::OkStatus();
  const Json root = Json::parse(body.begin(), body.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return Invalid("the request body must be a JSON object");
  }
  auto params = root.find("parameters");
  if (params == root.end()) return absl::OkStatus();
  if (!params->is_object()) return Invalid("'parameters' must be an object");
  for (auto it = params->begin(); it != params->end(); ++it) {
    inference::ModelRepositoryParameter& p = (*out)[it.key()];
    const Json& v = it.value();
    if (v.is_boolean()) {
      p.set_bool_param(v.get<bool>());
    } else if (v.is_number_integer() && !v.is_number_unsigned()) {
      p.set_int64_param(v.get<int64_t>());
    } else if (v.is_number_unsigned() &&
               v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      p.set_int64_param(static_cast<int64_t>(v.get<uint64_t>()));
    } else if (v.is_string()) {
      p.set_string_param(v.get<std::string>());
    } else {
      return Invalid(absl::StrCat("parameter '", it.key(), "' must be a bool, integer or string"));
    }
  }
  return absl::OkStatus();
}

std::string RenderServerMetadata(const inference::ServerMetadataResponse& metadata) {
  Json root = {{"name", metadata.name()}, {"version", metadata.version()}};
  root["extensions"] = Json::array();
  for (const std::string& e : metadata.extensions()) root["extensions"].push_back(e);
  return Dump(root);
}

std::string RenderModelMetadata(const inference::ModelMetadataResponse& metadata) {
  Json root = {{"name", metadata.name()}, {"platform", metadata.platform()}};
  root["versions"] = Json::array();
  for (const std::string& v : metadata.versions()) root["versions"].push_back(v);
  auto tensors = [](const auto& list) {
    Json out = Json::array();
    for (const auto& t : list) {
      Json shape = Json::array();
      for (int64_t d : t.shape()) shape.push_back(d);
      out.push_back({{"name", t.name()}, {"datatype", t.datatype()}, {"shape", shape}});
    }
    return out;
  };
  root["inputs"] = tensors(metadata.inputs());
  root["outputs"] = tensors(metadata.outputs());
  return Dump(root);
}

std::string RenderError(absl::string_view message) {
  return Dump(Json{{"error", std::string(message)}});
}

}  // namespace kiln::server
