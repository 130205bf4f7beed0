#include "client/bench_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/element_type.h"
#include "client/json_output.h"
#include "client/model_file.h"
#include "common/half_float.h"

namespace kiln::client {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Pseudorandom values of one input, by kind: floats in [-0.5, 0.5), bools and
// 8-bit integers over their whole range (masks, pixels, quantized data).
// Wider integers are zero: they are mostly indices and shapes, where a random
// value would be out of range and the request refused.
std::string RandomElements(const ElementType& type, int64_t n, uint32_t* seed) {
  std::string data(n * type.size, '\0');
  auto next = [seed] {
    *seed = *seed * 1664525u + 1013904223u;
    return *seed >> 8;  // 24 bits
  };
  for (int64_t i = 0; i < n; ++i) {
    char* at = data.data() + i * type.size;
    if (type.kind == ElementType::Kind::kFloat) {
      const float f = static_cast<float>(next()) / static_cast<float>(1 << 24) - 0.5f;
      if (type.datatype == "FP32") {
        std::memcpy(at, &f, 4);
      } else if (type.datatype == "FP64") {
        const double d = f;
        std::memcpy(at, &d, 8);
      } else {
        const uint16_t h = type.datatype == "FP16" ? FloatToHalf(f) : FloatToBFloat16(f);
        std::memcpy(at, &h, 2);
      }
    } else if (type.kind == ElementType::Kind::kBool) {
      *at = static_cast<char>(next() & 1);
    } else if (type.size == 1) {
      *at = static_cast<char>(next() & 0xff);
    }
  }
  return data;
}

// Pseudorandom inputs for the model's inputs at batch `batch`: a symbolic
// (-1) dim is the batch when it leads, else 1.
absl::StatusOr<std::vector<std::pair<std::string, NpyArray>>> MakeInputs(
    const inference::ModelMetadataResponse& meta, int batch) {
  std::vector<std::pair<std::string, NpyArray>> inputs;
  uint32_t seed = 12345;
  for (const auto& in : meta.inputs()) {
    NpyArray a;
    a.datatype = in.datatype();
    int64_t n = 1;
    for (int d = 0; d < in.shape_size(); ++d) {
      const int64_t size = in.shape(d) >= 0 ? in.shape(d) : (d == 0 ? batch : 1);
      a.shape.push_back(size);
      n *= size;
    }
    const ElementType* type = FindElementType(a.datatype);
    if (type == nullptr) {
      return absl::UnimplementedError(absl::StrCat("input '", in.name(), "' is ", a.datatype,
                                                   ", which bench cannot make values for"));
    }
    a.data = RandomElements(*type, n, &seed);
    inputs.push_back({in.name(), std::move(a)});
  }
  return inputs;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

absl::Status RunBench(KilnClient& client, const BenchOptions& options, std::ostream& out) {
  const bool loaded = !options.model.empty();
  const std::string name =
      loaded ? options.model : absl::StrCat("bench_b", options.batch, "_c", options.concurrency);
  const std::string label = loaded ? options.model : options.path;
  kiln::v1::CompileModelRequest request;
  double compile_ms = 0;
  auto timed_compile = [&]() {
    const auto start = Clock::now();
    auto r = client.Compile(request);
    compile_ms = MsBetween(start, Clock::now());
    return r;
  };
  if (!loaded) {
    if (absl::Status read = LoadModelInto(options.path, &request); !read.ok()) return read;
    request.set_model_name(name);
    *request.mutable_options() = options.compile;
    auto compiled = timed_compile();
    if (!compiled.ok()) return compiled.status();
  }
  auto meta = client.ModelMetadata(name);
  if (!meta.ok()) return meta.status();
  bool batch_is_symbolic = false, symbolic = false;
  for (const auto& in : meta->inputs()) {
    batch_is_symbolic |= in.shape_size() > 0 && in.shape(0) < 0;
    for (int64_t d : in.shape()) symbolic |= d < 0;
  }
  const bool refix = request.has_onnx_model() &&
                     ((options.batch != 1 && !batch_is_symbolic) || (options.exact && symbolic));
  if (refix) {
    // Compile again with the shapes fixed: the batch as dim 0, any other
    // symbolic dim 1.
    for (const auto& in : meta->inputs()) {
      kiln::v1::IntList& dims = (*request.mutable_options()->mutable_input_shapes())[in.name()];
      for (int d = 0; d < in.shape_size(); ++d) {
        dims.add_values(d == 0 ? options.batch : std::max<int64_t>(in.shape(d), 1));
      }
    }
    request.mutable_options()->clear_dynamic_batching();
    // The name is the bench's own, compiled just above: replace it rather
    // than be refused as a second model under one name.
    request.set_replace(true);
    auto compiled = timed_compile();
    if (!compiled.ok()) return compiled.status();
    meta = client.ModelMetadata(name);
    if (!meta.ok()) return meta.status();
  }
  absl::StatusOr<std::vector<std::pair<std::string, NpyArray>>> made =
      MakeInputs(*meta, options.batch);
  if (!made.ok()) return made.status();
  const std::vector<std::pair<std::string, NpyArray>> inputs = *std::move(made);

  // The first request of a new shape compiles it: timed apart.
  const auto first_start = Clock::now();
  if (auto r = client.Infer(name, inputs, false); !r.ok()) return r.status();
  const double first_ms = MsBetween(first_start, Clock::now());

  // C requests in flight at all times from one client thread (perf_analyzer's
  // async mode): client threads of their own would take the cores the
  // server needs on a small machine.
  if (options.warmup > 0) {
    auto warm = client.InferConcurrently(name, inputs, options.concurrency,
                                         options.warmup * options.concurrency);
    if (!warm.ok()) return warm.status();
  }
  auto warm_stats = client.GetTimingStats(name);
  const auto bench_start = Clock::now();
  auto timed = client.InferConcurrently(name, inputs, options.concurrency,
                                        options.iterations * options.concurrency);
  const double wall_s = MsBetween(bench_start, Clock::now()) / 1e3;
  if (!timed.ok()) return timed.status();
  std::vector<double> ms, server_ms;
  for (const TimedInfer& t : *timed) {
    ms.push_back(t.ms);
    server_ms.push_back(t.server_ms);
  }
  auto stats = client.GetTimingStats(name);
  if (!loaded) (void)client.UnloadModel(name);

  // Batches the server formed during the timed part: counts after minus before.
  double runs = 0, rows = 0;
  if (stats.ok() && warm_stats.ok() && stats->models_size() == 1 &&
      warm_stats->models_size() == 1) {
    for (const auto& b : stats->models(0).batch_stats()) {
      double n = b.compute_infer().count();
      for (const auto& w : warm_stats->models(0).batch_stats()) {
        if (w.batch_size() == b.batch_size()) n -= w.compute_infer().count();
      }
      runs += n;
      rows += n * b.batch_size();
    }
  }
  std::sort(ms.begin(), ms.end());
  std::sort(server_ms.begin(), server_ms.end());
  const int requests = options.iterations * options.concurrency;
  const double throughput = requests * options.batch / wall_s;
  const double mean_batch = runs > 0 ? rows / runs : 0;
  if (options.json) {
    out << WithSchemaVersion(absl::StrFormat(
        "{\"model\": %s, \"batch\": %d, \"concurrency\": %d, \"compile_ms\": %.3f, "
        "\"first_request_ms\": %.3f, \"requests\": %d, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
        "\"p95_ms\": %.4f, \"p99_ms\": %.4f, \"server_p50_ms\": %.4f, "
        "\"throughput_per_s\": %.1f, \"server_runs\": %.0f, \"mean_server_batch\": %.2f}",
        JsonQuote(label), options.batch, options.concurrency, compile_ms, first_ms, requests,
        Percentile(ms, 0.5), Percentile(ms, 0.9), Percentile(ms, 0.95), Percentile(ms, 0.99),
        Percentile(server_ms, 0.5), throughput, runs, mean_batch))
        << "\n";
  } else {
    out << absl::StrFormat(
        "%s batch %d, concurrency %d: compile %.1f ms, first request %.1f ms; %d inferences: "
        "p50 %.3f ms, p90 %.3f ms, p95 %.3f ms, p99 %.3f ms (kernels alone p50 %.3f ms); "
        "%.1f rows/s; server ran %.0f batches of %.2f rows on average\n",
        label, options.batch, options.concurrency, compile_ms, first_ms, requests,
        Percentile(ms, 0.5), Percentile(ms, 0.9), Percentile(ms, 0.95), Percentile(ms, 0.99),
        Percentile(server_ms, 0.5), throughput, runs, mean_batch);
  }
  return absl::OkStatus();
}

}  // namespace kiln::client
