#include "server/report_conversion.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/host_peaks.h"
#include "runtime/roofline.h"

namespace kiln::server {

void FillPassTimings(const CompileRecord& record,
                     google::protobuf::RepeatedPtrField<kiln::v1::PassTiming>* out) {
  for (const PassRecord& p : record.passes) {
    kiln::v1::PassTiming* t = out->Add();
    t->set_name(p.name);
    t->set_ms(p.ms);
    t->set_self_ms(p.self_ms);
    t->set_changed(p.changed);
    t->set_skipped(p.skipped);
    t->set_skip_reason(p.skip_reason);
    t->set_depth(p.depth);
  }
}

void FillCompileReport(const engine::CompileResult& result, kiln::v1::CompileReport* report) {
  FillPassTimings(result.record, report->mutable_passes());
  for (const engine::KernelCompileReport& k : result.kernels) {
    kiln::v1::KernelReport* kr = report->add_kernels();
    kr->set_name(k.name);
    for (const std::string& op : k.ops) kr->add_ops(op);
    for (const std::string& n : k.nodes) kr->add_nodes(n);
    kr->set_key(k.key_hex);
    kr->set_compile_ms(k.compile_ms);
    kr->set_cache_hit(k.cache_hit());
    kr->set_cache_source(engine::CacheSourceName(k.source));
    kr->set_load_ms(k.load_ms);
    kr->set_miss_reason(k.miss_reason);
    kr->set_tuned(k.tuned);
    kr->set_tuning_ignored(k.override_ignored);
  }
  report->set_passes_ms(result.record.passes_ms);
  report->set_codegen_ms(result.codegen_ms);
  report->set_total_ms(result.total_ms);
  report->set_cache_hits(result.cache_hits);
  report->set_cache_misses(result.cache_misses);
  report->set_tuned_kernels(result.tuned_kernels);
  report->set_intermediate_bytes(result.intermediate_bytes);
  report->set_intermediate_bytes_unplanned(result.intermediate_bytes_unplanned);
  for (const IrDumpRecord& d : result.record.ir_dumps) {
    kiln::v1::IrDump* dump = report->add_ir_dumps();
    dump->set_after_pass(d.after_pass);
    dump->set_text(d.text);
  }
}

void FillLoadedMemory(const engine::ModelMemory& memory, kiln::v1::LoadedMemory* out) {
  out->set_total_bytes(memory.total_bytes());
  out->set_constant_bytes(memory.footprint.constant_bytes);
  out->set_workspace_bytes(memory.footprint.arena_bytes);
  out->set_kernel_temp_bytes(memory.footprint.temp_bytes);
  out->set_code_bytes(memory.footprint.code_bytes);
  out->set_source_bytes(memory.source_bytes);
  out->set_shape_variants(memory.variants);
}

void FillCacheStats(const engine::CacheStats& stats, kiln::v1::GetCacheStatsResponse* out) {
  out->set_entries(stats.memory_entries);
  out->set_hits(stats.memory_hits + stats.disk_hits + stats.remote_hits);
  out->set_misses(stats.misses);
  out->set_compile_ms_total(stats.compile_ms_total);
  out->set_compile_ms_saved(stats.compile_ms_saved);
  out->set_memory_bytes(stats.memory_bytes);
  out->set_memory_hits(stats.memory_hits);
  out->set_disk_hits(stats.disk_hits);
  out->set_disk_enabled(stats.disk.enabled);
  out->set_disk_writing(stats.disk.writing);
  out->set_disk_entries(stats.disk.entries);
  out->set_disk_bytes(stats.disk.bytes);
  out->set_evictions(stats.disk.evictions);
  out->set_corrupt_entries(stats.disk.corrupt);
  out->set_disk_write_failures(stats.disk.write_failures);
  out->set_compiles(stats.compiles);
  out->set_memory_evictions(stats.memory_evictions);
  if (stats.remote.enabled) {
    const engine::RemoteCacheStats& r = stats.remote;
    kiln::v1::RemoteCacheStats* remote = out->mutable_remote();
    remote->set_address(r.address);
    remote->set_available(r.available);
    remote->set_hits(r.hits);
    remote->set_misses(r.misses);
    remote->set_errors(r.errors);
    remote->set_corrupt_entries(r.corrupt);
    remote->set_writes(r.writes);
    remote->set_write_drops(r.write_drops);
    remote->set_leases_acquired(r.leases_acquired);
    remote->set_lease_waits(r.lease_waits);
    remote->set_lease_wait_hits(r.lease_wait_hits);
    remote->set_lease_timeouts(r.lease_timeouts);
    remote->set_lookups(r.lookups.count);
    remote->set_lookup_ms_total(static_cast<double>(r.lookups.sum_ns) / 1e6);
  }
  out->set_tuning_records(stats.tuning_records_here);
  out->set_tuning_records_total(stats.tuning_records_total);
  out->set_tuning_uses(stats.tuning_uses);
  for (const engine::KernelInfo& e : stats.entries) {
    kiln::v1::CacheEntry* entry = out->add_entry();
    entry->set_key(e.key_hex);
    for (const std::string& op : e.ops) entry->add_ops(op);
    entry->set_hits(e.hits);
    entry->set_compile_ms(e.compile_ms);
    entry->set_target_triple(e.triple);
    entry->set_cpu(e.cpu);
    entry->set_codegen_options(e.options);
    entry->set_object_bytes(e.object_bytes);
    entry->set_last_use_unix_s(e.last_use_unix_s);
    entry->set_origin(engine::CacheSourceName(e.origin));
    entry->set_tuned(e.tuned);
    entry->set_tuned_gain(e.tuned_gain);
  }
}

void FillKernelRoofline(const engine::KernelInfo& kernel, double seconds, int threads,
                        kiln::v1::KernelRoofline* out) {
  const runtime::HostPeaks& peaks = runtime::CachedHostPeaks();
  const runtime::Roofline r =
      runtime::ComputeRoofline(kernel.flops, kernel.bytes, seconds, peaks, threads);
  out->set_flops(kernel.flops);
  out->set_bytes(kernel.bytes);
  out->set_gflops(r.gflops);
  out->set_gbps(r.gbps);
  out->set_peak_gflops(r.peak_gflops);
  out->set_peak_gbps(r.peak_gbps);
  out->set_fma_fraction(r.fma_fraction);
  out->set_bandwidth_fraction(r.bandwidth_fraction);
  out->set_threads(threads);
  out->set_cpu_name(peaks.cpu_name);
}

void FillKernelTiming(const std::string& name, const runtime::DurationSnapshot& d,
                      kiln::v1::KernelTiming* kt) {
  kt->set_name(name);
  kt->set_count(d.count);
  kt->set_total_ns(d.total_ns);
  kt->set_min_ns(d.min_ns);
  kt->set_max_ns(d.max_ns);
  if (d.count > 0) {
    kt->mutable_first_call()->set_count(1);
    kt->mutable_first_call()->set_ns(d.first_ns);
  }
  kt->mutable_steady()->set_count(d.steady_count);
  kt->mutable_steady()->set_ns(d.steady_total_ns);
  kt->set_mean_ns(d.steady_mean_ns);
  kt->set_p50_ns(d.p50_ns);
  kt->set_p90_ns(d.p90_ns);
  kt->set_p99_ns(d.p99_ns);
}

void FillModelTiming(const engine::ServedModel& served, kiln::v1::ModelTiming* out) {
  out->set_model_name(served.name);
  FillPassTimings(*served.compile_record, out->mutable_last_compile_passes());
  if (served.model) {  // none for a model whose inputs decide shapes
    runtime::ModelTimingStats stats = served.model->TimingStats();
    out->set_inference_count(stats.inference.count);
    out->set_inference_total_ns(stats.inference.total_ns);
    out->set_row_chunks(served.model->row_chunks());
    FillKernelTiming("inference", stats.inference, out->mutable_inference());
    for (const runtime::KernelTimingStats& k : stats.kernels) {
      FillKernelTiming(k.name, k.durations, out->add_kernels());
    }
  }
  if (served.batch_stats) {
    const engine::BatchStatisticsSnapshot batches = served.batch_stats->Snapshot();
    for (const engine::BatchSizeStatistics& b : batches.batches) {
      kiln::v1::InferBatchStatistics* bs = out->add_batch_stats();
      bs->set_batch_size(b.batch_size);
      for (auto [phase, ns] : {std::make_pair(bs->mutable_compute_input(), b.compute_input_ns),
                               std::make_pair(bs->mutable_compute_infer(), b.compute_infer_ns),
                               std::make_pair(bs->mutable_compute_output(), b.compute_output_ns)}) {
        phase->set_count(b.count);
        phase->set_ns(ns);
      }
    }
    if (batches.queue.count > 0) FillKernelTiming("queue", batches.queue, out->mutable_queue());
    out->set_padded_rows(batches.padded_rows);
  }
  if (served.variants) {
    out->set_shape_compiles(served.variants->compiles());
    const auto loaded = served.variants->Loaded();
    out->set_shape_variants_loaded(static_cast<int>(loaded.size()));
    for (const auto& [shapes, model] : loaded) {
      kiln::v1::ShapeTiming* st = out->add_shapes();
      std::vector<std::string> parts;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& inputs = served.variants->signature().inputs;
        parts.push_back(absl::StrCat(i < inputs.size() ? inputs[i].name : "?", "=",
                                     ShapeToString(shapes[i])));
      }
      st->set_shape(absl::StrJoin(parts, " "));
      st->set_row_chunks(model->row_chunks());
      FillKernelTiming("inference", model->TimingStats().inference, st->mutable_inference());
    }
  }
}

kiln::v1::DataType WireDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return kiln::v1::FLOAT32;
    case DType::kInt64: return kiln::v1::INT64;
    case DType::kBool: return kiln::v1::BOOL;
    case DType::kFloat16: return kiln::v1::FLOAT16;
    case DType::kBFloat16: return kiln::v1::BFLOAT16;
    case DType::kFloat64: return kiln::v1::FLOAT64;
    case DType::kInt8: return kiln::v1::INT8;
    case DType::kUInt8: return kiln::v1::UINT8;
    case DType::kInt16: return kiln::v1::INT16;
    case DType::kUInt16: return kiln::v1::UINT16;
    case DType::kInt32: return kiln::v1::INT32;
    case DType::kUInt32: return kiln::v1::UINT32;
    case DType::kUInt64: return kiln::v1::UINT64;
  }
  return kiln::v1::DATA_TYPE_UNSPECIFIED;
}

void FillValueInfo(const TensorSignature& value, kiln::v1::ValueInfo* out) {
  out->set_name(value.name);
  out->set_dtype(WireDataType(value.dtype));
  for (int64_t d : value.dims) out->add_dims(d);
}

void FillValueInfo(const ValueSpec& value, kiln::v1::ValueInfo* out) {
  out->set_name(value.name);
  out->set_dtype(WireDataType(value.type.dtype));
  for (int64_t d : value.type.shape) out->add_dims(d);
}

}  // namespace kiln::server
