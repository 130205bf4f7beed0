#include "engine/row_chunks.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/passes/row_independence.h"

namespace kiln::engine {

namespace {

// This core's L2 (2 MB on the Xeon, 1 MB on Zen 5; 1 MB when the host does
// not say): a value larger goes through memory from one kernel to the next.
double CacheBytes() {
  static const double bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? static_cast<double>(l2) : double{1 << 20};
  }();
  return bytes;
}
// Uses of each weight per slice below which a kernel is weight-bound: a
// matrix-vector product (one row of a dense layer) reads each weight once.
constexpr double kWeightReuse = 16;

// One kernel of the one-row program.
struct KernelBytes {
  // Its largest constant operand when it reads it whole (a contraction:
  // each weight in at least one multiply-add); 0 for none, and for a
  // gather, which reads the rows it is asked for, as many a slice as whole.
  double weights = 0;
  double output = 0;  // what it writes
  double reuse = 0;   // multiply-adds per weight
};

KernelBytes Measure(const Program& p, const KernelCall& k) {
  KernelBytes b;
  double weight_elements = 0;
  for (size_t a = 0; a + 1 < k.args.size(); ++a) {
    const ValueSpec& v = p.values[k.args[a]];
    if (v.kind != ValueSpec::Kind::kConstant) continue;
    if (static_cast<double>(v.type.ByteSize()) > b.weights) {
      b.weights = static_cast<double>(v.type.ByteSize());
      weight_elements = static_cast<double>(v.type.NumElements());
    }
  }
  b.output = static_cast<double>(p.values[k.args.back()].type.ByteSize());
  if (weight_elements > 0) b.reuse = k.flops / (2 * weight_elements);
  // y[M, N] = x[M, K] w[K, N]: 2 M K N flops over K N weights, reuse M:
  // 1 for one row of a dense layer, the output pixels for a conv.
  if (b.reuse < 1) b.weights = 0;
  return b;
}

// Whether one row's share of some value fits in cache where the whole
// batch's does not: without one, no kernel of any fusion can gain from
// slices (ChunkRowsFor would keep the batch whole), so the one-row model
// need not be compiled to ask.
bool SomeValueOutgrowsTheCache(const Graph& whole, int64_t rows) {
  for (const Node* n : whole.AllNodes()) {
    if (!n->is_op() || !n->type_known) continue;
    const double bytes = static_cast<double>(n->type.ByteSize());
    if (bytes > CacheBytes() && bytes / rows <= CacheBytes()) return true;
  }
  return false;
}

}  // namespace

int64_t ChunkRowsFor(const Program& one_row, int64_t rows) {
  std::vector<KernelBytes> kernels;
  for (const KernelCall& k : one_row.kernels) kernels.push_back(Measure(one_row, k));
  for (int64_t chunk = 1; chunk < rows; ++chunk) {
    if (rows % chunk != 0) continue;
    // Slices stream a weight once each where the whole batch's kernel used
    // it for every row from registers or cache: (slices - 1) more reads of
    // it, where a slice's rows use it fewer than kWeightReuse times.
    // Against that, every intermediate a slice keeps in cache that the
    // whole batch wrote and read back through memory.
    double weight_penalty = 0, activations_saved = 0;
    for (const KernelBytes& b : kernels) {
      if (b.weights > 0 && b.reuse * chunk < kWeightReuse) {
        weight_penalty += (rows / chunk - 1) * b.weights;
      }
      if (b.output * rows > CacheBytes() && b.output * chunk <= CacheBytes()) {
        activations_saved += 2 * b.output * rows;
      }
    }
    if (weight_penalty < activations_saved) return chunk;
  }
  return rows;
}

absl::StatusOr<std::shared_ptr<runtime::CompiledModel>> RowChunkedModel(
    const Graph& whole, int64_t rows, RowChunkSetting setting, const ModelForRows& model_for,
    std::string* why_whole) {
  auto whole_because = [&](std::string why) {
    if (why_whole != nullptr) *why_whole = std::move(why);
    return nullptr;
  };
  if (setting.rows == RowChunkSetting::kOff) return whole_because("row chunks are off");
  if (rows < 2) return whole_because("a batch of one row");
  if (setting.rows > 0 && (setting.rows >= rows || rows % setting.rows != 0)) {
    return whole_because(absl::StrCat(setting.rows, " rows do not divide ", rows, " in parts"));
  }
  if (absl::Status s = CheckRowsIndependent(whole, rows); !s.ok()) {
    return whole_because(std::string(s.message()));
  }
  int64_t chunk = setting.rows;
  std::shared_ptr<runtime::CompiledModel> part;
  if (chunk == RowChunkSetting::kAuto && !SomeValueOutgrowsTheCache(whole, rows)) {
    return whole_because("every value of the whole batch fits in cache");
  }
  if (chunk == RowChunkSetting::kAuto) {
    KILN_ASSIGN_OR_RETURN(part, model_for(1));
    chunk = ChunkRowsFor(part->program(), rows);
    if (chunk >= rows || chunk < 1 || rows % chunk != 0) {
      return whole_because(
          "slices would stream the weights again for more than the cache they keep saves");
    }
    if (chunk != 1) part.reset();
  }
  if (part == nullptr) {
    KILN_ASSIGN_OR_RETURN(part, model_for(chunk));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CompiledModel> chunked,
                        runtime::CompiledModel::CreateRowChunked(std::move(part), rows / chunk));
  return std::shared_ptr<runtime::CompiledModel>(std::move(chunked));
}

}  // namespace kiln::engine
