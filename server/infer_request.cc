#include "server/infer_request.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::server {
namespace {

std::string InputNames(const Program& program) {
  std::vector<std::string> names;
  for (int v : program.inputs) names.push_back(program.values[v].name);
  return absl::StrJoin(names, ", ");
}

// `values` as elements of type To, each checked to fit: KServe carries INT8
// and INT16 in int32 fields, UINT8 and UINT16 in uint32 ones.
template <typename To, typename From>
absl::Status NarrowInto(const google::protobuf::RepeatedField<From>& values,
                        absl::string_view field, DType dtype, const std::string& name,
                        std::string* bytes) {
  bytes->resize(values.size() * sizeof(To));
  for (int i = 0; i < values.size(); ++i) {
    const int64_t v = static_cast<int64_t>(values[i]);
    if (v < static_cast<int64_t>(std::numeric_limits<To>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<To>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", field, "[", i,
                                                     "] = ", v, " is out of range for ",
                                                     DatatypeName(dtype)));
    }
    const To narrow = static_cast<To>(v);
    std::memcpy(bytes->data() + i * sizeof(To), &narrow, sizeof(To));
  }
  return absl::OkStatus();
}

template <typename T>
void CopyInto(const google::protobuf::RepeatedField<T>& values, std::string* bytes) {
  bytes->assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Tensor bytes from the typed `contents` field (used when raw contents are
// absent): the field KServe assigns to the type, counted before converting.
absl::StatusOr<std::string> BytesFromContents(const TensorType& type,
                                              const inference::InferTensorContents& c,
                                              const std::string& name) {
  const DType dtype = type.dtype;
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    if (type.NumElements() == 0) return std::string();
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "' is ", DatatypeName(dtype),
        ", which KServe has no typed contents field for: send it in raw_input_contents"));
  }
  absl::string_view field;
  int count = 0;
  switch (dtype) {
    case DType::kBool:
      field = "bool_contents", count = c.bool_contents_size();
      break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      field = "int_contents", count = c.int_contents_size();
      break;
    case DType::kInt64:
      field = "int64_contents", count = c.int64_contents_size();
      break;
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
      field = "uint_contents", count = c.uint_contents_size();
      break;
    case DType::kUInt64:
      field = "uint64_contents", count = c.uint64_contents_size();
      break;
    case DType::kFloat32:
      field = "fp32_contents", count = c.fp32_contents_size();
      break;
    case DType::kFloat64:
      field = "fp64_contents", count = c.fp64_contents_size();
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      break;  // refused above
  }
  if (count != type.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' (", DatatypeName(dtype),
                                                   "): ", field, " holds ", count,
                                                   " elements, shape needs ", type.NumElements()));
  }
  std::string bytes;
  absl::Status narrowed;
  switch (dtype) {
    case DType::kBool:
      for (bool b : c.bool_contents()) bytes.push_back(b ? 1 : 0);
      break;
    case DType::kInt8:
      narrowed = NarrowInto<int8_t>(c.int_contents(), field, dtype, name, &bytes);
      break;
    case DType::kInt16:
      narrowed = NarrowInto<int16_t>(c.int_contents(), field, dtype, name, &bytes);
      break;
    case DType::kInt32:
      CopyInto(c.int_contents(), &bytes);
      break;
    case DType::kInt64:
      CopyInto(c.int64_contents(), &bytes);
      break;
    case DType::kUInt8:
      narrowed = NarrowInto<uint8_t>(c.uint_contents(), field, dtype, name, &bytes);
      break;
    case DType::kUInt16:
      narrowed = NarrowInto<uint16_t>(c.uint_contents(), field, dtype, name, &bytes);
      break;
    case DType::kUInt32:
      CopyInto(c.uint_contents(), &bytes);
      break;
    case DType::kUInt64:
      CopyInto(c.uint64_contents(), &bytes);
      break;
    case DType::kFloat32:
      CopyInto(c.fp32_contents(), &bytes);
      break;
    case DType::kFloat64:
      CopyInto(c.fp64_contents(), &bytes);
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  if (!narrowed.ok()) return narrowed;
  return bytes;
}

// Raw BOOL bytes other than 0 and 1 (a client's own encoding) read as true,
// as in C: kernels assume 0 or 1. Empty when `bytes` needs no change.
std::string NormalizedBools(absl::string_view bytes) {
  if (std::all_of(bytes.begin(), bytes.end(), [](char b) { return b == 0 || b == 1; })) return "";
  std::string out(bytes);
  for (char& b : out) b = b != 0 ? 1 : 0;
  return out;
}

// KServe: a request carries its tensors either all in raw_input_contents or
// all in typed contents. Both at once leaves which bytes are the tensor a
// guess; refused rather than guessed.
absl::Status CheckOneKindOfContents(const inference::ModelInferRequest& request) {
  if (request.raw_input_contents_size() == 0) return absl::OkStatus();
  for (const auto& in : request.inputs()) {
    if (in.has_contents() && in.contents().ByteSizeLong() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", in.name(), "' has typed contents but the request also carries "
          "raw_input_contents; give every input one way"));
    }
  }
  return absl::OkStatus();
}

// The values of `in`, an input that decides shapes (`input`), as the int64s
// a variant key holds (model_signature.h): INT64 or INT32 for an integer
// input, FP32 or FP64 for a float one, BOOL (0 or 1) for a bool one, raw
// (`raw`, entry `index`) or typed.
absl::StatusOr<std::vector<int64_t>> DecidingValues(
    const TensorSignature& input, const inference::ModelInferRequest::InferInputTensor& in,
    const google::protobuf::RepeatedPtrField<std::string>* raw, int index,
    const std::vector<int64_t>& shape) {
  const std::string& type = in.datatype();
  const bool is_float = IsFloatDType(input.dtype);
  const bool is_bool = input.dtype == DType::kBool;
  const bool fits = is_float  ? (type == "FP32" || type == "FP64")
                    : is_bool ? type == "BOOL"
                              : (type == "INT64" || type == "INT32");
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok() || !fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", input.name, "' decides shapes and must be ",
        is_float ? "FP32 or FP64" : is_bool ? "BOOL" : "INT64 or INT32", ", got ", type,
        ShapeToString(shape)));
  }
  // The values' size is checked against what the request brought before
  // anything is allocated: a 50-byte request declaring shape [2^36] made the
  // server allocate 512 GiB.
  const size_t count = static_cast<size_t>(*n);
  const bool wide = type == "INT64" || type == "FP64";
  const size_t item = wide ? 8 : is_bool ? 1 : 4;
  std::vector<int64_t> v;
  if (raw != nullptr) {
    if (index >= raw->size() || (*raw)[index].size() / item != count ||
        (*raw)[index].size() % item != 0) {
      const std::string bytes = count <= (size_t{1} << 56)
                                    ? absl::StrCat(count * item)
                                    : absl::StrCat(count, " x ", item);
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name, "' needs ", bytes, " raw bytes"));
    }
    v.resize(count);
    const char* bytes = (*raw)[index].data();
    for (size_t i = 0; i < count; ++i) {
      if (is_bool) {
        v[i] = bytes[i] != 0;  // as NormalizedBools reads them
      } else if (type == "INT64") {
        std::memcpy(&v[i], bytes + i * item, item);
      } else if (type == "INT32") {
        int32_t narrow;
        std::memcpy(&narrow, bytes + i * item, item);
        v[i] = narrow;
      } else if (type == "FP64") {
        double d;
        std::memcpy(&d, bytes + i * item, item);
        v[i] = DecidingValueFromDouble(d);
      } else {
        float f;
        std::memcpy(&f, bytes + i * item, item);
        v[i] = DecidingValueFromDouble(f);
      }
    }
    return v;
  }
  const auto& contents = in.contents();
  const int given = is_bool            ? contents.bool_contents_size()
                    : type == "INT64" ? contents.int64_contents_size()
                    : type == "INT32" ? contents.int_contents_size()
                    : type == "FP64"  ? contents.fp64_contents_size()
                                      : contents.fp32_contents_size();
  if (static_cast<size_t>(given) != count) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': contents hold ",
                                                   given, " elements, shape needs ", count));
  }
  v.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const int k = static_cast<int>(i);
    v[i] = is_bool           ? int64_t{contents.bool_contents(k)}
           : type == "INT64" ? contents.int64_contents(k)
           : type == "INT32" ? contents.int_contents(k)
           : type == "FP64"  ? DecidingValueFromDouble(contents.fp64_contents(k))
                             : DecidingValueFromDouble(contents.fp32_contents(k));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> RequestVariantKey(
    const ModelSignature& signature, const inference::ModelInferRequest& request) {
  if (absl::Status s = CheckOneKindOfContents(request); !s.ok()) return s;
  const bool raw = request.raw_input_contents_size() > 0;
  std::vector<std::vector<int64_t>> key, values;
  for (const TensorSignature& input : signature.inputs) {
    int found = -1;
    for (int i = 0; i < request.inputs_size() && found < 0; ++i) {
      if (request.inputs(i).name() == input.name) found = i;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", input.name, "' (",
                                                     DatatypeName(input.dtype),
                                                     ShapeToString(input.dims), ")"));
    }
    const auto& in = request.inputs(found);
    key.emplace_back(in.shape().begin(), in.shape().end());
    if (!input.decides_shapes) continue;
    // Its values are part of what compiles: decoded here, not run.
    absl::StatusOr<std::vector<int64_t>> v =
        DecidingValues(input, in, raw ? &request.raw_input_contents() : nullptr, found,
                       key.back());
    if (!v.ok()) return v.status();
    values.push_back(*std::move(v));
  }
  key.insert(key.end(), std::make_move_iterator(values.begin()),
             std::make_move_iterator(values.end()));
  return key;
}

absl::StatusOr<std::vector<runtime::Tensor>> DecodeInputs(
    const Program& program, const inference::ModelInferRequest& request,
    const std::vector<std::vector<int64_t>>* shapes, const std::set<std::string>* consumed) {
  if (absl::Status s = CheckOneKindOfContents(request); !s.ok()) return s;
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", request.inputs_size(), " inputs but ",
                     request.raw_input_contents_size(), " raw_input_contents entries"));
  }
  std::map<std::string, int> by_name;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    if (!by_name.emplace(name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice"));
    }
    bool known = consumed != nullptr && consumed->count(name) > 0;
    for (int v : program.inputs) known |= program.values[v].name == name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model has no input '", name, "' (its inputs: ", InputNames(program), ")"));
    }
  }
  std::vector<runtime::Tensor> tensors;
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    ValueSpec spec = program.values[program.inputs[k]];
    if (shapes != nullptr) spec.type.shape = (*shapes)[k];
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", spec.name, "' (", DatatypeName(spec.type.dtype),
                       ShapeToString(spec.type.shape), ")"));
    }
    const auto& in = request.inputs(it->second);
    absl::StatusOr<DType> dtype =
        DTypeFromDatatype(in.datatype(), absl::StrCat("input '", spec.name, "'"));
    if (!dtype.ok()) return dtype.status();
    if (*dtype != spec.type.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' expects datatype ",
                                                     DatatypeName(spec.type.dtype), ", got '",
                                                     in.datatype(), "'"));
    }
    std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
    if (shape != spec.type.shape) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' expects shape ",
                                                     ShapeToString(spec.type.shape), ", got ",
                                                     ShapeToString(shape)));
    }
    std::string from_contents;
    absl::string_view bytes;
    if (raw) {
      bytes = request.raw_input_contents(it->second);
      if (static_cast<int64_t>(bytes.size()) != spec.type.ByteSize()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", spec.name, "' (", spec.type.ToString(), ") needs ",
                         spec.type.ByteSize(), " raw bytes, got ", bytes.size()));
      }
      if (spec.type.dtype == DType::kBool) {
        from_contents = NormalizedBools(bytes);
        if (!from_contents.empty()) bytes = from_contents;
      }
    } else {
      absl::StatusOr<std::string> b = BytesFromContents(spec.type, in.contents(), spec.name);
      if (!b.ok()) return b.status();
      from_contents = *std::move(b);
      bytes = from_contents;
    }
    absl::StatusOr<runtime::Tensor> t = runtime::Tensor::FromBytes(spec.type, bytes);
    if (!t.ok()) return t.status();
    tensors.push_back(*std::move(t));
  }
  return tensors;
}

absl::Status EncodeOutputs(const Program& program, const inference::ModelInferRequest& request,
                           runtime::RunResult result, inference::ModelInferResponse* response) {
  std::vector<int> wanted;
  if (request.outputs_size() == 0) {
    for (size_t i = 0; i < program.outputs.size(); ++i) wanted.push_back(static_cast<int>(i));
  } else {
    std::set<std::string> seen;
    for (const auto& out : request.outputs()) {
      // Each output is sent once: a 1 KB request naming one 16 MiB output
      // 250 times made the server allocate 4 GB.
      if (!seen.insert(out.name()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("output '", out.name(), "' is requested more than once"));
      }
      int found = -1;
      for (size_t i = 0; i < program.output_names.size(); ++i) {
        if (program.output_names[i] == out.name()) found = static_cast<int>(i);
      }
      if (found < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model has no output '", out.name(), "' (its outputs: ",
            absl::StrJoin(program.output_names, ", "), ")"));
      }
      wanted.push_back(found);
    }
  }
  for (int i : wanted) {
    const runtime::Tensor& t = result.outputs[i];
    auto* out = response->add_outputs();
    out->set_name(program.output_names[i]);
    out->set_datatype(DatatypeName(t.type().dtype));
    for (int64_t d : t.type().shape) out->add_shape(d);
    response->add_raw_output_contents(std::string(t.bytes()));
  }
  auto profile = request.parameters().find("kiln.profile");
  if (profile != request.parameters().end() && profile->second.bool_param()) {
    auto& params = *response->mutable_parameters();
    for (size_t k = 0; k < result.kernel_times.size(); ++k) {
      params[absl::StrCat("kiln.kernel_ns.", k, ".", result.kernel_times[k].name)]
          .set_int64_param(result.kernel_times[k].ns);
    }
    params["kiln.total_ns"].set_int64_param(result.total_ns);
  }
  return absl::OkStatus();
}

}  // namespace kiln::server
