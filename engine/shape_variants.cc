#include "engine/shape_variants.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "compiler/ir/verifier.h"

namespace kiln::engine {
namespace {

// Last-use stamps, comparable across every model's variants: the memory
// budget unloads the least recently used of them all.
uint64_t NextUse() {
  static std::atomic<uint64_t> clock{0};
  return ++clock;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> BindSymbols(const ModelSignature& signature,
                                                              const SymbolBinding& binding) {
  std::set<std::string> used;
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorSignature& in : signature.inputs) {
    std::vector<int64_t> shape = in.dims;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != TensorSignature::kSymbolicDim) continue;
      if (in.symbols[d].empty()) {
        shape[d] = 1;
        continue;
      }
      auto it = binding.find(in.symbols[d]);
      if (it == binding.end()) {
        return absl::InvalidArgumentError(absl::StrCat("no size for symbol '", in.symbols[d],
                                                       "' (input '", in.name, "' dim ", d, ")"));
      }
      shape[d] = it->second;
      used.insert(it->first);
    }
    shapes.push_back(std::move(shape));
  }
  for (const auto& [symbol, size] : binding) {
    if (!used.count(symbol)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model's inputs have no symbolic dim named '", symbol, "'"));
    }
  }
  return shapes;
}

std::string VariantKeyToString(const ModelSignature& signature, const VariantKey& key) {
  std::vector<std::string> parts;
  const std::vector<TensorSignature>& inputs = signature.inputs;
  for (size_t i = 0, v = inputs.size(); i < inputs.size() && i < key.size(); ++i) {
    parts.push_back(absl::StrCat(inputs[i].name, "=", ShapeToString(key[i])));
    if (inputs[i].decides_shapes && v < key.size()) {
      parts.push_back(absl::StrCat(inputs[i].name, "=", ShapeToString(key[v++])));
    }
  }
  return absl::StrJoin(parts, " ");
}

absl::Status ValidateSymbolRanges(const ModelSignature& signature, const SymbolRanges& ranges) {
  std::set<std::string> symbols;
  for (const TensorSignature& in : signature.inputs) {
    for (const std::string& s : in.symbols) {
      if (!s.empty()) symbols.insert(s);
    }
  }
  for (const auto& [symbol, range] : ranges) {
    if (!symbols.count(symbol)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a range for '", symbol, "', but the model's inputs have no symbolic dim of that name",
          symbols.empty() ? std::string(" (they have none)")
                          : absl::StrCat(" (they have: ", absl::StrJoin(symbols, ", "), ")")));
    }
    if (range.min < 1 || range.max < range.min) {
      return absl::InvalidArgumentError(absl::StrCat("the range of '", symbol, "' is ", range.min,
                                                     "..", range.max,
                                                     "; it needs 1 <= min <= max"));
    }
  }
  return absl::OkStatus();
}

ShapeVariants::ShapeVariants(ModelSignature signature, SymbolRanges ranges,
                             GraphForShapes graph_for, CompileVariant compile, int max_variants)
    : signature_(std::move(signature)),
      ranges_(std::move(ranges)),
      graph_for_(std::move(graph_for)),
      compile_(std::move(compile)),
      max_variants_(std::max(1, max_variants)) {}

void ShapeVariants::Add(const std::vector<std::vector<int64_t>>& shapes,
                        std::shared_ptr<runtime::CompiledModel> model) {
  auto slot = std::make_shared<Slot>();
  slot->ready = true;
  slot->model = std::move(model);
  absl::MutexLock lock(&mutex_);
  slot->last_use = NextUse();
  slots_[shapes] = std::move(slot);
  EvictBeyondBound();
}

absl::Status ShapeVariants::Check(const std::vector<std::vector<int64_t>>& key) const {
  size_t value_inputs = 0;
  for (const TensorSignature& in : signature_.inputs) value_inputs += in.decides_shapes;
  if (key.size() != signature_.inputs.size() + value_inputs) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", signature_.inputs.size(),
                                                   " inputs; got ", key.size()));
  }
  const std::vector<std::vector<int64_t>> shapes(key.begin(),
                                                 key.begin() + signature_.inputs.size());
  for (size_t i = 0, v = shapes.size(); i < shapes.size(); ++i) {
    if (!signature_.inputs[i].decides_shapes) continue;
    absl::StatusOr<int64_t> n = CheckedNumElements(shapes[i]);
    if (n.ok() && *n != static_cast<int64_t>(key[v].size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", signature_.inputs[i].name, "' has ", key[v].size(),
                       " values for shape ", ShapeToString(shapes[i])));
    }
    ++v;
  }
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (size, where)
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorSignature& in = signature_.inputs[i];
    const std::vector<int64_t>& shape = shapes[i];
    if (shape.size() != in.dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' has rank ",
                                                     in.dims.size(), ", got shape ",
                                                     ShapeToString(shape)));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (in.dims[d] != TensorSignature::kSymbolicDim) {
        if (shape[d] != in.dims[d]) {
          return absl::InvalidArgumentError(
              absl::StrCat("input '", in.name, "' dim ", d, " is ", in.dims[d],
                           " in the model, got ", shape[d], " (shape ", ShapeToString(shape),
                           ")"));
        }
        continue;
      }
      const std::string& symbol = in.symbols[d];
      const std::string named = symbol.empty() ? "" : absl::StrCat(" ('", symbol, "')");
      if (shape[d] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' dim ", d, named,
                                                       " must be at least 0, got ", shape[d]));
      }
      if (symbol.empty()) continue;
      const std::string where = absl::StrCat("input '", in.name, "' dim ", d);
      if (auto range = ranges_.find(symbol); range != ranges_.end() &&
                                             (shape[d] < range->second.min ||
                                              shape[d] > range->second.max)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, named, " is ", shape[d], ", outside the model's declared range ",
            range->second.min, "..", range->second.max));
      }
      auto [it, fresh] = bound.emplace(symbol, std::make_pair(shape[d], where));
      if (!fresh && it->second.first != shape[d]) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, named, " is ", shape[d], " but ", it->second.second, " gives '", symbol,
            "' as ", it->second.first));
      }
    }
    absl::StatusOr<int64_t> n = CheckedNumElements(shape);
    if (!n.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", in.name, "': ", n.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> ShapeVariants::Await(Slot& slot) {
  while (!slot.ready) compiled_.Wait(&mutex_);
  if (!slot.status.ok()) return slot.status;
  slot.last_use = NextUse();
  return slot.model;
}

namespace {

// Errors that the same shape would meet again (the model cannot take it,
// or it is larger than a server limit allows), as against ones a later try
// may not (a busy budget, a deadline).
bool Deterministic(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsUnimplemented(s) ||
         absl::IsFailedPrecondition(s) || absl::IsOutOfRange(s) ||
         (absl::IsResourceExhausted(s) && s.GetPayload(kLimitPayload).has_value());
}

}  // namespace

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> ShapeVariants::Get(
    const std::vector<std::vector<int64_t>>& shapes) {
  {
    absl::MutexLock lock(&mutex_);
    auto it = slots_.find(shapes);
    if (it != slots_.end()) {
      std::shared_ptr<Slot> slot = it->second;
      return Await(*slot);
    }
  }
  absl::Status valid = Check(shapes);
  if (!valid.ok()) return valid;
  std::shared_ptr<Slot> slot;
  {
    absl::MutexLock lock(&mutex_);
    auto [it, fresh] = slots_.emplace(shapes, nullptr);
    if (!fresh) {  // another caller started this shape meanwhile
      slot = it->second;
      return Await(*slot);
    }
    it->second = slot = std::make_shared<Slot>();
    ++compiles_;
  }
  // Compile outside the lock: other shapes are served meanwhile.
  return Fill(shapes, slot);
}

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> ShapeVariants::Fill(
    const std::vector<std::vector<int64_t>>& shapes, const std::shared_ptr<Slot>& slot) {
  ShapeBinding binding;
  ValueBinding values;
  for (size_t i = 0, v = signature_.inputs.size(); i < signature_.inputs.size(); ++i) {
    binding[signature_.inputs[i].name] = shapes[i];
    if (signature_.inputs[i].decides_shapes) values[signature_.inputs[i].name] = shapes[v++];
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> model = [&]() {
    absl::StatusOr<Graph> graph = graph_for_(binding, values);
    if (!graph.ok()) {
      return absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(graph.status());
    }
    if (std::shared_ptr<runtime::CompiledModel> slices = AsRowChunks(shapes, *graph)) {
      return absl::StatusOr<std::shared_ptr<runtime::CompiledModel>>(std::move(slices));
    }
    return compile_(*std::move(graph));
  }();
  if (model.ok()) {
    last_compile_ns_.store(absl::ToInt64Nanoseconds(absl::Now() - start),
                           std::memory_order_relaxed);
  }
  absl::MutexLock lock(&mutex_);
  slot->ready = true;
  slot->last_use = NextUse();
  if (model.ok()) {
    slot->model = *std::move(model);
  } else {
    slot->status = model.status();
    // A shape the model cannot take stays refused (as a variant, so the
    // bound covers it) rather than compiled again per request; after a
    // transient failure a later request tries again.
    if (!Deterministic(slot->status)) slots_.erase(shapes);
  }
  compiled_.SignalAll();
  EvictBeyondBound();
  if (!slot->status.ok()) return slot->status;
  return slot->model;
}

std::shared_ptr<runtime::CompiledModel> ShapeVariants::AsRowChunks(
    const std::vector<std::vector<int64_t>>& shapes, const Graph& graph) {
  if (shapes.size() != signature_.inputs.size() || shapes.empty()) return nullptr;
  for (const std::vector<int64_t>& shape : shapes) {
    if (shape.empty() || shape[0] != shapes[0][0]) return nullptr;
  }
  const int64_t rows = shapes[0][0];
  // A slice is this model's variant for its rows, shared with requests of
  // that batch; a slice that cannot compile (outside a declared range, say)
  // leaves the batch to compile whole.
  // A whole-batch tail and the slices' head compile as models of their own
  // (not variants): the graph at the slice's rows, and the usual compile.
  TailCompiler tail;
  tail.graph_for = [&](int64_t slice_rows) {
    ShapeBinding binding;
    for (size_t i = 0; i < signature_.inputs.size(); ++i) {
      std::vector<int64_t> shape = shapes[i];
      shape[0] = slice_rows;
      binding[signature_.inputs[i].name] = std::move(shape);
    }
    return graph_for_(binding, ValueBinding{});
  };
  tail.compile = [&](Graph part, const std::string&) { return compile_(std::move(part)); };
  RowChunkReport report;
  absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> chunked = RowChunkedModel(
      graph, rows, row_chunks_,
      [&](int64_t slice_rows) -> absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> {
        std::vector<std::vector<int64_t>> slice = shapes;
        for (std::vector<int64_t>& shape : slice) shape[0] = slice_rows;
        return Get(slice);
      },
      &report, &tail);
  if (!report.why_no_tail.empty()) {
    Log(LogLevel::kWarning, "row_chunks",
        absl::StrCat("batch ", rows, ": ", report.why_no_tail, "; the slices run the whole graph"));
  }
  return chunked.ok() ? *std::move(chunked) : nullptr;
}

void ShapeVariants::Abandon(const std::vector<std::vector<int64_t>>& shapes,
                            const std::shared_ptr<Slot>& slot, const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  slot->ready = true;
  slot->status = status;
  auto it = slots_.find(shapes);
  if (it != slots_.end() && it->second == slot) slots_.erase(it);
  compiled_.SignalAll();
}

void ShapeVariants::CompileSoon(const std::vector<std::vector<int64_t>>& shapes,
                                const Schedule& schedule) {
  if (!Check(shapes).ok()) return;
  std::shared_ptr<Slot> slot;
  {
    absl::MutexLock lock(&mutex_);
    auto [it, fresh] = slots_.emplace(shapes, nullptr);
    if (!fresh) return;  // loaded, compiling or refused
    it->second = slot = std::make_shared<Slot>();
    ++compiles_;
  }
  schedule([self = shared_from_this(), shapes, slot](bool cancelled) {
    if (cancelled) {
      self->Abandon(shapes, slot, absl::UnavailableError("the server is shutting down"));
    } else {
      (void)self->Fill(shapes, slot);
    }
  });
}

std::optional<ShapeVariants::LargerBatch> ShapeVariants::FindLargerBatch(
    const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return std::nullopt;
  for (const std::vector<int64_t>& shape : shapes) {
    if (shape.empty() || shape[0] != shapes[0][0]) return std::nullopt;
  }
  absl::MutexLock lock(&mutex_);
  Slot* best = nullptr;
  int64_t best_rows = 0;
  for (const auto& [loaded, slot] : slots_) {
    if (!slot->ready || !slot->status.ok() || loaded.size() != shapes.size()) continue;
    const int64_t rows = loaded[0].empty() ? 0 : loaded[0][0];
    if (rows <= shapes[0][0] || (best != nullptr && rows >= best_rows)) continue;
    bool fits = true;
    for (size_t i = 0; i < shapes.size() && fits; ++i) {
      fits = loaded[i].size() == shapes[i].size() && loaded[i][0] == rows &&
             std::equal(shapes[i].begin() + 1, shapes[i].end(), loaded[i].begin() + 1);
    }
    if (!fits) continue;
    best = slot.get();
    best_rows = rows;
  }
  if (best == nullptr) return std::nullopt;
  best->last_use = NextUse();
  return LargerBatch{best->model, best_rows};
}

std::shared_ptr<runtime::CompiledModel> ShapeVariants::Peek(
    const std::vector<std::vector<int64_t>>& shapes) {
  absl::MutexLock lock(&mutex_);
  auto it = slots_.find(shapes);
  if (it == slots_.end() || !it->second->ready || !it->second->status.ok()) return nullptr;
  it->second->last_use = NextUse();
  return it->second->model;
}

void ShapeVariants::EvictBeyondBound() {
  while (true) {
    int ready = 0;
    auto oldest = slots_.end();
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if (!it->second->ready) continue;
      ++ready;
      if (oldest == slots_.end() || it->second->last_use < oldest->second->last_use) oldest = it;
    }
    if (ready <= max_variants_) return;
    slots_.erase(oldest);  // callers still running on it hold their own reference
  }
}

int64_t ShapeVariants::compiles() const {
  absl::MutexLock lock(&mutex_);
  return compiles_;
}

std::vector<std::pair<std::vector<std::vector<int64_t>>, std::shared_ptr<runtime::CompiledModel>>>
ShapeVariants::Loaded() const {
  absl::MutexLock lock(&mutex_);
  std::vector<std::pair<std::vector<std::vector<int64_t>>, std::shared_ptr<runtime::CompiledModel>>>
      out;
  for (const auto& [shapes, slot] : slots_) {
    if (slot->ready && slot->status.ok()) out.emplace_back(shapes, slot->model);
  }
  return out;
}

std::optional<ShapeVariants::IdleVariant> ShapeVariants::ColdestIdle() const {
  absl::MutexLock lock(&mutex_);
  std::optional<IdleVariant> coldest;
  for (const auto& [key, slot] : slots_) {
    // Under mutex_ nobody can take a new reference (every one comes from
    // slots_), so a count of one, the set's own, stays one.
    if (!slot->ready || !slot->model || slot->model.use_count() > 1) continue;
    if (!coldest || slot->last_use < coldest->last_use) coldest = IdleVariant{key, slot->last_use};
  }
  return coldest;
}

std::shared_ptr<runtime::CompiledModel> ShapeVariants::UnloadIfIdle(const VariantKey& key) {
  absl::MutexLock lock(&mutex_);
  auto it = slots_.find(key);
  if (it == slots_.end() || !it->second->ready || !it->second->model ||
      it->second->model.use_count() > 1) {
    return nullptr;
  }
  std::shared_ptr<runtime::CompiledModel> model = std::move(it->second->model);
  slots_.erase(it);
  return model;
}

bool ServePaddedWhileCompiling(int64_t padded_run_ns, int64_t compile_ns) {
  if (padded_run_ns <= 0 || compile_ns <= 0) return true;  // not known yet
  return padded_run_ns < compile_ns;
}

}  // namespace kiln::engine
