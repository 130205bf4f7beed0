#include "client/report_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace kiln::client {
namespace {

std::string Shape(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string DTypeName(kiln::v1::DataType t) {
  return t == kiln::v1::INT64 ? "int64" : "float32";
}

}  // namespace

std::string FormatCompileReport(const kiln::v1::CompileModelResponse& response) {
  const kiln::v1::CompileReport& r = response.report();
  std::string out = absl::StrCat("model ", response.model_name(), "\n\npasses\n");
  absl::StrAppend(&out, absl::StrFormat("  %-32s %10s %10s  %s\n", "pass", "ms", "self ms", "result"));
  for (const auto& p : r.passes()) {
    std::string name = std::string(p.depth() * 2, ' ') + p.name();
    std::string result = p.skipped() ? absl::StrCat("skipped (", p.skip_reason(), ")")
                                     : (p.changed() ? "changed" : "unchanged");
    absl::StrAppend(&out, absl::StrFormat("  %-32s %10.3f %10.3f  %s\n", name, p.ms(), p.self_ms(), result));
  }
  absl::StrAppend(&out, "\nkernels\n");
  absl::StrAppend(&out, absl::StrFormat("  %-28s %-16s %10s  %-5s  %s\n", "kernel", "key",
                                        "compile ms", "cache", "ops"));
  for (const auto& k : r.kernels()) {
    absl::StrAppend(&out, absl::StrFormat("  %-28s %-16s %10.3f  %-5s  %s\n", k.name(), k.key(),
                                          k.compile_ms(), k.cache_hit() ? "hit" : "miss",
                                          absl::StrJoin(k.ops(), "+")));
  }
  absl::StrAppend(&out, absl::StrFormat(
                            "\ntotal %.3f ms (passes %.3f ms, codegen %.3f ms); %d kernels: %d "
                            "cache hits, %d misses\n",
                            r.total_ms(), r.passes_ms(), r.codegen_ms(), r.kernels_size(),
                            r.cache_hits(), r.cache_misses()));
  for (const auto& d : r.ir_dumps()) {
    absl::StrAppend(&out, "\n-- IR after ", d.after_pass(), " --\n", d.text());
  }
  return out;
}

std::string FormatCacheStats(const kiln::v1::GetCacheStatsResponse& s) {
  std::string out = absl::StrFormat(
      "entries %d, hits %d, misses %d, compile time spent %.3f ms, saved %.3f ms\n", s.entries(),
      s.hits(), s.misses(), s.compile_ms_total(), s.compile_ms_saved());
  if (s.entry_size() == 0) return out;
  absl::StrAppend(&out, absl::StrFormat("  %-16s %6s %12s  %s\n", "key", "hits", "compile ms", "ops"));
  for (const auto& e : s.entry()) {
    absl::StrAppend(&out, absl::StrFormat("  %-16s %6d %12.3f  %s\n", e.key(), e.hits(),
                                          e.compile_ms(), absl::StrJoin(e.ops(), "+")));
  }
  return out;
}

std::string FormatTimingStats(const kiln::v1::GetTimingStatsResponse& stats) {
  std::string out;
  for (const auto& m : stats.models()) {
    absl::StrAppend(&out, "model ", m.model_name(), ": ", m.inference_count(), " inferences");
    if (m.inference_count() > 0) {
      absl::StrAppend(&out, absl::StrFormat(", mean %.3f us",
                                            m.inference_total_ns() / 1e3 / m.inference_count()));
    }
    absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, absl::StrFormat("  %-28s %8s %12s %12s %12s\n", "kernel", "count",
                                          "mean us", "min us", "max us"));
    for (const auto& k : m.kernels()) {
      const double mean = k.count() ? k.total_ns() / 1e3 / k.count() : 0;
      absl::StrAppend(&out, absl::StrFormat("  %-28s %8d %12.3f %12.3f %12.3f\n", k.name(),
                                            k.count(), mean, k.min_ns() / 1e3, k.max_ns() / 1e3));
    }
    absl::StrAppend(&out, "  last compile:");
    for (const auto& p : m.last_compile_passes()) {
      if (!p.skipped() && p.depth() > 0) absl::StrAppend(&out, absl::StrFormat(" %s %.3fms", p.name(), p.ms()));
    }
    absl::StrAppend(&out, "\n");
  }
  return out.empty() ? "no models\n" : out;
}

std::string FormatModels(const kiln::v1::ListModelsResponse& models) {
  std::string out;
  for (const auto& m : models.models()) {
    std::vector<std::string> ins, outs;
    for (const auto& v : m.inputs()) ins.push_back(absl::StrCat(v.name(), ":", DTypeName(v.dtype()), Shape(v.dims())));
    for (const auto& v : m.outputs()) outs.push_back(absl::StrCat(v.name(), ":", DTypeName(v.dtype()), Shape(v.dims())));
    absl::StrAppend(&out, m.name(), "  kernels=", m.kernels(), "  inputs=", absl::StrJoin(ins, ","),
                    "  outputs=", absl::StrJoin(outs, ","), "\n");
  }
  return out.empty() ? "no models\n" : out;
}

std::string FormatServerInfo(const kiln::v1::GetServerInfoResponse& info) {
  return absl::StrCat("kiln ", info.version(), "\nLLVM ", info.llvm_version(), "\ntarget ",
                      info.target_triple(), " cpu ", info.cpu(), "\nthreads ", info.threads(),
                      "\nfeatures ", absl::StrJoin(info.cpu_features(), " "), "\nops ",
                      absl::StrJoin(info.ops(), " "), "\n");
}

std::string FormatInferResult(const InferResult& result) {
  std::string out;
  for (const auto& [name, array] : result.outputs) {
    absl::StrAppend(&out, name, ": ", array.datatype, "[", absl::StrJoin(array.shape, ","), "]");
    const bool is_float = array.datatype == "FP32";
    const size_t item = is_float ? 4 : 8;
    const size_t count = array.data.size() / item;
    std::vector<std::string> values;
    for (size_t i = 0; i < std::min<size_t>(count, 8); ++i) {
      if (is_float) {
        float f;
        std::memcpy(&f, array.data.data() + i * 4, 4);
        values.push_back(absl::StrFormat("%.6g", f));
      } else {
        int64_t v;
        std::memcpy(&v, array.data.data() + i * 8, 8);
        values.push_back(absl::StrCat(v));
      }
    }
    absl::StrAppend(&out, " = [", absl::StrJoin(values, ", "), count > 8 ? ", ..." : "", "]\n");
  }
  if (!result.kernels.empty()) {
    absl::StrAppend(&out, "\nkernel times\n");
    for (const KernelTime& k : result.kernels) {
      absl::StrAppend(&out, absl::StrFormat("  %2d  %-28s %10.3f us\n", k.index, k.name, k.ns / 1e3));
    }
    absl::StrAppend(&out, absl::StrFormat("  total %.3f us\n", result.total_ns / 1e3));
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace kiln::client
