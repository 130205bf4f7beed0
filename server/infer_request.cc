#include "server/infer_request.h"

#include <algorithm>
#include <cstring>
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

// Tensor bytes from the typed `contents` field (used when raw contents are absent).
absl::StatusOr<std::string> BytesFromContents(const TensorType& type,
                                              const inference::InferTensorContents& c,
                                              const std::string& name) {
  std::string bytes;
  if (type.dtype == DType::kFloat32) {
    bytes.assign(reinterpret_cast<const char*>(c.fp32_contents().data()),
                 c.fp32_contents_size() * sizeof(float));
  } else if (type.dtype == DType::kInt64) {
    bytes.assign(reinterpret_cast<const char*>(c.int64_contents().data()),
                 c.int64_contents_size() * sizeof(int64_t));
  } else {
    for (bool b : c.bool_contents()) bytes.push_back(b ? 1 : 0);
  }
  if (static_cast<int64_t>(bytes.size()) != type.ByteSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': contents hold ", bytes.size() / DTypeSize(type.dtype),
        " elements, shape needs ", type.NumElements()));
  }
  return bytes;
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

}  // namespace

std::string DatatypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "FP32";
    case DType::kInt64:
      return "INT64";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

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
    absl::StatusOr<int64_t> n = CheckedNumElements(key.back());
    if (!n.ok() || in.datatype() != "INT64") {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input.name, "' decides shapes and must be INT64, got ", in.datatype(),
          ShapeToString(key.back())));
    }
    // The values' size is checked against what the request brought before
    // anything is allocated: a 50-byte request declaring shape [2^36] made the
    // server allocate 512 GiB.
    const size_t count = static_cast<size_t>(*n);
    if (raw) {
      if (found >= request.raw_input_contents_size() ||
          request.raw_input_contents(found).size() != count * sizeof(int64_t)) {
        return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "' needs ",
                                                       count * sizeof(int64_t), " raw bytes"));
      }
      std::vector<int64_t> v(count);
      // Not for zero values: memcpy to an empty vector's null data() is undefined.
      if (count > 0) {
        std::memcpy(v.data(), request.raw_input_contents(found).data(), count * sizeof(int64_t));
      }
      values.push_back(std::move(v));
    } else {
      if (static_cast<size_t>(in.contents().int64_contents_size()) != count) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", input.name, "': contents hold ", in.contents().int64_contents_size(),
            " elements, shape needs ", count));
      }
      values.emplace_back(in.contents().int64_contents().begin(),
                          in.contents().int64_contents().end());
    }
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
    if (in.datatype() != DatatypeName(spec.type.dtype)) {
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
