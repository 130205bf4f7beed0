#include "client/onnx_conformance.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/element_type.h"
#include "client/model_file.h"
#include "onnx/onnx_pb.h"

namespace kiln::client {
namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

using Outcome = OnnxCaseResult::Outcome;

OnnxCaseResult Result(Outcome o, std::string detail) { return {o, std::move(detail)}; }

// Where ONNX keeps a type's values when not in raw_data, and the KServe
// datatype they travel as.
enum class Field { kFloat, kDouble, kInt32, kInt64, kUInt64 };

struct OnnxElementType {
  int onnx;
  const char* datatype;
  Field field;
};

constexpr OnnxElementType kOnnxTypes[] = {
    {onnx::TensorProto::FLOAT, "FP32", Field::kFloat},
    {onnx::TensorProto::DOUBLE, "FP64", Field::kDouble},
    // FLOAT16 and BFLOAT16: int32_data holds each value's 16-bit pattern.
    {onnx::TensorProto::FLOAT16, "FP16", Field::kInt32},
    {onnx::TensorProto::BFLOAT16, "BF16", Field::kInt32},
    {onnx::TensorProto::INT8, "INT8", Field::kInt32},
    {onnx::TensorProto::UINT8, "UINT8", Field::kInt32},
    {onnx::TensorProto::INT16, "INT16", Field::kInt32},
    {onnx::TensorProto::UINT16, "UINT16", Field::kInt32},
    {onnx::TensorProto::INT32, "INT32", Field::kInt32},
    {onnx::TensorProto::BOOL, "BOOL", Field::kInt32},
    {onnx::TensorProto::INT64, "INT64", Field::kInt64},
    {onnx::TensorProto::UINT32, "UINT32", Field::kUInt64},
    {onnx::TensorProto::UINT64, "UINT64", Field::kUInt64},
};

const OnnxElementType* FindOnnxType(int onnx_type) {
  for (const OnnxElementType& t : kOnnxTypes) {
    if (t.onnx == onnx_type) return &t;
  }
  return nullptr;
}

// Each value's low `size` bytes, little-endian (two's complement for negatives).
template <typename Values>
std::string LowBytes(const Values& values, size_t size) {
  std::string out(values.size() * size, '\0');
  for (int i = 0; i < values.size(); ++i) {
    const uint64_t v = static_cast<uint64_t>(values[i]);
    std::memcpy(&out[i * size], &v, size);
  }
  return out;
}

// A TensorProto as the protocol's array; an empty datatype when the element
// type is one Kiln does not serve (STRING, the complex types).
NpyArray ToArray(const onnx::TensorProto& t) {
  NpyArray a;
  a.shape.assign(t.dims().begin(), t.dims().end());
  const OnnxElementType* type = FindOnnxType(t.data_type());
  if (type == nullptr) return a;
  a.datatype = type->datatype;
  if (t.has_raw_data()) {
    a.data = t.raw_data();
    return a;
  }
  const size_t size = FindElementType(a.datatype)->size;
  switch (type->field) {
    case Field::kFloat:
      a.data.assign(reinterpret_cast<const char*>(t.float_data().data()),
                    t.float_data_size() * sizeof(float));
      break;
    case Field::kDouble:
      a.data.assign(reinterpret_cast<const char*>(t.double_data().data()),
                    t.double_data_size() * sizeof(double));
      break;
    case Field::kInt32:
      if (type->onnx == onnx::TensorProto::BOOL) {
        for (int32_t v : t.int32_data()) a.data.push_back(v != 0 ? 1 : 0);
      } else {
        a.data = LowBytes(t.int32_data(), size);
      }
      break;
    case Field::kInt64:
      a.data = LowBytes(t.int64_data(), size);
      break;
    case Field::kUInt64:
      a.data = LowBytes(t.uint64_data(), size);
      break;
  }
  return a;
}

// ONNX's generator (1.12) saves BFLOAT16 test data as UINT16 tensors of the
// bit patterns, NumPy having no bfloat16: taken as the BF16 the graph declares.
NpyArray AsDeclared(NpyArray a, int declared) {
  if (declared == onnx::TensorProto::BFLOAT16 && a.datatype == "UINT16") a.datatype = "BF16";
  return a;
}

// How `shape` contradicts the fixed dims `input` declares; empty when it
// does not. ONNX 1.12's CastLike cases to and from BFLOAT16 declare 'like'
// [3,4] and give it [1]: a case no strict server can run, not a failure.
std::string ShapeClash(const onnx::ValueInfoProto& input, const std::vector<int64_t>& shape) {
  if (!input.type().tensor_type().has_shape()) return "";
  const auto& dims = input.type().tensor_type().shape().dim();
  bool clash = dims.size() != static_cast<int>(shape.size());
  for (int d = 0; d < dims.size() && !clash; ++d) {
    clash = dims[d].dim_value() > 0 && dims[d].dim_value() != shape[d];
  }
  if (!clash) return "";
  std::vector<std::string> want;
  for (const auto& d : dims) want.push_back(d.has_dim_value() ? absl::StrCat(d.dim_value()) : "?");
  return absl::StrCat("is declared [", absl::StrJoin(want, ","), "], its data is [",
                      absl::StrJoin(shape, ","), "]");
}

// Why a case cannot run when a graph input or output holds a type Kiln does
// not serve (STRING, complex); empty when all are served.
std::string UnservedTypes(const onnx::GraphProto& graph) {
  std::vector<std::string> unserved;
  auto check = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    const int elem = v.type().tensor_type().elem_type();
    if (FindOnnxType(elem) == nullptr) {
      unserved.push_back(absl::StrCat("'", v.name(), "' is ",
                                      onnx::TensorProto::DataType_Name(elem)));
    }
  };
  for (const auto& v : graph.input()) check(v);
  for (const auto& v : graph.output()) check(v);
  if (unserved.empty()) return "";
  return absl::StrCat(absl::StrJoin(unserved, ", "),
                      ": Kiln serves numeric and bool tensors only");
}

std::vector<std::string> DataSets(const std::string& dir) {
  std::vector<std::string> sets;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return sets;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "test_data_set_", 14) == 0) sets.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  std::sort(sets.begin(), sets.end());
  return sets;
}

bool ReadTensor(const std::string& path, onnx::TensorProto* t) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  return bytes.ok() && t->ParseFromString(*bytes);
}

// One unit in the last place of FP16 or BF16 at `w`; 0 for wider types. Two
// results of a narrow type rounded differently (ONNX 1.12's reference Cast to
// BFLOAT16 truncates, Kiln rounds to nearest even, as later ONNX specifies)
// are one unit apart, and rtol 1e-3 is finer than BF16's unit (2^-8 to 2^-7
// relative): there it would ask for equal rounding, not a close value.
double NarrowUlp(const ElementType& type, double w) {
  if (type.size != 2 || !std::isfinite(w)) return 0;
  const int mantissa_bits = type.datatype == "BF16" ? 7 : 10;
  const int min_exponent = type.datatype == "BF16" ? -126 : -14;
  const int exponent = w == 0 ? min_exponent : std::max(std::ilogb(w), min_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits);
}

// Empty when within tolerance; else the worst element. Floats (FP16 and BF16
// widened, FP64 as double) within the tolerance (for FP16 and BF16 at least
// one unit of the type), NaN matching NaN and an
// infinity only itself, as NumPy's assert_allclose (ONNX's runner) has it;
// integers and bools exactly.
std::string Compare(const NpyArray& got, const NpyArray& want, const std::string& name,
                    Tolerance tolerance, double declared_atol) {
  if (got.datatype != want.datatype || got.shape != want.shape) {
    auto shape = [](const NpyArray& a) {
      std::string s = a.datatype + "[";
      for (size_t i = 0; i < a.shape.size(); ++i) absl::StrAppend(&s, i ? "," : "", a.shape[i]);
      return s + "]";
    };
    return absl::StrCat(name, ": got ", shape(got), ", want ", shape(want));
  }
  if (got.data.size() != want.data.size()) return absl::StrCat(name, ": byte sizes differ");
  const ElementType* type = FindElementType(want.datatype);
  if (type == nullptr) return absl::StrCat(name, ": datatype '", want.datatype, "' is unknown");
  const size_t count = want.data.size() / type->size;
  if (type->kind != ElementType::Kind::kFloat) {
    const size_t size = type->size;
    for (size_t i = 0; i < count; ++i) {
      const bool same =
          type->kind == ElementType::Kind::kBool
              ? (got.data[i] != 0) == (want.data[i] != 0)
              : std::memcmp(got.data.data() + i * size, want.data.data() + i * size, size) == 0;
      if (same) continue;
      return absl::StrCat(name, "[", i, "]: got ", FormatElement(*type, got.data, i), ", want ",
                          FormatElement(*type, want.data, i));
    }
    return "";
  }
  double worst_excess = 0, worst_got = 0, worst_want = 0;
  int64_t worst_at = -1;
  double model_bound = 1;  // max(1, max |want|) over finite values
  if (tolerance == Tolerance::kModel) {
    for (size_t i = 0; i < count; ++i) {
      const double w = std::fabs(ElementAsDouble(*type, want.data, i));
      if (std::isfinite(w)) model_bound = std::max(model_bound, w);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const double g = ElementAsDouble(*type, got.data, i);
    const double w = ElementAsDouble(*type, want.data, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    double excess;
    if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w)) {
      excess = g == w ? 0 : INFINITY;
    } else {
      const double allowed =
          std::max({tolerance == Tolerance::kModel ? 1e-4 * model_bound
                                                   : kAtol + kRtol * std::fabs(w),
                    NarrowUlp(*type, w), declared_atol});
      excess = std::fabs(g - w) - allowed;
    }
    if (excess > worst_excess) {
      worst_excess = excess;
      worst_got = g, worst_want = w, worst_at = static_cast<int64_t>(i);
    }
  }
  if (worst_at < 0) return "";
  return absl::StrFormat("%s[%d]: got %.9g, want %.9g", name, worst_at, worst_got, worst_want);
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "PASS";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kUnsupported:
      return "UNSUPPORTED";
  }
  return "?";
}

OnnxCaseResult RunOnnxCase(KilnClient& client, const std::string& dir, Tolerance tolerance) {
  // A model case may declare its own absolute tolerance (a quantised model:
  // one quantisation step of its output) in a file `tolerance`.
  double declared_atol = 0;
  if (tolerance == Tolerance::kModel) {
    if (absl::StatusOr<std::string> t = ReadFileBytes(dir + "/tolerance"); t.ok()) {
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*t), &declared_atol)) declared_atol = 0;
    }
  }
  absl::StatusOr<std::string> bytes = ReadFileBytes(dir + "/model.onnx");
  if (!bytes.ok()) return Result(Outcome::kFail, std::string(bytes.status().message()));
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) return Result(Outcome::kFail, "model.onnx does not parse");
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs, outputs;
  std::vector<int> input_types, output_types;  // as the graph declares them
  std::vector<const onnx::ValueInfoProto*> declared;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    inputs.push_back(in.name());
    input_types.push_back(in.type().tensor_type().elem_type());
    declared.push_back(&in);
  }
  for (const auto& out : model.graph().output()) {
    outputs.push_back(out.name());
    output_types.push_back(out.type().tensor_type().elem_type());
  }
  if (std::string unserved = UnservedTypes(model.graph()); !unserved.empty()) {
    return Result(Outcome::kUnsupported, unserved);
  }

  const std::string name = "onnx_test_" + dir.substr(dir.find_last_of('/') + 1);
  kiln::v1::CompileModelRequest request;
  request.set_model_name(name);
  request.set_onnx_model(*bytes);
  absl::StatusOr<kiln::v1::CompileModelResponse> compiled = client.Compile(request);
  if (!compiled.ok()) {
    const Outcome o = compiled.status().code() == absl::StatusCode::kUnimplemented
                          ? Outcome::kUnsupported
                          : Outcome::kFail;
    return Result(o, std::string(compiled.status().message()));
  }
  OnnxCaseResult result = Result(Outcome::kPass, "");
  for (const std::string& set : DataSets(dir)) {
    std::vector<std::pair<std::string, NpyArray>> feeds;
    for (size_t k = 0; k < inputs.size(); ++k) {
      onnx::TensorProto t;
      if (!ReadTensor(absl::StrCat(set, "/input_", k, ".pb"), &t)) {
        result = Result(Outcome::kFail, absl::StrCat("cannot read input_", k));
        break;
      }
      NpyArray a = AsDeclared(ToArray(t), input_types[k]);
      if (std::string clash = ShapeClash(*declared[k], a.shape); !clash.empty()) {
        result = Result(Outcome::kUnsupported,
                        absl::StrCat("the case's data contradicts its model: input '", inputs[k],
                                     "' ", clash));
        break;
      }
      if (a.datatype.empty()) {
        result = Result(Outcome::kUnsupported,
                        absl::StrCat("input element type ",
                                     onnx::TensorProto::DataType_Name(t.data_type())));
        break;
      }
      feeds.push_back({inputs[k], std::move(a)});
    }
    if (result.outcome != Outcome::kPass) break;
    absl::StatusOr<InferResult> ran = client.Infer(name, feeds, false);
    if (!ran.ok()) {
      // A model whose inputs decide shapes compiles on first use: what the
      // compile cannot take shows here.
      result = Result(ran.status().code() == absl::StatusCode::kUnimplemented
                          ? Outcome::kUnsupported
                          : Outcome::kFail,
                      std::string(ran.status().message()));
      break;
    }
    for (size_t k = 0; k < outputs.size() && result.outcome == Outcome::kPass; ++k) {
      onnx::TensorProto t;
      if (!ReadTensor(absl::StrCat(set, "/output_", k, ".pb"), &t)) {
        result = Result(Outcome::kFail, absl::StrCat("cannot read output_", k));
        break;
      }
      const NpyArray* got = nullptr;
      for (const auto& [out_name, array] : ran->outputs) {
        if (out_name == outputs[k]) got = &array;
      }
      if (got == nullptr) {
        result = Result(Outcome::kFail, absl::StrCat("no output '", outputs[k], "'"));
        break;
      }
      NpyArray want = AsDeclared(ToArray(t), output_types[k]);
      if (want.datatype.empty()) {
        result = Result(Outcome::kUnsupported,
                        absl::StrCat("output element type ",
                                     onnx::TensorProto::DataType_Name(t.data_type())));
        break;
      }
      std::string diff = Compare(*got, want, outputs[k], tolerance, declared_atol);
      if (!diff.empty()) result = Result(Outcome::kFail, diff);
    }
    if (result.outcome != Outcome::kPass) break;
  }
  (void)client.UnloadModel(name);
  return result;
}

}  // namespace kiln::client
