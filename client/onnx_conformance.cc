#include "client/onnx_conformance.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/model_file.h"
#include "onnx/onnx_pb.h"

namespace kiln::client {
namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

using Outcome = OnnxCaseResult::Outcome;

OnnxCaseResult Result(Outcome o, std::string detail) { return {o, std::move(detail)}; }

// A TensorProto as the protocol's array; nullopt-like empty datatype when the
// element type is one Kiln does not serve.
NpyArray ToArray(const onnx::TensorProto& t) {
  NpyArray a;
  a.shape.assign(t.dims().begin(), t.dims().end());
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      a.datatype = "FP32";
      a.data = t.has_raw_data() ? t.raw_data()
                                : std::string(reinterpret_cast<const char*>(t.float_data().data()),
                                              t.float_data_size() * 4);
      break;
    case onnx::TensorProto::INT64:
      a.datatype = "INT64";
      a.data = t.has_raw_data() ? t.raw_data()
                                : std::string(reinterpret_cast<const char*>(t.int64_data().data()),
                                              t.int64_data_size() * 8);
      break;
    case onnx::TensorProto::BOOL:
      a.datatype = "BOOL";
      if (t.has_raw_data()) {
        a.data = t.raw_data();
      } else {
        for (int32_t v : t.int32_data()) a.data.push_back(v ? 1 : 0);
      }
      break;
    default:
      a.datatype = "";
  }
  return a;
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

// Empty when within tolerance; else the worst element.
std::string Compare(const NpyArray& got, const NpyArray& want, const std::string& name,
                    Tolerance tolerance) {
  if (got.datatype != want.datatype || got.shape != want.shape) {
    auto shape = [](const NpyArray& a) {
      std::string s = a.datatype + "[";
      for (size_t i = 0; i < a.shape.size(); ++i) absl::StrAppend(&s, i ? "," : "", a.shape[i]);
      return s + "]";
    };
    return absl::StrCat(name, ": got ", shape(got), ", want ", shape(want));
  }
  if (got.data.size() != want.data.size()) return absl::StrCat(name, ": byte sizes differ");
  double worst_excess = 0, worst_got = 0, worst_want = 0;
  int64_t worst_at = -1;
  const size_t item = want.datatype == "FP32" ? 4 : (want.datatype == "INT64" ? 8 : 1);
  double model_bound = 1;  // max(1, max |want|)
  if (tolerance == Tolerance::kModel && item == 4) {
    for (size_t i = 0; i < want.data.size() / 4; ++i) {
      float w;
      std::memcpy(&w, want.data.data() + i * 4, 4);
      model_bound = std::max(model_bound, static_cast<double>(std::fabs(w)));
    }
  }
  for (size_t i = 0; i < want.data.size() / item; ++i) {
    double g, w;
    if (item == 4) {
      float a, b;
      std::memcpy(&a, got.data.data() + i * 4, 4);
      std::memcpy(&b, want.data.data() + i * 4, 4);
      g = a, w = b;
    } else if (item == 8) {
      int64_t a, b;
      std::memcpy(&a, got.data.data() + i * 8, 8);
      std::memcpy(&b, want.data.data() + i * 8, 8);
      g = static_cast<double>(a), w = static_cast<double>(b);
    } else {
      g = got.data[i] != 0, w = want.data[i] != 0;
    }
    if (std::isnan(w) && std::isnan(g)) continue;
    const double allowed = tolerance == Tolerance::kModel ? 1e-4 * model_bound
                                                          : kAtol + kRtol * std::fabs(w);
    const double excess = std::fabs(g - w) - allowed;
    if (excess > worst_excess || (std::isnan(g) != std::isnan(w))) {
      worst_excess = std::isnan(excess) ? INFINITY : excess;
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
  absl::StatusOr<std::string> bytes = ReadFileBytes(dir + "/model.onnx");
  if (!bytes.ok()) return Result(Outcome::kFail, std::string(bytes.status().message()));
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) return Result(Outcome::kFail, "model.onnx does not parse");
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs, outputs;
  for (const auto& in : model.graph().input()) {
    if (!initializers.count(in.name())) inputs.push_back(in.name());
  }
  for (const auto& out : model.graph().output()) outputs.push_back(out.name());

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
      NpyArray a = ToArray(t);
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
      std::string diff = Compare(*got, ToArray(t), outputs[k], tolerance);
      if (!diff.empty()) result = Result(Outcome::kFail, diff);
    }
    if (result.outcome != Outcome::kPass) break;
  }
  (void)client.UnloadModel(name);
  return result;
}

}  // namespace kiln::client
