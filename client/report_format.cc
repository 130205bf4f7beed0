#include "client/report_format.h"

#include <algorithm>

#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/element_type.h"
#include "common/human_bytes.h"
#include "google/protobuf/util/json_util.h"

namespace kiln::client {
namespace {

std::string Shape(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// "float32", "bfloat16", "bool": the enum's names as the compiler prints types.
std::string DTypeName(kiln::v1::DataType t) {
  return absl::AsciiStrToLower(kiln::v1::DataType_Name(t));
}

// "1.2 MiB (weights 1.0 MiB, intermediates 64.0 KiB, kernel temporaries
// 32.0 KiB, code 12.5 KiB)".
std::string FormatLoadedMemory(const kiln::v1::LoadedMemory& m) {
  std::string out =
      absl::StrCat(HumanBytes(m.total_bytes()), " (weights ", HumanBytes(m.constant_bytes()),
                   ", intermediates ", HumanBytes(m.workspace_bytes()));
  if (m.kernel_temp_bytes() > 0) {
    absl::StrAppend(&out, ", kernel temporaries ", HumanBytes(m.kernel_temp_bytes()));
  }
  absl::StrAppend(&out, ", code ", HumanBytes(m.code_bytes()));
  if (m.source_bytes() > 0) absl::StrAppend(&out, ", source ", HumanBytes(m.source_bytes()));
  if (m.shape_variants() > 1) absl::StrAppend(&out, "; ", m.shape_variants(), " shapes");
  return out + ")";
}

}  // namespace

std::string FormatCompileReport(const kiln::v1::CompileModelResponse& response) {
  const kiln::v1::CompileReport& r = response.report();
  std::string out = absl::StrCat("model ", response.model_name(), " (version ",
                                 response.version(), ")\n\npasses\n");
  absl::StrAppend(&out, absl::StrFormat("  %-32s %10s %10s  %s\n", "pass", "ms", "self ms", "result"));
  for (const auto& p : r.passes()) {
    std::string name = std::string(p.depth() * 2, ' ') + p.name();
    std::string result = p.skipped() ? absl::StrCat("skipped (", p.skip_reason(), ")")
                                     : (p.changed() ? "changed" : "unchanged");
    absl::StrAppend(&out, absl::StrFormat("  %-32s %10.3f %10.3f  %s\n", name, p.ms(), p.self_ms(), result));
  }
  absl::StrAppend(&out, "\nkernels\n");
  absl::StrAppend(&out, absl::StrFormat("  %-28s %-16s %10s %9s  %-10s  %s\n", "kernel", "key",
                                        "compile ms", "load ms", "cache", "ops"));
  for (const auto& k : r.kernels()) {
    std::string source = k.cache_source().empty() ? (k.cache_hit() ? "hit" : "miss")
                                                  : k.cache_source();
    absl::StrAppend(&out, absl::StrFormat("  %-28s %-16s %10.3f %9s  %-10s  %s\n", k.name(),
                                          k.key().substr(0, 16), k.compile_ms(),
                                          k.load_ms() > 0 ? absl::StrFormat("%.3f", k.load_ms()) : "-",
                                          source, absl::StrJoin(k.ops(), "+")));
    if (!k.miss_reason().empty()) absl::StrAppend(&out, "      miss: ", k.miss_reason(), "\n");
    if (!k.tuned().empty()) absl::StrAppend(&out, "      tuned: ", k.tuned(), "\n");
    if (!k.tuning_ignored().empty()) {
      absl::StrAppend(&out, "      tuning record ignored: ", k.tuning_ignored(), "\n");
    }
  }
  absl::StrAppend(&out, absl::StrFormat(
                            "\ntotal %.3f ms (passes %.3f ms, codegen %.3f ms); %d kernels: %d "
                            "cache hits, %d misses\n",
                            r.total_ms(), r.passes_ms(), r.codegen_ms(), r.kernels_size(),
                            r.cache_hits(), r.cache_misses()));
  absl::StrAppend(&out, absl::StrFormat("intermediates %d bytes per inference (%d unplanned)\n",
                                        r.intermediate_bytes(), r.intermediate_bytes_unplanned()));
  if (r.has_loaded()) absl::StrAppend(&out, "loaded ", FormatLoadedMemory(r.loaded()), "\n");
  for (const auto& d : r.ir_dumps()) {
    absl::StrAppend(&out, "\n-- IR after ", d.after_pass(), " --\n", d.text());
  }
  return out;
}

std::string FormatCacheStats(const kiln::v1::GetCacheStatsResponse& s) {
  std::string out = absl::StrFormat(
      "memory: %d entries, %d bytes, %d hits\n"
      "disk:   %s, %d entries, %d bytes, %d hits, %d evictions, %d corrupt, %d write failures\n"
      "misses %d, compiles %d, compile time spent %.3f ms, saved %.3f ms\n",
      s.entries(), s.memory_bytes(), s.memory_hits(),
      !s.disk_enabled() ? "off" : s.disk_writing() ? "on" : "on (read only: writes paused)",
      s.disk_entries(), s.disk_bytes(), s.disk_hits(), s.evictions(), s.corrupt_entries(),
      s.disk_write_failures(), s.misses(), s.compiles(), s.compile_ms_total(),
      s.compile_ms_saved());
  if (s.has_remote()) {
    const kiln::v1::RemoteCacheStats& r = s.remote();
    absl::StrAppend(
        &out, absl::StrFormat(
                  "remote: %s %s, %d hits, %d misses, %d errors, %d corrupt, %d writes, "
                  "%d dropped, lookup %.3f ms mean\n"
                  "leases: %d taken, %d waits, %d got the kernel, %d compiled after all\n",
                  r.address(), r.available() ? "up" : "UNAVAILABLE", r.hits(), r.misses(),
                  r.errors(), r.corrupt_entries(), r.writes(), r.write_drops(),
                  r.lookups() > 0 ? r.lookup_ms_total() / r.lookups() : 0.0, r.leases_acquired(),
                  r.lease_waits(), r.lease_wait_hits(), r.lease_timeouts()));
  }
  absl::StrAppend(&out, absl::StrFormat(
                            "tuning: %d records for this CPU (%d in all), used %d times\n",
                            s.tuning_records(), s.tuning_records_total(), s.tuning_uses()));
  if (s.entry_size() == 0) return out;
  absl::StrAppend(&out, absl::StrFormat("  %-16s %6s %12s %9s  %-10s %-8s  %-6s  %s\n", "key",
                                        "hits", "compile ms", "bytes", "origin", "options",
                                        "tuned", "ops"));
  for (const auto& e : s.entry()) {
    const std::string tuned = e.tuned().empty() ? "-" : absl::StrFormat("%.2fx", e.tuned_gain());
    // The tuned schedule, part of the options, gets a line of its own.
    const std::string options = e.codegen_options().substr(0, e.codegen_options().find(" tuned "));
    absl::StrAppend(&out, absl::StrFormat("  %-16s %6d %12.3f %9d  %-10s %-8s  %-6s  %s\n",
                                          e.key().substr(0, 16), e.hits(), e.compile_ms(),
                                          e.object_bytes(), e.origin(),
                                          options, tuned,
                                          absl::StrJoin(e.ops(), "+")));
    if (!e.tuned().empty()) absl::StrAppend(&out, "      tuned: ", e.tuned(), "\n");
  }
  return out;
}

std::string FormatKernels(const kiln::v1::ListKernelsResponse& kernels) {
  std::string out;
  for (const auto& k : kernels.kernels()) {
    std::vector<std::string> args;
    for (const auto& a : k.args()) {
      args.push_back(absl::StrCat(a.datatype(), "[", absl::StrJoin(a.shape(), ","), "]"));
    }
    absl::StrAppend(&out, absl::StrFormat("%-16s %-28s %s  (%s)\n", k.key().substr(0, 16),
                                          k.symbol(), absl::StrJoin(k.ops(), "+"),
                                          absl::StrJoin(args, ", ")));
  }
  return out.empty() ? "no kernels\n" : out;
}

std::string FormatBenchmark(const kiln::v1::BenchmarkKernelResponse& b) {
  std::string out = absl::StrFormat(
      "%d repeats of %d runs: mean %.3f us, median %.3f us, min %.3f us, max %.3f us, "
      "std %.3f us, p90 %.3f us, p99 %.3f us\n",
      b.results_s_size(), b.number(), b.mean_s() * 1e6, b.median_s() * 1e6, b.min_s() * 1e6,
      b.max_s() * 1e6, b.std_s() * 1e6, b.p90_s() * 1e6, b.p99_s() * 1e6);
  // A server without the roofline sends none: print nothing rather than zeros.
  if (!b.has_roofline()) return out;
  const kiln::v1::KernelRoofline& r = b.roofline();
  absl::StrAppend(
      &out, absl::StrFormat("roofline: %.4g MFLOP, %.4g MB per call; %.2f GFLOPS = %.1f%% of "
                            "FMA peak %.1f GFLOPS, %.2f GB/s = %.1f%% of triad bandwidth %.1f GB/s "
                            "(%d thread%s, %s)\n",
                            r.flops() / 1e6, r.bytes() / 1e6, r.gflops(), 100 * r.fma_fraction(),
                            r.peak_gflops(), r.gbps(), 100 * r.bandwidth_fraction(),
                            r.peak_gbps(), r.threads(), r.threads() == 1 ? "" : "s", r.cpu_name()));
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
    if (m.row_chunks() > 1)
      absl::StrAppend(&out, absl::StrFormat(" (as %d slices)", m.row_chunks()));
    absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, absl::StrFormat("  %-28s %7s %10s %10s %10s %10s %10s %10s\n",
                                          "kernel", "count", "first us", "mean us", "p50 us",
                                          "p90 us", "p99 us", "max us"));
    std::vector<const kiln::v1::KernelTiming*> rows;
    for (const auto& k : m.kernels()) rows.push_back(&k);
    if (m.has_inference()) rows.push_back(&m.inference());
    for (const kiln::v1::KernelTiming* k : rows) {
      absl::StrAppend(&out, absl::StrFormat("  %-28s %7d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n",
                                            k->name(), k->count(), k->first_call().ns() / 1e3,
                                            k->mean_ns() / 1e3, k->p50_ns() / 1e3,
                                            k->p90_ns() / 1e3, k->p99_ns() / 1e3,
                                            k->max_ns() / 1e3));
    }
    if (m.batch_stats_size() > 0) {
      absl::StrAppend(&out, "  batches:");
      for (const auto& b : m.batch_stats()) {
        const uint64_t n = std::max<uint64_t>(1, b.compute_infer().count());
        absl::StrAppend(&out, absl::StrFormat(" %d x%d (run mean %.3f ms)", b.batch_size(),
                                              b.compute_infer().count(),
                                              b.compute_infer().ns() / 1e6 / n));
      }
      absl::StrAppend(&out, "\n");
    }
    if (m.has_queue() && m.queue().count() > 0) {
      absl::StrAppend(&out, absl::StrFormat(
                                "  queue: %d requests, p50 %.3f us, p99 %.3f us; %d padded rows\n",
                                m.queue().count(), m.queue().p50_ns() / 1e3,
                                m.queue().p99_ns() / 1e3, m.padded_rows()));
    }
    if (m.shape_compiles() > 0 || m.shape_variants_loaded() > 0) {
      absl::StrAppend(&out, "  shapes: ", m.shape_variants_loaded(), " loaded, ",
                      m.shape_compiles(), " compiled besides the load-time one\n");
      for (const auto& shape : m.shapes()) {
        absl::StrAppend(
            &out,
            absl::StrFormat("    %-30s %7d inferences, first %.3f us, p50 %.3f us", shape.shape(),
                            shape.inference().count(), shape.inference().first_call().ns() / 1e3,
                            shape.inference().p50_ns() / 1e3));
        if (shape.row_chunks() > 1) {
          absl::StrAppend(&out, absl::StrFormat(" (as %d slices)", shape.row_chunks()));
        }
        absl::StrAppend(&out, "\n");
      }
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
  std::map<std::string, int> versions_of;  // a name with several: each line says which
  for (const auto& m : models.models()) ++versions_of[m.name()];
  for (const auto& m : models.models()) {
    const std::string version =
        versions_of[m.name()] > 1 ? absl::StrCat("  version=", m.version()) : "";
    std::vector<std::string> ins, outs;
    for (const auto& v : m.inputs()) ins.push_back(absl::StrCat(v.name(), ":", DTypeName(v.dtype()), Shape(v.dims())));
    for (const auto& v : m.outputs()) outs.push_back(absl::StrCat(v.name(), ":", DTypeName(v.dtype()), Shape(v.dims())));
    absl::StrAppend(&out, m.name(), version, "  kernels=", m.kernels(),
                    "  inputs=", absl::StrJoin(ins, ","),
                    "  outputs=", absl::StrJoin(outs, ","), "\n");
    if (m.has_memory()) absl::StrAppend(&out, "  loaded ", FormatLoadedMemory(m.memory()), "\n");
  }
  if (out.empty()) out = "no models\n";
  if (models.max_loaded_bytes() > 0) {  // servers before the budget leave it 0
    absl::StrAppend(&out, "loaded ", HumanBytes(models.loaded_bytes()), " of ",
                    HumanBytes(models.max_loaded_bytes()), " (--max-loaded-mb)");
    if (models.variants_unloaded() > 0) {
      absl::StrAppend(&out, "; ", models.variants_unloaded(),
                      " shape variants unloaded to make room");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
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
    const ElementType* type = FindElementType(array.datatype);
    if (type == nullptr) {
      absl::StrAppend(&out, " (", array.data.size(), " bytes)\n");
      continue;
    }
    const size_t count = array.data.size() / type->size;
    std::vector<std::string> values;
    for (size_t i = 0; i < std::min<size_t>(count, 8); ++i) {
      values.push_back(FormatElement(*type, array.data, i));
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
