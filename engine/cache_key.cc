// The cache key contract.
//
// A compiled kernel is identified by the SHA-256 (LLVM's implementation — not
// absl::Hash or std::hash, which are seeded per process) of:
//   - the cache format version (kCacheFormatVersion);
//   - the fused group's canonical structure: ops in order, typed attributes,
//     parameter and result types (dtype and shape), topology, and the bytes of
//     constants baked into the code. Never node or value names, never ids;
//   - the target: triple, CPU name, CPU features, LLVM version, Kiln version;
//   - the codegen options (CodegenOptions::ToString: the -O level, and
//     "bounds-checked" for kernels with bounds checks, so that checked and
//     unchecked kernels never stand in for each other), and the loop passes
//     the compile skipped if any (they shape the loops codegen emits but not
//     the canonical structure), and the tuning record's schedule override
//     the contraction followed if any (" tuned layout=.. tile=.."), so that
//     a tuned and an untuned kernel never stand in for each other.
// Each component is length-prefixed before hashing, so no two different
// component lists hash the same bytes. A key match is not proof: a hit also
// compares the components themselves (KernelKey::SameIdentity), so a collision
// is a miss.
#include "engine/cache_key.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/version.h"

namespace kiln::engine {
namespace {

void AppendComponent(std::string& out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(&out, name, ":", value.size(), ":", value, ";");
}

// "p0:float32[4,16]" tokens of a canonical form.
std::vector<std::string> ParamTypes(const std::string& canonical) {
  std::vector<std::string> types;
  for (absl::string_view part : absl::StrSplit(canonical, ';')) {
    if (!part.empty() && part[0] == 'p') types.emplace_back(part);
  }
  return types;
}

}  // namespace

TargetDescription TargetDescription::Host() {
  const codegen::HostTarget& host = codegen::GetHostTarget();
  TargetDescription t;
  t.triple = host.triple;
  t.cpu = host.cpu;
  t.features = absl::StrJoin(host.features, ",");
  t.llvm_version = codegen::LlvmVersionString();
  t.kiln_version = kKilnVersion;
  return t;
}

KernelKey MakeKernelKey(const KernelSpec& spec, const TargetDescription& target,
                        const codegen::CodegenOptions& options) {
  KernelKey key;
  key.canonical = spec.canonical;
  key.target = target;
  key.options = options.ToString();
  if (!spec.skipped_loop_passes.empty()) {
    absl::StrAppend(&key.options, " without ", spec.skipped_loop_passes);
  }
  if (!spec.tuned.empty()) absl::StrAppend(&key.options, " tuned ", spec.tuned);
  if (!spec.knobs.empty()) absl::StrAppend(&key.options, " knobs ", spec.knobs);
  std::string material;
  AppendComponent(material, "format", std::to_string(kCacheFormatVersion));
  AppendComponent(material, "structure", key.canonical);
  AppendComponent(material, "triple", target.triple);
  AppendComponent(material, "cpu", target.cpu);
  AppendComponent(material, "features", target.features);
  AppendComponent(material, "llvm", target.llvm_version);
  AppendComponent(material, "kiln", target.kiln_version);
  AppendComponent(material, "options", key.options);
  key.hex = Sha256Hex(material);
  return key;
}

std::vector<std::string> CanonicalOps(const std::string& canonical) {
  std::vector<std::string> ops;
  for (absl::string_view part : absl::StrSplit(canonical, ';')) {
    const size_t eq = part.find('=');
    const size_t paren = part.find('(');
    if (part.empty() || part[0] != 'n' || eq == absl::string_view::npos ||
        paren == absl::string_view::npos || paren < eq) {
      continue;
    }
    ops.emplace_back(part.substr(eq + 1, paren - eq - 1));
  }
  return ops;
}

std::string ExplainDifference(const KernelKey& key, const KernelKey& neighbour) {
  std::vector<std::string> diffs;
  auto compare = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) diffs.push_back(absl::StrCat(what, " ", a, " vs cached ", b));
  };
  if (key.canonical == neighbour.canonical) {
    compare("triple", key.target.triple, neighbour.target.triple);
    compare("cpu", key.target.cpu, neighbour.target.cpu);
    if (key.target.features != neighbour.target.features) diffs.push_back("cpu features differ");
    compare("llvm", key.target.llvm_version, neighbour.target.llvm_version);
    compare("kiln", key.target.kiln_version, neighbour.target.kiln_version);
    compare("options", key.options, neighbour.options);
    return absl::StrCat("same structure, other ", absl::StrJoin(diffs, ", "));
  }
  std::vector<std::string> a = ParamTypes(key.canonical), b = ParamTypes(neighbour.canonical);
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) return absl::StrCat("same ops, other shapes: ", a[i], " vs cached ", b[i]);
  }
  return "same ops, other attributes, shapes or constants";
}

}  // namespace kiln::engine
