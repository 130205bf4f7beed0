#include "engine/model_manager.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "compiler/ir/tensor_type.h"
#include "compiler/passes/graph_at_rows.h"
#include "engine/row_chunks.h"
#include "runtime/tensor.h"

namespace kiln::engine {
namespace {

// "x=[4,24] y=[4,24]": a variant's graph by its inputs' shapes.
std::string InputShapes(const Graph& graph) {
  std::vector<std::string> parts;
  for (const Node* in : graph.inputs()) {
    parts.push_back(absl::StrCat(in->name, "=", ShapeToString(in->type.shape)));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(ModelManagerOptions options) {
  absl::StatusOr<std::shared_ptr<runtime::JitEngine>> jit = runtime::JitEngine::Create();
  if (!jit.ok()) return jit.status();
  return std::unique_ptr<ModelManager>(new ModelManager(options, *jit));
}

CompileDriverOptions ModelManager::DriverOptions() const {
  CompileDriverOptions driver;
  driver.compile_threads = options_.compile_threads;
  driver.nice = options_.compile_nice;
  driver.codegen = options_.codegen;
  return driver;
}

absl::StatusOr<CompileResult> ModelManager::Compile(const std::string& name, Graph graph,
                                                    const CompileOptions& options,
                                                    const CompileEventSink& events,
                                                    absl::Time deadline,
                                                    const ModelIdentity& identity) {
  return CompileAndStore(name, std::move(graph), options, events, deadline, nullptr, {},
                         identity);
}

const ServedModel* ModelManager::Highest(const std::string& name) const {
  auto it = models_.find(name);
  if (it == models_.end() || it->second.empty()) return nullptr;
  return &it->second.rbegin()->second;
}

int ModelManager::ModelCount() const {
  size_t count = 0;
  for (const auto& [name, versions] : models_) count += versions.size();
  return static_cast<int>(count);
}

bool ModelManager::AddsAModel(const std::string& name, const ModelIdentity& identity) const {
  auto it = models_.find(name);
  if (it == models_.end()) return true;
  return identity.beside && !it->second.count(identity.version);
}

absl::StatusOr<int64_t> ModelManager::VersionFor(const std::string& name,
                                                 const ModelIdentity& identity) const {
  if (identity.beside) {
    if (identity.version < 1) {
      return absl::InvalidArgumentError("a model served beside others needs its version");
    }
    auto it = models_.find(name);
    if (it == models_.end()) return identity.version;
    auto same = it->second.find(identity.version);
    if (same == it->second.end() || same->second.fingerprint == identity.fingerprint ||
        identity.replace) {
      return identity.version;
    }
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' version ",
                                                 identity.version,
                                                 " already serves another model"));
  }
  const ServedModel* top = Highest(name);
  if (top == nullptr) return identity.version > 0 ? identity.version : 1;
  // The same model again keeps its version, unless a version is named: the
  // cluster's (a model store's) over a stale local copy's.
  if (top->fingerprint == identity.fingerprint &&
      (identity.version == 0 || identity.version == top->version)) {
    return top->version;
  }
  if (!identity.replace) {
    return absl::AlreadyExistsError(absl::StrCat(
        "model '", name, "' already serves another model (version ", top->version,
        "); ask to replace it (CompileModelRequest.replace, kiln compile --replace) to serve "
        "this one as version ",
        top->version + 1, ", or unload it first"));
  }
  return identity.version > 0 ? identity.version : top->version + 1;
}

absl::Status ModelManager::CheckServable(const std::string& name,
                                         const ModelIdentity& identity) const {
  absl::MutexLock lock(&mutex_);
  return VersionFor(name, identity).status();
}

absl::StatusOr<ServedModel> ModelManager::Serve(const std::string& name,
                                                const std::string& version) const {
  {
    absl::MutexLock lock(&mutex_);
    auto it = models_.find(name);
    if (it != models_.end() && !it->second.empty()) {
      const std::map<int64_t, ServedModel>& versions = it->second;
      if (version.empty()) return versions.rbegin()->second;
      int64_t number = 0;
      if (absl::SimpleAtoi(version, &number)) {
        auto found = versions.find(number);
        if (found != versions.end()) return found->second;
      }
      std::vector<int64_t> served;
      for (const auto& [v, model] : versions) served.push_back(v);
      return absl::NotFoundError(absl::StrCat("model '", name, "' has no version '", version,
                                              "'; it serves version",
                                              served.size() > 1 ? "s " : " ",
                                              absl::StrJoin(served, ", ")));
    }
  }
  return states_.WhyNotServed(name);
}

absl::StatusOr<CompileResult> ModelManager::CompileWithShapes(const std::string& name,
                                                              std::optional<Graph> graph,
                                                              SymbolicModel symbolic,
                                                              const CompileOptions& options,
                                                              const CompileEventSink& events,
                                                              absl::Time deadline,
                                                              const ModelIdentity& identity) {
  if (absl::Status s = ValidateSymbolRanges(symbolic.signature, symbolic.ranges); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateDynamicBatching(symbolic.batching, symbolic.signature); !s.ok()) {
    return s;
  }
  // Variants compile like the first, without progress events, deadline or
  // the first caller's stop check (its call is long gone by then): the
  // request that triggers one waits for it.
  CompileOptions variant_options = options;
  variant_options.progress = nullptr;
  variant_options.should_stop = nullptr;
  CompileVariant compile = [this, name, options = std::move(variant_options)](Graph g)
      -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
    const Admission admission{&budget_,
                              absl::StrCat("shape ", InputShapes(g), " of model '", name, "'")};
    absl::StatusOr<CompiledModelAndReport> compiled =
        CompileModel(name, std::move(g), options, DriverOptions(), cache_, nullptr,
                     absl::InfiniteFuture(), admission);
    if (!compiled.ok()) return compiled.status();
    return std::move(compiled->model);
  };
  // The model's bytes, kept to import it at other shapes, are held as long
  // as its variants are.
  absl::StatusOr<MemoryBudget::Charge> source = budget_.Reserve(
      symbolic.source_bytes,
      absl::StrCat("model '", name, "' (its source, kept to compile its other shapes)"));
  if (!source.ok()) return source.status();
  std::shared_ptr<ShapeVariants> variants = ChargedTo(
      std::make_unique<ShapeVariants>(symbolic.signature, symbolic.ranges, symbolic.graph_for,
                                      std::move(compile), options_.max_shape_variants),
      *std::move(source));
  variants->set_row_chunks(options_.row_chunks);
  if (static_cast<int>(symbolic.eager.size()) + 1 > options_.max_shape_variants) {
    return absl::ResourceExhaustedError(absl::StrCat(
        symbolic.eager.size(), " eager shapes and the load-time one exceed the server's bound of ",
        options_.max_shape_variants, " shapes per model (--max-shape-variants)"));
  }
  for (const TensorSignature& in : symbolic.signature.inputs) {
    if (in.decides_shapes && !symbolic.eager.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "eager shapes give sizes, not the values input '", in.name, "' needs"));
    }
  }
  if (!graph.has_value() && !symbolic.eager.empty()) {
    return absl::InvalidArgumentError("eager shapes need a graph to load");
  }
  for (const SymbolBinding& binding : symbolic.eager) {
    absl::StatusOr<std::vector<std::vector<int64_t>>> shapes =
        BindSymbols(symbolic.signature, binding);
    if (!shapes.ok()) return shapes.status();
    if (absl::Status s = variants->Check(*shapes); !s.ok()) return s;
  }
  return CompileAndStore(name, std::move(graph), options, events, deadline, std::move(variants),
                         symbolic, identity);
}

absl::StatusOr<CompileResult> ModelManager::CompileAndStore(
    const std::string& name, std::optional<Graph> graph, const CompileOptions& options,
    const CompileEventSink& events, absl::Time deadline, std::shared_ptr<ShapeVariants> variants,
    const SymbolicModel& symbolic, const ModelIdentity& identity) {
  {
    absl::MutexLock lock(&mutex_);
    if (absl::Status s = VersionFor(name, identity).status(); !s.ok()) return s;
    if (AddsAModel(name, identity) && ModelCount() >= options_.max_models) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server already holds ", ModelCount(),
                       " models, its limit (--max-models); unload one first"));
    }
  }
  ServedModel served;
  served.name = name;
  served.fingerprint = identity.fingerprint;
  CompileResult report;
  served.source_bytes = variants ? symbolic.source_bytes : 0;
  std::optional<CompiledModelAndReport> sliced;
  if (graph.has_value() && !variants) {
    sliced = FixedBatchAsSlices(name, *graph, options, events, deadline);
  }
  if (sliced.has_value()) {
    served.model = std::move(sliced->model);
    report = std::move(sliced->report);
  } else if (graph.has_value()) {
    absl::StatusOr<CompiledModelAndReport> compiled =
        CompileModel(name, *std::move(graph), options, DriverOptions(), cache_, events, deadline,
                     {&budget_, absl::StrCat("model '", name, "'")});
    if (!compiled.ok()) return compiled.status();
    served.model = std::move(compiled->model);
    report = std::move(compiled->report);
  } else {
    report.model_name = name;
  }
  served.compile_record = std::make_shared<const CompileRecord>(report.record);
  if (variants && served.model) {
    const Program& p = served.model->program();
    std::vector<std::vector<int64_t>> shapes;
    for (int v : p.inputs) shapes.push_back(p.values[v].type.shape);
    if (absl::Status s = variants->Check(shapes); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the shape the model was loaded at: ", s.message()));
    }
    variants->Add(shapes, served.model);
  }
  if (variants) {
    for (const SymbolBinding& binding : symbolic.eager) {
      absl::StatusOr<std::vector<std::vector<int64_t>>> eager =
          BindSymbols(variants->signature(), binding);
      if (!eager.ok()) return eager.status();
      absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> compiled = variants->Get(*eager);
      if (!compiled.ok()) return compiled.status();
    }
    served.variants = std::move(variants);
  }
  served.batch_stats = std::make_shared<BatchStatistics>();
  served.pads_new_batches =
      served.variants && symbolic.pad_new_batches &&
      ValidateDynamicBatching({/*max_batch_size=*/1, {}, 0}, served.variants->signature()).ok();
  if (symbolic.batching.enabled() && served.variants) {
    served.batcher = std::make_shared<DynamicBatcher>(
        symbolic.batching,
        [variants = served.variants](const std::vector<std::vector<int64_t>>& shapes) {
          return variants->Get(shapes);
        },
        served.batch_stats);
    // The batch sizes the batcher will form, compiled in the background now
    // rather than by the first batch of each (which would hold up every
    // request queued behind it). Only when dim 0 is the one symbolic dim:
    // other symbolic sizes are the requests' to choose.
    const ModelSignature& sig = served.variants->signature();
    bool batch_only = true;
    for (const TensorSignature& in : sig.inputs) {
      for (size_t d = 1; d < in.dims.size(); ++d) {
        batch_only &= in.dims[d] != TensorSignature::kSymbolicDim;
      }
    }
    for (int64_t size : symbolic.batching.preferred_batch_sizes) {
      if (!batch_only) break;
      std::vector<std::vector<int64_t>> shapes;
      for (const TensorSignature& in : sig.inputs) {
        shapes.push_back(in.dims);
        shapes.back()[0] = size;
      }
      served.variants->CompileSoon(shapes, BackgroundSchedule());
    }
  }
  if (absl::Now() > deadline || (options.should_stop && options.should_stop())) {
    // The caller has given up: a model it will never hear of is not loaded
    // (issue 20: abandoned compiles registered their model). Its kernels
    // stay cached for the next try.
    return absl::DeadlineExceededError(
        "the compile finished after its caller left or its deadline passed; its kernels are "
        "cached, the model is not loaded");
  }
  absl::MutexLock lock(&mutex_);
  if (AddsAModel(name, identity) && ModelCount() >= options_.max_models) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server already holds ", ModelCount(), " models, its limit (--max-models)"));
  }
  // Again: another compile of the name may have finished meanwhile.
  absl::StatusOr<int64_t> version = VersionFor(name, identity);
  if (!version.ok()) return version.status();
  served.version = *version;
  report.version = *version;
  std::map<int64_t, ServedModel>& versions = models_[name];
  // A compile through kiln.v1 makes the name serve this model alone; a
  // repository's version takes its own place among the others.
  if (!identity.beside) versions.clear();
  versions[*version] = std::move(served);
  states_.Forget(name);
  StatDuration hits, misses;
  for (const KernelCompileReport& k : report.kernels) {
    if (k.cache_hit()) {
      hits.Add(static_cast<int64_t>(k.load_ms * 1e6));
    } else {
      misses.Add(static_cast<int64_t>(k.compile_ms * 1e6));
    }
  }
  if (!identity.beside) {
    inference_stats_.KeepOnly(name, *version);
    request_histograms_.KeepOnly(name, *version);
  }
  inference_stats_.RecordCompile(name, *version, hits, misses);
  return report;
}

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> ModelManager::FindForShapes(
    const std::string& name, const std::vector<std::vector<int64_t>>& shapes) const {
  std::shared_ptr<ShapeVariants> variants;
  {
    absl::MutexLock lock(&mutex_);
    const ServedModel* top = Highest(name);
    if (top == nullptr) return absl::NotFoundError(absl::StrCat("no model named '", name, "'"));
    if (!top->variants) return top->model;
    variants = top->variants;
  }
  return variants->Get(shapes);  // may compile: outside the manager's lock
}

std::shared_ptr<runtime::CompiledModel> ModelManager::Find(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  const ServedModel* top = Highest(name);
  return top == nullptr ? nullptr : top->model;
}

std::vector<int64_t> ModelManager::Versions(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [version, served] : it->second) out.push_back(version);
  return out;
}

std::optional<ServedModel> ModelManager::Get(const std::string& name) const {
  absl::MutexLock lock(&mutex_);
  const ServedModel* top = Highest(name);
  if (top == nullptr) return std::nullopt;
  return *top;
}

std::vector<ServedModel> ModelManager::List() const {
  absl::MutexLock lock(&mutex_);
  std::vector<ServedModel> out;
  out.reserve(ModelCount());
  for (const auto& [name, versions] : models_) {
    for (const auto& [version, served] : versions) out.push_back(served);
  }
  return out;
}

bool ModelManager::UnloadColdestVariant(absl::string_view for_what) {
  std::vector<std::pair<std::string, std::shared_ptr<ShapeVariants>>> sets;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [name, versions] : models_) {
      for (const auto& [version, served] : versions) {
        if (served.variants) sets.emplace_back(name, served.variants);
      }
    }
  }
  // Each model's coldest idle variant, coldest first. One that a call takes
  // meanwhile is skipped (UnloadIfIdle refuses it); the next is tried.
  struct Candidate {
    uint64_t last_use;
    size_t set;
    VariantKey key;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (std::optional<ShapeVariants::IdleVariant> idle = sets[i].second->ColdestIdle()) {
      candidates.push_back({idle->last_use, i, std::move(idle->key)});
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.last_use < b.last_use; });
  for (const Candidate& c : candidates) {
    const auto& [name, variants] = sets[c.set];
    std::shared_ptr<runtime::CompiledModel> gone = variants->UnloadIfIdle(c.key);
    if (gone == nullptr) continue;
    VariantUnloaded event{name, VariantKeyToString(variants->signature(), c.key),
                          gone->footprint().held_bytes(), std::string(for_what)};
    gone.reset();   // the last owner: its memory and its charge go here
    cache_.Trim();  // its kernels, unless another model shares them, may go now
    if (options_.on_variant_unloaded) options_.on_variant_unloaded(event);
    return true;
  }
  return false;
}

std::optional<CompiledModelAndReport> ModelManager::FixedBatchAsSlices(
    const std::string& name, const Graph& graph, const CompileOptions& options,
    const CompileEventSink& events, absl::Time deadline) {
  if (options_.row_chunks.rows == RowChunkSetting::kOff || graph.inputs().empty()) {
    return std::nullopt;
  }
  const int64_t rows = graph.inputs()[0]->type.shape.empty() ? 0 : graph.inputs()[0]->type.shape[0];
  for (const Node* in : graph.inputs()) {
    if (in->type.shape.empty() || in->type.shape[0] != rows) return std::nullopt;
  }
  if (rows < 2) return std::nullopt;
  // The limits are the whole batch's: a value no call could allocate, or
  // larger than the whole budget, is refused by the whole compile (which
  // names the value and the limit) though one row of it would fit.
  for (const Node* n : graph.AllNodes()) {
    absl::StatusOr<int64_t> elements = CheckedNumElements(n->type.shape);
    if (!elements.ok() || *elements > runtime::kMaxTensorBytes / DTypeSize(n->type.dtype) ||
        *elements * DTypeSize(n->type.dtype) > budget_.max_bytes()) {
      return std::nullopt;
    }
  }
  // Each part (the slices' model, or their head and the whole-batch tail)
  // is a model of its own, charged to the budget as the model's.
  std::optional<CompileResult> slices_report, tail_report;
  auto compile =
      [&](Graph part,
          const std::string& what) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
    absl::StatusOr<CompiledModelAndReport> compiled =
        CompileModel(name, std::move(part), options, DriverOptions(), cache_, events, deadline,
                     {&budget_, absl::StrCat("model '", name, "' (", what, ")")});
    if (!compiled.ok()) return compiled.status();
    (what == "tail" ? tail_report : slices_report) = std::move(compiled->report);
    return std::move(compiled->model);
  };
  TailCompiler tail;
  tail.graph_for = [&](int64_t slice_rows) { return GraphAtRows(graph, rows, slice_rows); };
  tail.compile = compile;
  RowChunkReport said;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> chunked = RowChunkedModel(
      graph, rows, options_.row_chunks,
      [&](int64_t slice_rows) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
        KILN_ASSIGN_OR_RETURN(Graph part, GraphAtRows(graph, rows, slice_rows));
        return compile(std::move(part), "slices");
      },
      &said, &tail);
  if (!said.why_no_tail.empty()) {
    Log(LogLevel::kWarning, "row_chunks",
        absl::StrCat("model '", name, "' at batch ", rows, ": ", said.why_no_tail,
                     "; the slices run the whole graph"));
  }
  // A part that does not compile leaves the batch to compile whole, which
  // says what is wrong with the model, if anything is.
  if (!chunked.ok() || *chunked == nullptr || !slices_report.has_value()) {
    Log(LogLevel::kDebug, "row_chunks",
        absl::StrCat("model '", name, "' at batch ", rows, " runs whole: ",
                     !chunked.ok() ? chunked.status().ToString() : said.why_whole));
    return std::nullopt;
  }
  CompiledModelAndReport out{*std::move(chunked), *std::move(slices_report)};
  out.report.model_name = name;
  if (tail_report.has_value() && out.model->program().kernels.size() ==
                                     out.report.kernels.size() + tail_report->kernels.size()) {
    for (KernelCompileReport& k : tail_report->kernels) {
      k.name = runtime::kTailKernelPrefix + k.name;
      out.report.kernels.push_back(std::move(k));
    }
  }
  return out;
}

ModelMemory MemoryOf(const ServedModel& served) {
  ModelMemory memory;
  memory.source_bytes = served.source_bytes;
  // Each model object once: a batch run in row chunks holds its slice
  // model, which is usually a loaded variant too, and may outlive its
  // unloading as a variant.
  std::set<const runtime::CompiledModel*> counted;
  auto add_held = [&](const runtime::CompiledModel* model) {
    for (; model != nullptr && counted.insert(model).second; model = model->row_chunk_model()) {
      const runtime::ModelFootprint& f = model->footprint();
      memory.footprint.constant_bytes += f.constant_bytes;
      memory.footprint.arena_bytes += f.arena_bytes;
      memory.footprint.temp_bytes += f.temp_bytes;
      memory.footprint.code_bytes += f.code_bytes;
    }
  };
  std::vector<const runtime::CompiledModel*> loaded;
  if (served.model) loaded.push_back(served.model.get());
  if (served.variants) {
    for (const auto& [key, model] : served.variants->Loaded()) {
      if (model != served.model) loaded.push_back(model.get());
    }
  }
  memory.variants = static_cast<int>(loaded.size());
  for (const runtime::CompiledModel* model : loaded) add_held(model);
  return memory;
}

absl::Status ModelManager::Unload(const std::string& name) {
  std::optional<std::map<int64_t, ServedModel>> gone;  // released outside the lock
  {
    absl::MutexLock lock(&mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      return absl::NotFoundError(absl::StrCat("no model named '", name, "'"));
    }
    gone = std::move(it->second);
    models_.erase(it);
  }
  states_.Forget(name);
  inference_stats_.Forget(name);
  request_histograms_.Forget(name);
  gone.reset();
  cache_.Trim();  // its kernels, unless another model shares them, may go now
  return absl::OkStatus();
}

absl::Status ModelManager::UnloadVersion(const std::string& name, int64_t version) {
  std::optional<ServedModel> gone;  // released outside the lock
  bool last = false;
  {
    absl::MutexLock lock(&mutex_);
    auto it = models_.find(name);
    auto found = it == models_.end() ? decltype(it->second.end()){} : it->second.find(version);
    if (it == models_.end() || found == it->second.end()) {
      return absl::NotFoundError(
          absl::StrCat("model '", name, "' has no version '", version, "' loaded"));
    }
    gone = std::move(found->second);
    it->second.erase(found);
    last = it->second.empty();
    if (last) models_.erase(it);
  }
  if (last) states_.Forget(name);
  inference_stats_.ForgetVersion(name, version);
  request_histograms_.ForgetVersion(name, version);
  gone.reset();
  cache_.Trim();
  return absl::OkStatus();
}

}  // namespace kiln::engine
