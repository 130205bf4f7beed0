#include "server/report_conversion.h"

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

void FillCompileReport(const runtime::CompileResult& result, kiln::v1::CompileReport* report) {
  FillPassTimings(result.record, report->mutable_passes());
  for (const runtime::KernelCompileReport& k : result.kernels) {
    kiln::v1::KernelReport* kr = report->add_kernels();
    kr->set_name(k.name);
    for (const std::string& op : k.ops) kr->add_ops(op);
    for (const std::string& n : k.nodes) kr->add_nodes(n);
    kr->set_key(k.key_hex);
    kr->set_compile_ms(k.compile_ms);
    kr->set_cache_hit(k.cache_hit);
  }
  report->set_passes_ms(result.record.passes_ms);
  report->set_codegen_ms(result.codegen_ms);
  report->set_total_ms(result.total_ms);
  report->set_cache_hits(result.cache_hits);
  report->set_cache_misses(result.cache_misses);
  for (const IrDumpRecord& d : result.record.ir_dumps) {
    kiln::v1::IrDump* dump = report->add_ir_dumps();
    dump->set_after_pass(d.after_pass);
    dump->set_text(d.text);
  }
}

void FillCacheStats(const runtime::CacheStats& stats, kiln::v1::GetCacheStatsResponse* out) {
  out->set_entries(stats.entries);
  out->set_hits(stats.hits);
  out->set_misses(stats.misses);
  out->set_compile_ms_total(stats.compile_ms_total);
  out->set_compile_ms_saved(stats.compile_ms_saved);
  for (const runtime::CacheEntryStats& e : stats.per_entry) {
    kiln::v1::CacheEntry* entry = out->add_entry();
    entry->set_key(e.key_hex);
    for (const std::string& op : e.ops) entry->add_ops(op);
    entry->set_hits(e.hits);
    entry->set_compile_ms(e.compile_ms);
  }
}

void FillModelTiming(const std::string& name, const runtime::CompiledModel& model,
                     kiln::v1::ModelTiming* out) {
  out->set_model_name(name);
  FillPassTimings(model.program().record, out->mutable_last_compile_passes());
  runtime::ModelTimingStats stats = model.TimingStats();
  out->set_inference_count(stats.inference_count);
  out->set_inference_total_ns(stats.inference_total_ns);
  for (const runtime::KernelTimingStats& k : stats.kernels) {
    kiln::v1::KernelTiming* kt = out->add_kernels();
    kt->set_name(k.name);
    kt->set_count(k.count);
    kt->set_total_ns(k.total_ns);
    kt->set_min_ns(k.min_ns);
    kt->set_max_ns(k.max_ns);
  }
}

void FillValueInfo(const ValueSpec& value, kiln::v1::ValueInfo* out) {
  out->set_name(value.name);
  out->set_dtype(value.type.dtype == DType::kInt64 ? kiln::v1::INT64 : kiln::v1::FLOAT32);
  for (int64_t d : value.type.shape) out->add_dims(d);
}

}  // namespace kiln::server
